"""Predictions against real figures, run from the repository root:

- `python -m tools.accuracy.corpus [CORPUS_DIR]`: the log classifier on real user logs (`make corpus`);
- `python -m tools.accuracy.calibration [CALIBRATION_DIR]`: the estimator on logged measurements
  (`make calibration`; tests/test_estimate_calibration.py asserts its targets);
- `python -m tools.accuracy.vllm_cpu STUDY_DIR...`: one real vLLM-CPU launch predicting the others
  (docs/real-vllm.md §3);
- `python -m tools.accuracy.known_threads SOURCE...`: whether a thread is already in a corpus, for whoever gathers one.
"""

from tools import REPO

# The corpora of real user logs: the shared one beside the checkout (absent in a lone clone), the repository's extra one
# and its fresh ones (docs/corpus-protocol.md).
DEFAULT_DIR = REPO.parent / "shared" / "corpus" / "logs"
EXTRA_DIR = REPO / "tests" / "data" / "corpus-extra"
FRESH_DIRS = sorted((REPO / "tests" / "data").glob("corpus-fresh-*"))

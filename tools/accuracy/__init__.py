"""Predictions against real figures, run from the repository root:

- `python -m tools.accuracy.corpus [CORPUS_DIR]`: the log classifier on real user logs (`make corpus`);
- `python -m tools.accuracy.calibration [CALIBRATION_DIR]`: the estimator on logged measurements
  (`make calibration`; tests/test_estimate_calibration.py asserts its targets);
- `python -m tools.accuracy.vllm_cpu STUDY_DIR...`: one real vLLM-CPU launch predicting the others
  (docs/real-vllm.md §3).
"""

"""Data taken from the real engines into the repository, run from the repository root:

- `python -m tools.capture.flag_tables [SOURCE_DIR]`: the dumped flag tables into autotune/data/flags;
- `python -m tools.capture.vllm_flags [--check]`: an installed vLLM's parser as a flag table
  (tests/real/test_vllm_cpu_real.py checks the shipped one);
- `python -m tools.capture.vllm_fixtures`: vLLM-CPU's real logs, one per outcome, as test fixtures.
"""

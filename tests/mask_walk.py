"""Walk valid strings through a compiled constraint and compare every mask with the oracle.

Shared by the CI test (a subset of the corpus) and ``bench/exact_masks.py`` (all of it).
"""

from __future__ import annotations

from regex_oracle import Oracle

import tether
from tether.engine import bitmask


def greedy_tokens(vocab: tether.Vocabulary, text: bytes) -> list[int]:
    """Longest-match tokenization over the vocabulary's non-special tokens."""
    tokens = vocab.segment(text)
    if tokens is None:
        raise ValueError(f"no token sequence spells {text!r}")
    return tokens


def compare_walk(vocab: tether.Vocabulary, pattern: str, example: str,
                 byte_tokens: bool = False) -> list[str]:
    """Walk ``example`` (greedy tokens, or one token per byte) and return a description
    of every state whose mask differs from the oracle (empty list: all equal)."""
    compiled = tether.compile(tether.Regex(pattern), vocab)
    oracle = Oracle(pattern)
    special = [vocab.is_special(i) for i in range(vocab.size)]
    data = example.encode()
    if byte_tokens:
        tokens = [t for b in data for t in greedy_tokens(vocab, bytes([b]))]
    else:
        tokens = greedy_tokens(vocab, data)
    matcher = compiled.matcher()
    problems = []
    prefix = b""
    for step in range(len(tokens) + 1):
        ours = set(bitmask.to_ids(matcher.mask(), vocab.size).tolist())
        expected = oracle.allowed(prefix, vocab.tokens, special, set(vocab.eos_ids))
        if ours != expected:
            extra = sorted(ours - expected)[:5]
            missing = sorted(expected - ours)[:5]
            problems.append(
                f"{pattern!r} after {prefix!r}: extra {[vocab.token_bytes(i) for i in extra]}"
                f" missing {[vocab.token_bytes(i) for i in missing]}")
        if step < len(tokens):
            matcher.consume(tokens[step])
            prefix += vocab.token_bytes(tokens[step])
    if not matcher.eos_allowed():
        problems.append(f"{pattern!r}: end of generation not allowed after {example!r}")
    return problems

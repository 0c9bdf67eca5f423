"""Words across token boundaries: where the word runs of every token lie, computed once
per vocabulary, so the word domains (lexicon scores, forbidden words) do lookups per step.

A *word byte* is an ASCII letter, digit or ``_``, or any byte ≥ 0x80 (UTF-8 letters);
a *run* is a maximal stretch of word bytes. Seen from a token, a run either continues
the word the text ends in (it starts at the token's first byte) or starts after a
non-word byte inside the token (a word boundary); it is *closed* if a non-word byte
follows it inside the token, *open* if it reaches the token's end.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from tether.errors import TetherError
from tether.vocab import Vocabulary

_RUN = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | \
    frozenset(range(0x80, 0x100))
_MAX_CACHED = 4

Index = dict[bytes, np.ndarray]  # run bytes -> sorted token ids


@dataclass(frozen=True)
class TokenWords:
    """The word runs of every non-special token of a vocabulary, by run bytes.

    * ``pure`` — tokens made only of word bytes (they extend the current word);
    * ``lead`` — every other token, by its leading run (``b""`` if it starts with a
      non-word byte): the run that closes the current word;
    * ``lead_only`` — tokens whose only run is a non-empty leading one (``"al("``);
    * ``tail`` — tokens ending in an open run that starts after a boundary (``" foo"``);
    * ``inner`` — tokens with a closed run between two boundaries (``" foo("``), by
      each such run;
    * ``last_inner`` — of those, the ones with no open tail, by their last inner run.
    """

    pure: Index
    lead: Index
    lead_only: Index
    tail: Index
    inner: Index
    last_inner: Index


def is_word(word: bytes) -> bool:
    """Whether ``word`` is a non-empty run of word bytes."""
    return bool(word) and all(b in _WORD_BYTES for b in word)


def check_words(words: list[bytes]) -> None:
    """Raise unless every word is a non-empty run of word bytes."""
    for w in words:
        if not is_word(w):
            raise TetherError(f"{w!r} is not a word: use letters, digits, _ or non-ASCII")


def trailing_run(data: bytes, limit: int) -> bytes | None:
    """The word bytes ``data`` ends with (``b""`` at a boundary); ``None`` if the run is
    longer than ``limit``."""
    i = len(data)
    while i > 0 and data[i - 1] in _WORD_BYTES:
        i -= 1
        if len(data) - i > limit:
            return None
    return data[i:]


def extend(run: bytes | None, piece: bytes, prefixes: frozenset[bytes]) -> bytes | None:
    """The trailing run after reading ``piece``, kept only while it is in ``prefixes``
    (``None``: a run that is no prefix; ``b""``: at a boundary)."""
    for b in piece:
        if b in _WORD_BYTES:
            run = run + bytes((b,)) if run is not None and run + bytes((b,)) in prefixes else None
        else:
            run = b""
    return run


_cache: dict[str, TokenWords] = {}
_lock = threading.Lock()


def token_words(vocab: Vocabulary) -> TokenWords:
    """The :class:`TokenWords` of ``vocab`` (built once, cached by fingerprint)."""
    key = vocab.fingerprint
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    built = _build(vocab)
    with _lock:
        _cache[key] = built
        while len(_cache) > _MAX_CACHED:
            _cache.pop(next(iter(_cache)))
    return built


def _build(vocab: Vocabulary) -> TokenWords:
    tables: dict[str, defaultdict[bytes, list[int]]] = {
        name: defaultdict(list) for name in ("pure", "lead", "lead_only", "tail", "inner",
                                             "last_inner")}
    special = vocab.special
    for t, data in enumerate(vocab.tokens):
        if special[t]:
            continue
        runs = [(m.start(), m.end()) for m in _RUN.finditer(data)]
        n = len(data)
        if runs and runs[0] == (0, n):
            tables["pure"][data].append(t)
            continue
        lead_end = runs[0][1] if runs and runs[0][0] == 0 else 0
        tables["lead"][data[:lead_end]].append(t)
        inner = [(s, e) for s, e in runs if s > 0 and e < n]
        for s, e in inner:
            tables["inner"][data[s:e]].append(t)
        if runs and runs[-1][0] > 0 and runs[-1][1] == n:
            tables["tail"][data[runs[-1][0]:]].append(t)
        elif inner:
            s, e = inner[-1]
            tables["last_inner"][data[s:e]].append(t)
        elif lead_end:
            tables["lead_only"][data[:lead_end]].append(t)
    return TokenWords(**{name: {k: np.array(v, dtype=np.int64) for k, v in table.items()}
                         for name, table in tables.items()})

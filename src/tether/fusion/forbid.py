"""`forbid_words`: a hard domain meaning "never these words" — intersect it with any
grammar (as Types or Imports) for "this grammar, without these words".

The language is every text in which no *whole word* (a maximal run of word bytes, see
:mod:`tether.fusion.words`) is a forbidden one: ``eval(`` is out, ``evaluate`` is fine.
Masks are exact for that language: a token is rejected iff it closes a forbidden word
(the run the text ends in plus the token's leading run, or a run wholly inside the
token); end of generation is rejected while the text ends in a forbidden word. A word
still open at the end of a token is allowed — it may yet become another word.

The state is the word the text ends in, kept only while it is a prefix of a forbidden
word; each state's mask is computed once per (vocabulary, words) and shared by every
matcher, so per step the work is a lookup. Regexes could not say this: tether's regex
engine has no lookaround.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import REJECT, Forced, StateStackMatcher
from tether.fusion.words import check_words, extend, token_words
from tether.vocab import Vocabulary


class ForbiddenWordsTable:
    """The per-state masks of one word list over one vocabulary (shared, thread-safe)."""

    def __init__(self, vocab: Vocabulary, words: Iterable[str | bytes]) -> None:
        self.vocab = vocab
        self.words = frozenset(w.encode() if isinstance(w, str) else bytes(w) for w in words)
        check_words(list(self.words))
        self.prefixes = frozenset(w[:k] for w in self.words for k in range(1, len(w) + 1))
        self._index = token_words(vocab)
        self._eos = bitmask.from_ids(sorted(vocab.eos_ids), vocab.size)
        allowed = ~vocab.special
        for w in self.words:  # a forbidden word wholly inside a token
            hit = self._index.inner.get(w)
            if hit is not None:
                allowed[hit] = False
        self._base = bitmask.from_bool(allowed)
        self.empty = np.zeros_like(self._base)
        self.empty.flags.writeable = False
        self._masks: dict[bytes | None, np.ndarray] = {}
        self._lock = threading.Lock()

    def mask(self, run: bytes | None) -> np.ndarray:
        """The mask after text ending in the word ``run`` (``None``: a word that is no
        forbidden word's prefix; ``b""``: at a boundary)."""
        words = self._masks.get(run)
        if words is None:
            with self._lock:
                words = self._masks.get(run)
                if words is None:
                    words = self._masks[run] = self._compute(run)
        return words

    def _compute(self, run: bytes | None) -> np.ndarray:
        words = self._base.copy()
        if run is not None:
            for w in self.words:
                if w.startswith(run):  # the token's leading run would close w
                    hit = self._index.lead.get(w[len(run):])
                    if hit is not None:  # clear those tokens' bits (ufunc.at: repeats ok)
                        np.bitwise_and.at(words, hit >> 5,
                                          ~(np.uint32(1) << (hit & 31).astype(np.uint32)))
        if run not in self.words:
            words |= self._eos
        words.flags.writeable = False
        return words


class ForbiddenWordsMatcher(StateStackMatcher):
    """A position in a :class:`ForbiddenWordsTable` language (the Matcher interface);
    the state is the word run the text ends in."""

    def __init__(self, table: ForbiddenWordsTable) -> None:
        super().__init__(table.vocab, b"")
        self.table = table

    def mask(self) -> np.ndarray:
        if self._stopped:
            return self.table.empty
        return self.table.mask(self._states[-1])

    def is_accepting(self) -> bool:
        return self._states[-1] not in self.table.words

    def is_finished(self) -> bool:
        return self._stopped

    def forced(self) -> Forced:
        return Forced(b"", ())

    def _blank(self) -> ForbiddenWordsMatcher:
        return ForbiddenWordsMatcher(self.table)

    def _next_state(self, state: object, token_id: int, data: bytes) -> object:
        if not bitmask.is_allowed(self.table.mask(state), token_id):
            return REJECT
        return extend(state, data, self.table.prefixes)


def forbid_words(vocab: Vocabulary, words: Iterable[str | bytes]) -> ForbiddenWordsMatcher:
    """A hard domain (a matcher) that never lets the text contain one of ``words`` as a
    whole word."""
    return ForbiddenWordsMatcher(ForbiddenWordsTable(vocab, words))

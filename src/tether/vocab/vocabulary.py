"""`Vocabulary`: the token profile of one tokenizer (SPEC §2).

A vocabulary knows, for every token id, the exact bytes the token contributes when it is
decoded in the middle of a sequence, and a few flags: special/control, end of generation,
whitespace only, has a newline (LF or CR), leading space. It is immutable; everything
derived from it (the byte trie, per-constraint tables) is keyed by its ``fingerprint``.

Loaders for tokenizer files and tokenizer objects live in :mod:`tether.vocab.loaders`.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Sequence
from functools import cached_property
from os import PathLike
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.errors import TokenIdError, VocabularyError

if TYPE_CHECKING:
    from tether.vocab.trie import TokenTrie

_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")


class Vocabulary:
    """The exact bytes and flags of every token of one tokenizer.

    ``tokens[i]`` is the byte string of token ``i`` (``b""`` for ids the tokenizer does
    not use). ``special_ids`` are control tokens (never produced by a constraint's text);
    ``eos_ids`` is the end-of-generation set, a subset of the special tokens.
    """

    def __init__(
        self,
        tokens: Sequence[bytes],
        *,
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        name: str = "",
    ) -> None:
        self._tokens: tuple[bytes, ...] = tuple(bytes(t) for t in tokens)
        self.size: int = len(self._tokens)
        if self.size == 0:
            raise VocabularyError("a vocabulary needs at least one token")
        self.name = name
        special = np.zeros(self.size, dtype=bool)
        for i in special_ids:
            special[self._check(i)] = True
        eog = np.zeros(self.size, dtype=bool)
        for i in eos_ids:
            eog[self._check(i)] = True
        special |= eog
        # Ids with no bytes can never be spelled by text: treat them as control tokens.
        special |= np.fromiter((len(t) == 0 for t in self._tokens), dtype=bool,
                               count=self.size)
        special.flags.writeable = False
        eog.flags.writeable = False
        self.special: np.ndarray = special
        self.end_of_generation: np.ndarray = eog
        self.eos_ids: frozenset[int] = frozenset(int(i) for i in np.flatnonzero(eog))

    # -- per-token facts -------------------------------------------------------------
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` contributes in the middle of a sequence."""
        return self._tokens[self._check(token_id)]

    def is_special(self, token_id: int) -> bool:
        """True for control tokens (including end-of-generation tokens and unused ids)."""
        return bool(self.special[self._check(token_id)])

    def is_eos(self, token_id: int) -> bool:
        """True for end-of-generation tokens."""
        return bool(self.end_of_generation[self._check(token_id)])

    @cached_property
    def whitespace_only(self) -> np.ndarray:
        """Non-special tokens made only of ASCII whitespace."""
        return self._flag(lambda t: bool(t) and all(b in _WHITESPACE for b in t))

    @cached_property
    def has_newline(self) -> np.ndarray:
        """Non-special tokens containing LF or CR."""
        return self._flag(lambda t: b"\n" in t or b"\r" in t)

    @cached_property
    def leading_space(self) -> np.ndarray:
        """Non-special tokens starting with a space."""
        return self._flag(lambda t: t[:1] == b" ")

    @property
    def tokens(self) -> tuple[bytes, ...]:
        """All token byte strings, indexed by id."""
        return self._tokens

    # -- derived, shared structures ------------------------------------------------------
    @cached_property
    def fingerprint(self) -> str:
        """A hash of the bytes and flags of every token; keys every cache of derived data."""
        h = hashlib.sha256()
        h.update(self.size.to_bytes(8, "little"))
        for t in self._tokens:
            h.update(len(t).to_bytes(4, "little"))
            h.update(t)
        h.update(np.packbits(self.special).tobytes())
        h.update(np.packbits(self.end_of_generation).tobytes())
        return h.hexdigest()[:32]

    @cached_property
    def trie(self) -> TokenTrie:
        """The byte trie over all non-special tokens (built once, cached on disk)."""
        from tether.vocab.trie import TokenTrie

        return TokenTrie.for_vocabulary(self)

    def prefix_tokens(self, data: bytes) -> list[int]:
        """The non-special tokens whose bytes begin ``data`` (one per length, shortest
        first)."""
        ids = self._ids_by_bytes
        found = (ids.get(data[:n]) for n in range(1, min(len(data), self.max_token_bytes) + 1))
        return [t for t in found if t is not None]

    @cached_property
    def _ids_by_bytes(self) -> dict[bytes, int]:
        ids: dict[bytes, int] = {}
        for i, t in enumerate(self._tokens):
            if t and not self.special[i]:
                ids.setdefault(t, i)
        return ids

    @cached_property
    def flat_tokens(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token's bytes back to back (uint8) and where each starts (int64, one
        more than the size): token ``i`` is ``flat[offsets[i]:offsets[i + 1]]``."""
        offsets = np.zeros(self.size + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(t) for t in self._tokens])
        flat = np.frombuffer(b"".join(self._tokens), dtype=np.uint8)
        return flat, offsets

    @cached_property
    def single_byte_tokens(self) -> frozenset[int]:
        """The bytes that are a token by themselves."""
        return frozenset(t[0] for t in self._ids_by_bytes if len(t) == 1)

    @cached_property
    def max_token_bytes(self) -> int:
        """The length in bytes of the longest non-special token."""
        return max(map(len, self._ids_by_bytes), default=1)

    def segment(self, data: bytes) -> list[int] | None:
        """Token ids spelling ``data``, longest token first at each position (a valid,
        not necessarily the tokenizer's own, tokenization); ``None`` if some position
        starts no token."""
        return self.trie.longest_first(data)

    def segment_fewest(self, data: bytes) -> list[int] | None:
        """Token ids spelling ``data`` in the fewest tokens (``None``: no tokenization):
        the token paths that budgets count."""
        return self.trie.fewest(data)

    # -- loaders ----------------------------------------------------------------------
    @classmethod
    def of_bytes(cls) -> Vocabulary:
        """One token per byte, and an end token: checking a text or a constraint without
        depending on a tokenizer (the CLI's ``check``; a server validating a request
        before the model's vocabulary is at hand)."""
        return cls([bytes([b]) for b in range(256)] + [b""], eos_ids=[256], name="bytes")

    @classmethod
    def from_file(cls, path: str | PathLike[str]) -> Vocabulary:
        """Read ``tokenizer.json``, a ``*.tiktoken`` file, a SentencePiece ``*.model``
        or a ``*.gguf`` file."""
        from tether.vocab.loaders import load_file

        return load_file(path)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> Vocabulary:
        """Build the vocabulary of a transformers tokenizer object."""
        from tether.vocab.loaders import load_transformers

        return load_transformers(tokenizer)

    @classmethod
    def from_llama(cls, llama: Any) -> Vocabulary:
        """Build the vocabulary of a ``llama_cpp.Llama`` model."""
        from tether.vocab.loaders import load_llama

        return load_llama(llama)

    # -- helpers ----------------------------------------------------------------------
    def _check(self, token_id: int) -> int:
        i = token_index(token_id)
        if not 0 <= i < self.size:
            raise TokenIdError(f"token id {token_id} is outside the vocabulary (size {self.size})")
        return i

    def _flag(self, predicate: Any) -> np.ndarray:
        out = np.fromiter((predicate(t) for t in self._tokens), dtype=bool, count=self.size)
        out &= ~self.special
        out.flags.writeable = False
        return out

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Vocabulary{label} size={self.size} eos={sorted(self.eos_ids)}>"


def token_index(value: Any) -> int:
    """``value`` as a token id: an ``int`` or numpy integer (not a bool, a float or a
    string, which would silently name another token); else a :class:`TokenIdError`."""
    if isinstance(value, bool | np.bool_):
        raise TokenIdError(f"a token id must be an integer, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TokenIdError(f"a token id must be an integer, not {value!r}") from None

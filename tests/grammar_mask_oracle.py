"""A brute-force mask oracle for grammars that does not use tether's automata.

A position is an Earley column over characters (:class:`grammar_oracles.IrRecognizer`)
plus the bytes of a character not finished yet. A token is allowed iff the position
after its bytes is still a prefix of some UTF-8 encoded string of the language: every
vocabulary token is tried, sharing work along a byte trie of the tokens, and results are
memoized by position (columns are hash-consed, so equal futures share them).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from grammar_oracles import Column, IrRecognizer

# The code points UTF-8 encodes with 1, 2, 3 and 4 bytes.
_SPAN = {1: (0, 0x7F), 2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}


@functools.cache
def code_points(prefix: bytes) -> tuple[int, int, bool] | None:
    """The code points whose UTF-8 encoding starts with ``prefix`` (the bytes of at most
    one character) as a range ``lo, hi``, and whether ``prefix`` is the whole encoding;
    None when no valid encoding starts so (overlong forms and surrogates are invalid)."""
    lead = prefix[0]
    if lead < 0x80:
        size, bits = 1, lead
    elif 0xC0 <= lead < 0xE0:
        size, bits = 2, lead & 0x1F
    elif 0xE0 <= lead < 0xF0:
        size, bits = 3, lead & 0x0F
    elif 0xF0 <= lead < 0xF8:
        size, bits = 4, lead & 0x07
    else:
        return None
    tail = prefix[1:]
    if len(prefix) > size or any(not 0x80 <= b < 0xC0 for b in tail):
        return None
    lo = hi = bits
    for k in range(1, size):
        lo = lo << 6 | (tail[k - 1] & 0x3F if k <= len(tail) else 0)
        hi = hi << 6 | (tail[k - 1] & 0x3F if k <= len(tail) else 0x3F)
    lo, hi = max(lo, _SPAN[size][0]), min(hi, _SPAN[size][1])
    if lo <= 0xDFFF and hi >= 0xD800:  # a run of surrogates is at one end of the range
        lo, hi = (0xE000, hi) if lo >= 0xD800 else (lo, 0xD7FF)
    if lo > hi:
        return None
    return lo, hi, len(prefix) == size


@dataclass(frozen=True)
class Position:
    """Where a text leaves the recognizer: its column and an unfinished character."""

    column: Column
    pending: bytes = b""
    text: bytes = b""


@dataclass
class TrieNode:
    """A byte trie of token strings: the ids of the tokens that end here."""

    children: dict[int, TrieNode] = field(default_factory=dict)
    ids: list[int] = field(default_factory=list)


def token_trie(tokens: Sequence[bytes], skip: Collection[int]) -> TrieNode:
    """The trie of ``tokens`` (ids in ``skip`` and empty tokens left out)."""
    root = TrieNode()
    for i, data in enumerate(tokens):
        if i in skip or not data:
            continue
        node = root
        for byte in data:
            node = node.children.setdefault(byte, TrieNode())
        node.ids.append(i)
    return root


class MaskOracle:
    """The tokens of ``trie`` allowed at any position of ``recognizer``'s grammar."""

    def __init__(self, recognizer: IrRecognizer, trie: TrieNode) -> None:
        self.recognizer = recognizer
        self.root = trie
        self._memo: dict[tuple[Column, bytes], frozenset[int]] = {}

    def start(self) -> Position:
        return Position(self.recognizer.initial)

    def feed(self, position: Position, data: bytes) -> Position | None:
        """The position after ``data``, or None when it is not a prefix of the language."""
        column, pending = position.column, position.pending
        for byte in data:
            step = self._step(column, pending, byte)
            if step is None:
                return None
            column, pending = step
        return Position(column, pending, position.text + data)

    def allowed(self, position: Position) -> frozenset[int]:
        """The ids of the tokens whose bytes keep ``position`` a prefix of the language."""
        key = (position.column, position.pending)
        if key not in self._memo:
            out: set[int] = set()
            self._visit(self.root, position.column, position.pending, out)
            self._memo[key] = frozenset(out)
        return self._memo[key]

    def _visit(self, node: TrieNode, column: Column, pending: bytes, out: set[int]) -> None:
        for byte, child in node.children.items():
            step = self._step(column, pending, byte)
            if step is not None:
                out.update(child.ids)
                if child.children:
                    self._visit(child, *step, out)

    def _step(self, column: Column, pending: bytes, byte: int) -> tuple[Column, bytes] | None:
        """One byte: the column and the bytes of an unfinished character after it, or None
        when no string of the language goes on so."""
        prefix = pending + bytes((byte,))
        span = code_points(prefix)
        if span is None:
            return None
        lo, hi, whole = span
        if not whole:
            return (column, prefix) if self.recognizer.can_scan(column, lo, hi) else None
        after = self.recognizer.advance(column, lo)
        return None if after is None else (after, b"")

"""The regex syntax tree: what a pattern means, with no syntax left.

Characters are Unicode code points; a :class:`CharSet` is a sorted tuple of disjoint,
non-adjacent inclusive ranges that never contains a surrogate (UTF-8 cannot encode one).
``pos`` is the 1-based column in the pattern where a node starts (for error messages).
An :class:`Automaton` is the one node that is not a regex construct: a pre-built byte
automaton (the result of an intersection or difference, see :mod:`tether.automata.boolean`)
that the NFA builder embeds as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_CODEPOINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


@dataclass(frozen=True)
class CharSet:
    ranges: tuple[tuple[int, int], ...]
    pos: int = 0


@dataclass(frozen=True)
class Concat:
    items: tuple[Node, ...]
    pos: int = 0


@dataclass(frozen=True)
class Alternate:
    items: tuple[Node, ...]
    pos: int = 0


@dataclass(frozen=True)
class Repeat:
    item: Node
    min: int
    max: int | None  # None: unbounded
    pos: int = 0


@dataclass(frozen=True)
class Anchor:
    """``^``/``\\A`` (start) or ``$``/``\\Z`` (end); only meaningful at the pattern's ends."""

    at_start: bool
    pos: int = 0


@dataclass(frozen=True, eq=False)
class Automaton:
    """A pre-built automaton over bytes (not code points), embedded in a syntax tree.

    States are ``0 .. n_states - 1``; ``edges`` is an ``(E, 4)`` read-only int32 array of
    ``(src, byte_lo, byte_hi, dst)`` rows; the language is the byte strings leading from
    ``start`` to a state of ``accepting``. Compared by identity (it can be large).
    ``pos`` locates it for error messages (a JSON pointer for schema values).
    ``exceptions``: states that read like another one but for a few strings, if known.
    """

    n_states: int
    edges: np.ndarray
    start: int
    accepting: tuple[int, ...]
    pos: int | str = 0
    exceptions: Exceptions | None = None


@dataclass(frozen=True, eq=False)
class Exceptions:
    """States of an :class:`Automaton` that read like another state of it but for a few
    strings: from state ``q`` (a key of ``like``) every byte string is read as from
    ``like[q]`` except a few (a prefix of a word from ``q`` is one from ``like[q]`` too),
    so what ``q`` reads is found by reading both in step where they differ."""

    like: dict[int, int]


Node = CharSet | Concat | Alternate | Repeat | Anchor | Automaton

EMPTY = Concat(())


def normalize(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge ranges and cut out the surrogates."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    cut: list[tuple[int, int]] = []
    s_lo, s_hi = SURROGATES
    for lo, hi in out:
        if hi < s_lo or lo > s_hi:
            cut.append((lo, hi))
            continue
        if lo < s_lo:
            cut.append((lo, s_lo - 1))
        if hi > s_hi:
            cut.append((s_hi + 1, hi))
    return tuple(cut)


def complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Every code point (surrogates excluded) not in ``ranges`` (which is normalized)."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return normalize(out)


def literal(text: str, pos: int = 0) -> Node:
    """The node matching exactly ``text``."""
    if pos == 0:  # (nodes are immutable: a character's node is shared)
        chars = tuple(_LATIN1[code] if (code := ord(c)) < 256 else CharSet(((code, code),))
                      for c in text)
    else:
        chars = tuple(CharSet(((ord(c), ord(c)),), pos) for c in text)
    return chars[0] if len(chars) == 1 else Concat(chars, pos)


_LATIN1 = tuple(CharSet(((code, code),)) for code in range(256))  # literal's shared nodes

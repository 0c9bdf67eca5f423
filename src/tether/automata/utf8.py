"""Code-point ranges as sequences of byte ranges (UTF-8).

``utf8_sequences(lo, hi)`` returns byte-range sequences such that a byte string is the
UTF-8 encoding of a code point in ``[lo, hi]`` iff it matches exactly one of them, each
sequence being a tuple of inclusive ``(byte_lo, byte_hi)`` pairs. Surrogates are never
produced. This is how classes like ``[^"\\\\]`` match whole characters and never half
of one.
"""

from __future__ import annotations

from functools import lru_cache

from tether.automata.regex_ast import SURROGATES

ByteSeq = tuple[tuple[int, int], ...]

_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)


@lru_cache(maxsize=1 << 16)
def utf8_sequences(lo: int, hi: int) -> tuple[ByteSeq, ...]:
    """Byte-range sequences covering exactly the UTF-8 encodings of ``[lo, hi]``."""
    out: list[ByteSeq] = []
    stack = [(lo, hi)]
    while stack:
        a, b = stack.pop()
        if a > b:
            continue
        s_lo, s_hi = SURROGATES
        if a <= s_hi and b >= s_lo:  # cut out the surrogates
            stack.append((s_hi + 1, b))
            stack.append((a, s_lo - 1))
            continue
        split = _split_by_length(a, b)
        if split is not None:
            stack.extend(reversed(split))
            continue
        split = _split_by_continuation(a, b)
        if split is not None:
            stack.extend(reversed(split))
            continue
        ea, eb = chr(a).encode(), chr(b).encode()
        out.append(tuple(zip(ea, eb, strict=True)))
    return tuple(out)


def _split_by_length(a: int, b: int) -> list[tuple[int, int]] | None:
    for limit in _LENGTH_LIMITS[:-1]:
        if a <= limit < b:
            return [(a, limit), (limit + 1, b)]
    return None


def _split_by_continuation(a: int, b: int) -> list[tuple[int, int]] | None:
    """Split so each piece is a product of byte ranges (all lower continuation bytes
    span their full 0x80-0xBF range wherever a higher byte varies)."""
    n = len(chr(a).encode())
    for k in range(1, n):
        m = (1 << (6 * k)) - 1
        if a & ~m != b & ~m:
            if a & m != 0:
                return [(a, a | m), ((a | m) + 1, b)]
            if b & m != m:
                return [(a, (b & ~m) - 1), (b & ~m, b)]
    return None

"""Case-insensitive character sets (Lark's ``"..."i`` and ``/.../i``).

Our regex parser refuses ``(?i)``; instead a front end widens every character set of a
syntax tree to the characters that match it ignoring case (:func:`fold_ranges`). Two
characters are case variants when one is the simple (one-character) lower- or uppercase
of the other, closed transitively — so
``k``, ``K`` and the Kelvin sign are one class, as in Python's ``re.IGNORECASE``.
Multi-character case mappings (``ß`` → ``SS``) are not applied.
"""

from __future__ import annotations

import bisect
from functools import cache

import numpy as np

from tether.automata.regex_ast import MAX_CODEPOINT, SURROGATES, normalize


def fold_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``ranges`` plus the case variants of every character in them."""
    cased, classes = _case_classes()
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for k in range(bisect.bisect_left(cased, lo), bisect.bisect_right(cased, hi)):
            extra.extend((v, v) for v in classes[cased[k]])
    return normalize(list(ranges) + extra) if extra else ranges


def _cased_code_points() -> list[int]:
    """Code points whose lower- or uppercase differs from themselves (blocks with none
    are skipped at once: that is most of Unicode)."""
    out: list[int] = []
    block = 4096
    for base in range(0, MAX_CODEPOINT + 1, block):
        cps = np.arange(base, base + block, dtype="<u4")
        cps = cps[(cps < SURROGATES[0]) | (cps > SURROGATES[1])]
        text = cps.tobytes().decode("utf-32-le")
        if text.lower() != text or text.upper() != text:
            out.extend(ord(c) for c in text if c.lower() != c or c.upper() != c)
    return out


@cache
def _case_classes() -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """The sorted code points that have case variants, and each one's variants."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for cp in _cased_code_points():
        c = chr(cp)
        for other in (c.lower(), c.upper()):
            if len(other) == 1 and other != c:
                a, b = find(cp), find(ord(other))
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for cp in list(parent):
        groups.setdefault(find(cp), []).append(cp)
    classes: dict[int, tuple[int, ...]] = {}
    for root, members in groups.items():
        group = tuple(sorted({root, *members}))
        for cp in group:
            classes[cp] = group
    return sorted(classes), classes

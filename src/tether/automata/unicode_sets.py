"""The code-point sets behind ``\\d``, ``\\w``, ``\\s`` and ``\\p{Category}``.

They follow Python's ``re`` for ``str`` patterns: ``\\d`` is ``str.isdecimal``, ``\\w`` is
``str.isalnum`` or ``_``, ``\\s`` is ``str.isspace``; ``\\p{..}`` takes a Unicode general
category (``L``, ``Lu``, ``N``, ``Nd``, ``P``, …) as ``unicodedata`` reports it. Each set
is computed once by scanning all code points and kept in the on-disk cache, keyed by the
Unicode version of this Python.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import cache

from tether.automata.regex_ast import MAX_CODEPOINT, normalize
from tether.cache_dir import json_cached

Ranges = tuple[tuple[int, int], ...]

_PREDICATES: dict[str, Callable[[str], bool]] = {
    "digit": str.isdecimal,
    "word": lambda c: c.isalnum() or c == "_",
    "space": str.isspace,
}

GENERAL_CATEGORIES = frozenset((
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
    "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs",
    "Co", "Cn"))
_ALIASES = {"Letter": "L", "Number": "N", "Punctuation": "P", "Symbol": "S",
            "Separator": "Z", "Mark": "M", "Other": "C", "L&": "LC"}


def class_ranges(name: str) -> Ranges:
    """Ranges of ``\\d`` (``"digit"``), ``\\w`` (``"word"``) or ``\\s`` (``"space"``)."""
    return _cached(f"class-{name}", lambda: _scan(_PREDICATES[name]))


def category_ranges(name: str) -> Ranges | None:
    """Ranges of a general category or a one-letter group (``L``, ``N``…); None if unknown."""
    name = _ALIASES.get(name, name)
    if name == "LC":
        cats = {"Lu", "Ll", "Lt"}
    elif name in GENERAL_CATEGORIES:
        cats = {name}
    elif len(name) == 1 and any(c.startswith(name) for c in GENERAL_CATEGORIES):
        cats = {c for c in GENERAL_CATEGORIES if c.startswith(name)}
    else:
        return None
    return _cached(f"cat-{'-'.join(sorted(cats))}", lambda: _scan_categories(cats))


@cache
def _cached(key: str, compute: Callable[[], Ranges]) -> Ranges:
    ranges = json_cached(f"unicode-{unicodedata.unidata_version}-{key}", compute)
    return tuple((int(a), int(b)) for a, b in ranges)


def _scan(pred: Callable[[str], bool]) -> Ranges:
    return _runs(pred(chr(c)) for c in range(MAX_CODEPOINT + 1))


def _scan_categories(cats: set[str]) -> Ranges:
    category = unicodedata.category
    return _runs(category(chr(c)) in cats for c in range(MAX_CODEPOINT + 1))


def _runs(flags: object) -> Ranges:
    out: list[tuple[int, int]] = []
    start = -1
    cp = -1
    for cp, flag in enumerate(flags):  # type: ignore[call-overload]
        if flag and start < 0:
            start = cp
        elif not flag and start >= 0:
            out.append((start, cp - 1))
            start = -1
    if start >= 0:
        out.append((start, cp))
    return normalize(out)

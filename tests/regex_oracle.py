"""An independent oracle for exact token masks: the ``regex`` package's partial full match.

Token ``t`` is allowed after ``prefix`` iff ``prefix + bytes(t)`` is a prefix of some string
that fully matches the pattern. Texts are UTF-8, so bytes that are not UTF-8 are never
allowed, and a trailing incomplete character is allowed iff some character it can still
become keeps a partial match — all candidates are tried, except for a lone 4-byte lead
byte, where 8,192 candidates spread over its 262,144 characters (every value of the
second and third bytes) stand in for them.
"""

from __future__ import annotations

import contextlib
import re
import sys
from functools import cache, lru_cache

import regex


def python_classes(pattern: str) -> str:
    """Rewrite ``pattern`` so ``\\d \\w \\s`` (and their negations) mean what they mean in
    tether's dialect: Python's ``re`` with ``re.ASCII``, or without it when the pattern
    starts with ``(?u)`` — not what they mean in ``regex`` (which follows Unicode TR#18
    and counts combining marks as word characters but not ``½``).

    Each such escape, and each bracket class containing one, is replaced by an explicit
    class whose members were found by asking ``re`` about every code point.
    """
    flags = 0 if pattern.startswith("(?u)") else re.ASCII
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] in "dwsDWS":
                out.append(_explicit("\\" + pattern[i + 1], flags))
            else:
                out.append(pattern[i:i + 2])
            i += 2
        elif ch == "[":
            j = _class_end(pattern, i)
            text = pattern[i:j]
            uses = re.search(r"\\[dwsDWS]", text) and not re.search(r"\\[pP]", text)
            out.append(_explicit(text, flags) if uses else text)
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _class_end(pattern: str, i: int) -> int:
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


@cache
def _explicit(class_text: str, flags: int) -> str:
    member = re.compile(class_text, flags).fullmatch
    runs: list[tuple[int, int]] = []
    for c in range(sys.maxunicode + 1):
        if 0xD800 <= c <= 0xDFFF or not member(chr(c)):
            continue
        if runs and runs[-1][1] == c - 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    if not runs:
        return "[^\\s\\S]"
    return "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in runs) + "]"


def candidates(tail: bytes) -> range | list[int]:
    """Code points whose UTF-8 encoding starts with the incomplete ``tail``."""
    need = 4 if tail[0] >= 0xF0 else 3 if tail[0] >= 0xE0 else 2
    if need == 4 and len(tail) == 1:
        out = []
        for b2 in range(0x80, 0xC0):
            for b3 in range(0x80, 0xC0):
                for b4 in (0x80, 0xBF):
                    with contextlib.suppress(UnicodeDecodeError):
                        out.append(ord(bytes((tail[0], b2, b3, b4)).decode()))
        return out
    lo = tail + b"\x80" * (need - len(tail))
    hi = tail + b"\xbf" * (need - len(tail))
    return [c for c in range(_lenient(lo), _lenient(hi) + 1)
            if not 0xD800 <= c <= 0xDFFF and chr(c).encode()[: len(tail)] == tail]


def _lenient(data: bytes) -> int:
    # decode without validation (the bounds may be overlong or surrogates)
    b0 = data[0]
    if len(data) == 2:
        return ((b0 & 0x1F) << 6) | (data[1] & 0x3F)
    if len(data) == 3:
        return ((b0 & 0x0F) << 12) | ((data[1] & 0x3F) << 6) | (data[2] & 0x3F)
    return (((b0 & 0x07) << 18) | ((data[1] & 0x3F) << 12) | ((data[2] & 0x3F) << 6)
            | (data[3] & 0x3F))


def split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """(decoded text, incomplete trailing char) or None if ``data`` is not UTF-8."""
    for cut in range(0, min(4, len(data) + 1)):
        head, tail = data[: len(data) - cut], data[len(data) - cut:]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not tail:
            return text, b""
        try:
            tail.decode("utf-8")
            return None  # a complete char can't be a tail here
        except UnicodeDecodeError as e:
            if e.reason != "unexpected end of data":
                return None
        return text, tail
    return None


class Oracle:
    """Allowed-token sets for one pattern (Python ``re`` flavour via ``regex``)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.rx = regex.compile(python_classes(pattern), flags | regex.V0)

    @lru_cache(maxsize=200_000)  # noqa: B019 - one oracle per pattern, short-lived
    def viable(self, data: bytes) -> bool:
        split = split_utf8(data)
        if split is None:
            return False
        text, tail = split
        if not tail:
            return self.rx.fullmatch(text, partial=True) is not None
        return any(self.rx.fullmatch(text + chr(c), partial=True) is not None
                   for c in candidates(tail))

    def complete(self, data: bytes) -> bool:
        try:
            return self.rx.fullmatch(data.decode("utf-8")) is not None
        except UnicodeDecodeError:
            return False

    def allowed(self, prefix: bytes, tokens: tuple[bytes, ...], special: list[bool],
                eos: set[int]) -> set[int]:
        out = {i for i, t in enumerate(tokens)
               if not special[i] and t and self.viable(prefix + t)}
        if self.complete(prefix):
            out |= eos
        return out

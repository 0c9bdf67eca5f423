"""Distinct array items, checked by the matcher (``uniqueItems``; see
:mod:`tether.schema.unique_items` for which arrays and why it is exact).

:class:`UniqueItemsMatcher` wraps the matcher of the JSON grammar and reads the same
bytes with a small JSON scanner (:class:`Scan`, one immutable snapshot per consumed
token, so rollback and fork are free). Inside an array at a checked path, an item is
*decided* when its text is complete (a string's closing quote, a container's closing
bracket, a number's delimiter) or by its first byte (``t``/``f``/``n``); a token that
decides an item equal to an earlier item of the same array (JSON equality: ``1`` and
``1.0`` are equal, object members in any order) is not allowed. A mask is the
grammar's mask less those tokens: only the allowed tokens that could decide an item
(those with a quote, a bracket, a comma or white space, or starting with
``t``/``f``/``n``; inside a string, those with a quote) are read by the scanner — a
Python loop, so masks in checked arrays cost milliseconds.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from tether.engine import bitmask
from tether.engine.compiled import CheckResult, Compiled
from tether.engine.matcher import Forced, Matcher
from tether.errors import ConstraintViolation
from tether.vocab import Vocabulary

_WS = b" \t\n\r"
_NUMBER = frozenset(b"0123456789+-.eE")
_LITERALS = {ord("t"): (True, 4), ord("f"): (False, 5), ord("n"): (None, 4)}


class Frame(NamedTuple):
    """An open container: its path, and for an array the index of its current item,
    the canonical values of its items so far (checked arrays), where the current item
    began in the text (-1: none open)."""

    array: bool
    path: tuple
    index: int  # arrays: the current item; objects: unused
    key: str | None  # objects: the current member's key
    seen: frozenset | None  # checked arrays: the values of the items so far
    start: int


class Scan(NamedTuple):
    """Where the scanner is: the open containers and the lexical mode."""

    frames: tuple[Frame, ...] = ()
    mode: str = "value"  # value, string, escape, number, literal, after, key, colon
    is_key: bool = False  # the string being read is a key
    left: int = 0  # literal: bytes still to read
    start: int = 0  # string (key) or number: where it began


class Duplicate(Exception):  # noqa: N818 - a signal, not an error
    """An item equal to an earlier one of its array was decided."""


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value under JSON equality (numbers by value)."""
    if isinstance(value, bool) or value is None:
        return ("lit", value)
    if isinstance(value, Decimal):
        return ("num", value.normalize() if value else Decimal(0))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(canonical(v) for v in value))
    return ("obj", frozenset((k, canonical(v)) for k, v in value.items()))


def _value(text: bytes) -> Any:
    return canonical(json.loads(text, parse_float=Decimal, parse_int=Decimal))


class Scanner:
    """Reads JSON text byte by byte, raising :class:`Duplicate` where a checked array
    gets an item equal to an earlier one."""

    def __init__(self, paths: tuple) -> None:
        self.paths = paths

    def checked(self, path: tuple) -> bool:
        return any(_matches(p, path) for p in self.paths)

    def read(self, scan: Scan, data: bytes, text: bytes | bytearray | memoryview) -> Scan:
        """``scan`` after ``data``, the bytes that follow ``text`` (``text + data`` is
        what has been read)."""
        frames, mode, is_key, left, start = scan
        base = len(text)
        full = _Text(text, data)
        for i, b in enumerate(data):
            at = base + i
            if mode == "string":
                if b == 0x5C:
                    mode = "escape"
                elif b == 0x22:
                    if is_key:
                        top = frames[-1]
                        key = json.loads(full.slice(start, at + 1))
                        frames = (*frames[:-1], top._replace(key=key))
                        mode, is_key = "colon", False
                    else:
                        frames = self._decided(frames, full, at + 1)
                        mode = "after"
                continue
            if mode == "escape":
                mode = "string"
                continue
            if mode == "number":
                if b in _NUMBER:
                    continue
                frames = self._decided(frames, full, at)
                mode = "after"
            if mode == "literal":
                left -= 1
                if left == 0:
                    mode = "after"
                continue
            if b in _WS:
                continue
            if mode == "colon":  # b == ':'
                mode = "value"
            elif mode == "key":  # '"' or '}'
                if b == 0x22:
                    mode, is_key, start = "string", True, at
                else:
                    frames, mode = self._close(frames, full, at), "after"
            elif mode == "after":  # ',' ']' '}'
                if b == 0x2C:
                    top = frames[-1]
                    if top.array:
                        frames = (*frames[:-1], top._replace(index=top.index + 1, start=-1))
                        mode = "value"
                    else:
                        mode = "key"
                else:
                    frames, mode = self._close(frames, full, at), "after"
            else:  # a value starts (or an empty array closes)
                if b == 0x5D:
                    frames, mode = self._close(frames, full, at), "after"
                    continue
                frames = self._began(frames, at)
                if b == 0x22:
                    mode, is_key, start = "string", False, at
                elif b in _LITERALS:
                    value, length = _LITERALS[b]
                    frames = self._seen(frames, ("lit", value))
                    mode, left = "literal", length - 1
                elif b == 0x5B or b == 0x7B:
                    path = self._path(frames)
                    array = b == 0x5B
                    seen = frozenset() if array and self.checked(path) else None
                    frames = (*frames, Frame(array, path, 0, None, seen, -1))
                    mode = "value" if array else "key"
                else:
                    mode, start = "number", at
        return Scan(frames, mode, is_key, left, start)

    def _path(self, frames: tuple[Frame, ...]) -> tuple:
        if not frames:
            return ()
        top = frames[-1]
        return (*top.path, top.index if top.array else top.key)

    def _began(self, frames: tuple[Frame, ...], at: int) -> tuple[Frame, ...]:
        if frames and frames[-1].array and frames[-1].seen is not None:
            return (*frames[:-1], frames[-1]._replace(start=at))
        return frames

    def _seen(self, frames: tuple[Frame, ...], value: Any) -> tuple[Frame, ...]:
        """``frames`` with the top array's current item decided as ``value``."""
        if not frames or not frames[-1].array or frames[-1].seen is None:
            return frames
        top = frames[-1]
        if value in top.seen:
            raise Duplicate
        return (*frames[:-1], top._replace(seen=top.seen | {value}))

    def _decided(self, frames: tuple[Frame, ...], full: _Text, end: int
                 ) -> tuple[Frame, ...]:
        """An item that ends at ``end`` (a string or a number) is complete."""
        if frames and frames[-1].array and frames[-1].seen is not None:
            return self._seen(frames, _value(full.slice(frames[-1].start, end)))
        return frames

    def _close(self, frames: tuple[Frame, ...], full: _Text, at: int) -> tuple[Frame, ...]:
        """The container on top closes at ``at``: the item it was, if any, is decided."""
        frames = frames[:-1]
        if frames and frames[-1].array and frames[-1].seen is not None:
            return self._seen(frames, _value(full.slice(frames[-1].start, at + 1)))
        return frames


class _Text:
    """``text + data`` without joining them until a slice is asked for."""

    def __init__(self, text: bytes | bytearray | memoryview, data: bytes) -> None:
        self.text, self.data, self.base = text, data, len(text)

    def slice(self, lo: int, hi: int) -> bytes:
        if lo >= self.base:
            return self.data[lo - self.base:hi - self.base]
        return bytes(self.text[lo:min(hi, self.base)]) + self.data[:max(hi - self.base, 0)]


def _matches(pattern: tuple, path: tuple) -> bool:
    if len(pattern) != len(path):
        return False
    for step, part in zip(pattern, path, strict=True):
        kind = step[0]
        if kind == "key":
            ok = isinstance(part, str) and part == step[1]
        elif kind == "index":
            ok = isinstance(part, int) and part == step[1]
        elif kind == "from":
            ok = isinstance(part, int) and part >= step[1]
        else:  # "any": a key
            ok = isinstance(part, str)
        if not ok:
            return False
    return True


class UniqueItemsCompiled(Compiled):
    """A JSON Schema compiled to a grammar, with arrays whose items the matcher checks."""

    def __init__(self, inner: Compiled, paths: tuple) -> None:
        self.inner = inner
        self.vocab = inner.vocab
        self.constraint = inner.constraint
        self.scanner = Scanner(paths)

    def __getattr__(self, name: str) -> Any:  # compile_seconds, precompute, dfa…
        return getattr(self.inner, name)

    def matcher(self) -> UniqueItemsMatcher:
        return UniqueItemsMatcher(self, self.inner.matcher())

    def check(self, text: str | bytes) -> CheckResult:
        data = text.encode() if isinstance(text, str) else text
        result = self.inner.check(data)
        if not result.matches:
            return result
        scan, view = Scan(), memoryview(data)
        for i in range(len(data)):
            try:
                scan = self.scanner.read(scan, data[i:i + 1], view[:i])
            except Duplicate:
                return CheckResult(False, i, b"", ("uniqueItems: an item repeats",))
        return result

    @property
    def saturated(self) -> bool:
        return self.inner.saturated

    @property
    def held_bytes(self) -> int:
        return self.inner.held_bytes

    @property
    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats, "unique_arrays": len(self.scanner.paths)}


class UniqueItemsMatcher(Matcher):
    """The grammar's matcher, less the tokens that repeat an item of a checked array."""

    def __init__(self, compiled: UniqueItemsCompiled, inner: Matcher) -> None:
        self.compiled = compiled
        self.inner = inner
        self.vocab = inner.vocab
        self._scans = [Scan()]
        self._text = bytearray()
        self._ends: list[int] = []
        self._mask: tuple[Scan, np.ndarray] | None = None  # the last mask, by position

    def _in_checked(self) -> bool:
        return any(f.seen is not None for f in self._scans[-1].frames)

    def _repeats(self, data: bytes) -> bool:
        """Whether ``data`` (allowed by the grammar) decides a repeated item."""
        try:
            self.compiled.scanner.read(self._scans[-1], data, self._text)
        except Duplicate:
            return True
        return False

    def mask(self) -> np.ndarray:
        words = self.inner.mask()
        if not self._in_checked():
            return words
        scan = self._scans[-1]
        if self._mask is not None and self._mask[0] is scan:
            return self._mask[1]
        hits = _deciding(self.vocab, scan.mode == "string")
        candidates = bitmask.to_ids(words & hits, self.vocab.size).tolist()
        out = words.copy()
        for token in candidates:
            if self.vocab.is_eos(token):
                continue
            if self._repeats(self.vocab.token_bytes(token)):
                out[token >> 5] &= ~np.uint32(1 << (token & 31))
        self._mask = (scan, out)
        return out

    def allowed(self, token_id: int) -> bool:
        if not self.inner.allowed(token_id):
            return False
        return self.vocab.is_eos(token_id) or not self._repeats(
            self.vocab.token_bytes(token_id))

    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_finished(self) -> bool:
        return self.inner.is_finished()

    def forced(self) -> Forced:
        return self.inner.forced()

    def fork(self) -> UniqueItemsMatcher:
        twin = UniqueItemsMatcher(self.compiled, self.inner.fork())
        twin._scans = list(self._scans)
        twin._text = bytearray(self._text)
        twin._ends = list(self._ends)
        twin._stopped = self._stopped
        return twin

    def _advance(self, token_id: int) -> bool:
        data = self.vocab.token_bytes(token_id)
        try:
            self.inner.consume(token_id)
        except ConstraintViolation:
            return False
        try:
            scan = self.compiled.scanner.read(self._scans[-1], data, self._text)
        except Duplicate:
            self.inner.rollback(1)
            return False
        self._scans.append(scan)
        self._ends.append(len(self._text))
        self._text += data
        return True

    def _retreat(self, n: int) -> None:
        self.inner.rollback(n)
        del self._scans[-n:]
        cut = self._ends[-n]
        del self._ends[-n:]
        del self._text[cut:]

    @property
    def generated_bytes(self) -> bytes:
        return bytes(self._text)

    @property
    def n_consumed(self) -> int:
        return len(self._ends)

    # -- budgets: the grammar's ------------------------------------------------------
    def completes_within(self, k: int) -> bool:
        return self.inner.completes_within(k)

    def completion_tokens(self) -> int:
        return self.inner.completion_tokens()

    def budget_mask(self, k: int) -> np.ndarray:
        return self.inner.budget_mask(k) & self.mask()


@lru_cache(maxsize=8)
def _deciding_cached(vocab: Vocabulary, in_string: bool) -> np.ndarray:
    flat, offsets = vocab.flat_tokens
    n = offsets.size - 1
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    wanted = b'"' if in_string else b'"[]{},' + _WS
    has = np.zeros(flat.size, dtype=bool)
    for b in wanted:
        has |= flat == b
    cum = np.concatenate([[0], np.cumsum(has)])
    hits = cum[offsets[1:]] - cum[starts] > 0
    if not in_string:
        first = np.where(lengths > 0, flat[np.minimum(starts, flat.size - 1)], 0)
        hits |= np.isin(first, list(_LITERALS)) & (lengths > 0)
    ids = np.flatnonzero(hits[:n])
    return bitmask.from_ids(ids, vocab.size)


def _deciding(vocab: Vocabulary, in_string: bool) -> np.ndarray:
    """The tokens that may decide an item: with a quote (inside a string), else with a
    quote, bracket, comma or white space, or starting with ``t``/``f``/``n``."""
    return _deciding_cached(vocab, in_string)

"""What a JSON matcher checks beside the grammar: distinct array items (``uniqueItems``),
the code points of long strings (``maxLength`` too large for an automaton) and distinct
object keys. Which values, and why it is exact: :mod:`tether.schema.runtime_checks`.

:class:`JsonChecksMatcher` wraps the matcher of the JSON grammar and reads the same
bytes with a small JSON scanner (:class:`Scan`, one immutable snapshot per consumed
token, so rollback and fork are free).

- Inside an array at a checked path, an item is *decided* when its text is complete (a
  string's closing quote, a container's closing bracket, a number's delimiter) or by its
  first byte (``t``/``f``/``n``); a token that decides an item equal to an earlier item
  of the same array (JSON equality: ``1`` and ``1.0`` are equal, object members in any
  order) is not allowed. Only the allowed tokens that could decide an item (those with a
  quote, bracket, comma or white space, or starting with ``t``/``f``/``n``; inside a
  string, those with a quote) are read by the scanner — a Python loop, so masks in
  checked arrays cost milliseconds.
- With distinct keys, a token that closes a key its object already has is not allowed.
  Inside a key, those are found by a lookup: the tokens whose bytes before their first
  quote spell the rest of a key written before (a per-vocabulary index), and the
  scanner reads those with a backslash; elsewhere a token must hold two quotes (three
  inside a string value) to write a whole key, and the scanner reads those few.
- Inside a counted string, a token that would take it past its bound is not allowed.
  No token can while the bound is further than a token's length: then the mask is the
  grammar's; near it, tokens are judged by their code points before any quote
  (per-vocabulary arrays, vectorised), those with a backslash by the scanner.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tether.engine import bitmask
from tether.engine.compiled import CheckResult, Compiled
from tether.engine.matcher import Forced, Matcher
from tether.errors import ConstraintViolation
from tether.vocab import Vocabulary

if TYPE_CHECKING:
    from tether.schema.runtime_checks import RuntimeChecks

_WS = b" \t\n\r"
_NUMBER = frozenset(b"0123456789+-.eE")
_LITERALS = {ord("t"): (True, 4), ord("f"): (False, 5), ord("n"): (None, 4)}


class Frame(NamedTuple):
    """An open container: its path; for an array the index of its current item, the
    canonical values of its items so far (checked arrays only), where the current item
    began in the text (-1: none open); for an object its current member's key and, with
    distinct keys, the keys it has (``seen``)."""

    array: bool
    path: tuple
    index: int
    key: str | None
    seen: frozenset | None
    start: int


class Scan(NamedTuple):
    """Where the scanner is: the open containers and the lexical mode."""

    frames: tuple[Frame, ...] = ()
    mode: str = "value"  # value, string, escape, hex, number, literal, after, key, colon
    is_key: bool = False  # the string being read is a key
    left: int = 0  # literal, hex: bytes still to read
    start: int = 0  # key: where its string began
    count: int = 0  # string: code points so far
    limit: int | None = None  # string: the most code points it may have


class Refused(Exception):  # noqa: N818 - a signal, not an error
    """The bytes repeat an item of a checked array or a key of an object, or make a
    counted string too long."""


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
    """Reads JSON text byte by byte, raising :class:`Refused` where a checked array gets
    an item equal to an earlier one, an object a key it has (distinct keys) or a counted
    string grows past its bound."""

    def __init__(self, checks: RuntimeChecks) -> None:
        self.unique = checks.unique
        self.lengths = checks.lengths
        self.distinct_keys = checks.distinct_keys

    def checked(self, path: tuple) -> bool:
        return any(_matches(p, path) for p in self.unique)

    def limit(self, path: tuple) -> int | None:
        return next((n for p, n in self.lengths if _matches(p, path)), None)

    def read(self, scan: Scan, data: bytes, text: bytes | bytearray | memoryview) -> Scan:
        """``scan`` after ``data``, the bytes that follow ``text`` (``text + data`` is
        what has been read)."""
        frames, mode, is_key, left, start, count, limit = scan
        base = len(text)
        full = _Text(text, data)
        for i, b in enumerate(data):
            at = base + i
            if mode == "string":
                if b == 0x22:
                    if is_key:
                        top = frames[-1]
                        key = json.loads(full.slice(start, at + 1))
                        if top.seen is not None:
                            if key in top.seen:
                                raise Refused
                            top = top._replace(seen=top.seen | {key})
                        frames = (*frames[:-1], top._replace(key=key))
                        mode, is_key = "colon", False
                    else:
                        frames = self._decided(frames, full, at + 1)
                        mode = "after"
                    continue
                if b == 0x5C:
                    mode = "escape"
                    count += 1
                elif b & 0xC0 != 0x80:  # a code point starts
                    count += 1
                if limit is not None and count > limit:
                    raise Refused
                continue
            if mode == "escape":
                mode, left = ("hex", 4) if b == 0x75 else ("string", 0)
                continue
            if mode == "hex":
                left -= 1
                if not left:
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
                    mode, is_key, start, count, limit = "string", True, at, 0, None
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
                path = self._path(frames)
                frames = self._began(frames, at)
                if b == 0x22:
                    mode, is_key, count = "string", False, 0
                    limit = self.limit(path) if self.lengths else None
                elif b in _LITERALS:
                    value, length = _LITERALS[b]
                    frames = self._seen(frames, ("lit", value))
                    mode, left = "literal", length - 1
                elif b == 0x5B or b == 0x7B:
                    array = b == 0x5B
                    seen = frozenset() if (self.checked(path) if array
                                           else self.distinct_keys) else None
                    frames = (*frames, Frame(array, path, 0, None, seen, -1))
                    mode = "value" if array else "key"
                else:
                    mode = "number"
        return Scan(frames, mode, is_key, left, start, count, limit)

    def _path(self, frames: tuple[Frame, ...]) -> tuple:
        """The path of the value that starts here."""
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
            raise Refused
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


class JsonChecksCompiled(Compiled):
    """A JSON Schema compiled to a grammar, with values the matcher checks besides."""

    def __init__(self, inner: Compiled, checks: RuntimeChecks) -> None:
        self.inner = inner
        self.vocab = inner.vocab
        self.constraint = inner.constraint
        self.scanner = Scanner(checks)

    def __getattr__(self, name: str) -> Any:  # compile_seconds, precompute, dfa…
        return getattr(self.inner, name)

    def matcher(self) -> JsonChecksMatcher:
        return JsonChecksMatcher(self, self.inner.matcher())

    def check(self, text: str | bytes) -> CheckResult:
        data = text.encode() if isinstance(text, str) else text
        result = self.inner.check(data)
        if not result.matches:
            return result
        scan, view = Scan(), memoryview(data)
        for i in range(len(data)):
            try:
                scan = self.scanner.read(scan, data[i:i + 1], view[:i])
            except Refused:
                return CheckResult(False, i, b"", (
                    "uniqueItems: an item repeats" if scan.mode != "string"
                    else "a key repeats" if scan.is_key
                    else f"maxLength: more than {scan.limit} characters",))
        return result

    @property
    def saturated(self) -> bool:
        return self.inner.saturated

    @property
    def held_bytes(self) -> int:
        return self.inner.held_bytes

    @property
    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats, "unique_arrays": len(self.scanner.unique),
                "counted_strings": len(self.scanner.lengths),
                "distinct_keys": self.scanner.distinct_keys}


class JsonChecksMatcher(Matcher):
    """The grammar's matcher, less the tokens that repeat an item of a checked array or
    make a counted string too long."""

    def __init__(self, compiled: JsonChecksCompiled, inner: Matcher) -> None:
        self.compiled = compiled
        self.inner = inner
        self.vocab = inner.vocab
        self._scans = [Scan()]
        self._text = bytearray()
        self._ends: list[int] = []
        self._mask: tuple[Scan, np.ndarray] | None = None  # the last mask, by position

    def _refused(self, data: bytes) -> bool:
        """Whether ``data`` (allowed by the grammar) is refused by a check."""
        try:
            self.compiled.scanner.read(self._scans[-1], data, self._text)
        except Refused:
            return True
        return False

    def mask(self) -> np.ndarray:
        words = self.inner.mask()
        scan = self._scans[-1]
        in_array = any(f.array and f.seen is not None for f in scan.frames)
        keyed = any(f.seen for f in scan.frames if not f.array)  # keys to keep apart
        near_limit = scan.limit is not None and scan.mode in ("string", "escape", "hex") \
            and scan.count + self.vocab.max_token_bytes > scan.limit
        if not (in_array or keyed or near_limit):
            return words
        if self._mask is not None and self._mask[0] is scan:
            return self._mask[1]
        out = words.copy()
        in_string = scan.mode == "string"
        read = np.zeros_like(words)  # the tokens the scanner reads
        if in_array:
            read |= _deciding(self.vocab, in_string)
        if keyed:
            read |= self._repeated_keys(scan, out)
        if near_limit and in_string:
            out &= ~bitmask.from_ids(_too_long(self.vocab, words, scan.count, scan.limit),
                                     self.vocab.size)
            read |= _escaping(self.vocab)
        elif near_limit:  # inside an escape: every token
            read[:] = ~np.uint32(0)
        for token in bitmask.to_ids(out & read, self.vocab.size).tolist():
            if not self.vocab.is_eos(token) and self._refused(self.vocab.token_bytes(token)):
                out[token >> 5] &= ~np.uint32(1 << (token & 31))
        self._mask = (scan, out)
        return out

    def _repeated_keys(self, scan: Scan, out: np.ndarray) -> np.ndarray:
        """Take out of ``out`` the tokens that close the key being written as one its
        object has (found by the index); return the tokens the scanner must read: those
        that may write a whole key (or, inside a key, close it with an escape)."""
        vocab = self.vocab
        in_text = scan.mode in ("string", "escape", "hex")
        if not (in_text and scan.is_key):  # a whole key: two quotes (three in a value)
            return _with_quotes(vocab, 3 if in_text else 2)
        read = _with_quotes(vocab, 3)  # (this key, then another object's)
        written = _plain(bytes(self._text[scan.start + 1:])) if scan.mode == "string" else None
        if written is None:  # inside an escape, after one, or mid-character: all read
            return read | _with_quotes(vocab, 1)
        closing, exact = _before_quote(vocab), _by_bytes(vocab)
        for key in scan.frames[-1].seen:  # type: ignore[union-attr]
            if key.startswith(written):
                rest = json.dumps(key[len(written):], ensure_ascii=False)[1:-1].encode()
                refused = list(closing.get(rest, ()))
                if rest in exact and self._ends_after(rest):  # decided without its quote
                    refused += exact[rest]
                if refused:
                    out &= ~bitmask.from_ids(refused, vocab.size)
        return read | (_escaping(vocab) & _with_quotes(vocab, 1))

    def _ends_after(self, data: bytes) -> bool:
        """Whether after ``data`` the grammar lets the key being written only end (its
        text is then decided, a quote before it is read)."""
        twin = self.inner.fork()
        try:
            twin.consume_many(self.vocab.segment(data))
        except ConstraintViolation:
            return False
        return not (twin.mask() & ~_ending_a_key(self.vocab)).any()

    def allowed(self, token_id: int) -> bool:
        if not self.inner.allowed(token_id):
            return False
        return self.vocab.is_eos(token_id) or not self._refused(
            self.vocab.token_bytes(token_id))

    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_finished(self) -> bool:
        return self.inner.is_finished()

    def forced(self) -> Forced:
        return self.inner.forced()

    def fork(self) -> JsonChecksMatcher:
        twin = JsonChecksMatcher(self.compiled, self.inner.fork())
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
        except Refused:
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


def _too_long(vocab: Vocabulary, words: np.ndarray, count: int, limit: int | None
              ) -> np.ndarray:
    """The tokens of ``words`` without a backslash before their first quote whose code
    points before it (all of them, without a quote) take a string of ``count`` code
    points past ``limit``."""
    before, escaping = _string_profile(vocab)
    ids = bitmask.to_ids(words, vocab.size)
    ids = ids[ids < before.size]
    return ids[(count + before[ids] > (limit or 0)) & ~escaping[ids]]


@lru_cache(maxsize=8)
def _string_profile(vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Per token: the code points before its first quote or backslash (all of them if it
    has neither), and whether a backslash comes first."""
    flat, offsets = vocab.flat_tokens
    lo, hi = offsets[:-1], offsets[1:]
    special = np.flatnonzero((flat == 0x22) | (flat == 0x5C))
    at = np.searchsorted(special, lo)  # each token's first special byte, if inside it
    first = special[np.minimum(at, max(special.size - 1, 0))] if special.size else hi
    inside = (at < special.size) & (first < hi)
    stop = np.where(inside, first, hi)
    starts = np.concatenate([[0], np.cumsum((flat & 0xC0) != 0x80)])  # code points so far
    escaping = inside & (flat[np.minimum(stop, max(flat.size - 1, 0))] == 0x5C)
    return starts[stop] - starts[lo], escaping


@lru_cache(maxsize=8)
def _escaping(vocab: Vocabulary) -> np.ndarray:
    """The tokens with a backslash."""
    return _with_bytes(vocab, b"\\", first=b"")


@lru_cache(maxsize=16)
def _deciding(vocab: Vocabulary, in_string: bool) -> np.ndarray:
    """The tokens that may decide an item: with a quote (inside a string), else with a
    quote, bracket, comma or white space, or starting with ``t``/``f``/``n``."""
    if in_string:
        return _with_bytes(vocab, b'"', first=b"")
    return _with_bytes(vocab, b'"[]{},' + _WS, first=bytes(_LITERALS))


@lru_cache(maxsize=16)
def _with_quotes(vocab: Vocabulary, n: int) -> np.ndarray:
    """The tokens with at least ``n`` quotes."""
    return bitmask.from_ids(np.flatnonzero(_byte_counts(vocab, b'"') >= n), vocab.size)


def _plain(data: bytes) -> str | None:
    """The text of a string's bytes so far, if it has no escape and ends a character."""
    if b"\\" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


@lru_cache(maxsize=8)
def _ending_a_key(vocab: Vocabulary) -> np.ndarray:
    """The tokens that begin with a quote, and end of generation."""
    return _with_bytes(vocab, b"", first=b'"') | bitmask.from_bool(vocab.end_of_generation)


@lru_cache(maxsize=8)
def _by_bytes(vocab: Vocabulary) -> dict[bytes, list[int]]:
    """The tokens without a quote or backslash, by their bytes."""
    out: dict[bytes, list[int]] = {}
    for token in range(vocab.size):
        data = vocab.token_bytes(token)
        if data and b'"' not in data and b"\\" not in data:
            out.setdefault(data, []).append(token)
    return out


@lru_cache(maxsize=8)
def _before_quote(vocab: Vocabulary) -> dict[bytes, list[int]]:
    """The tokens with a quote and no backslash before it, by their bytes before it."""
    out: dict[bytes, list[int]] = {}
    for token in bitmask.to_ids(_with_quotes(vocab, 1), vocab.size).tolist():
        head = vocab.token_bytes(token).split(b'"', 1)[0]
        if b"\\" not in head:
            out.setdefault(head, []).append(token)
    return out


def _with_bytes(vocab: Vocabulary, anywhere: bytes, first: bytes) -> np.ndarray:
    """The tokens with a byte of ``anywhere``, or whose first byte is in ``first``."""
    flat, offsets = vocab.flat_tokens
    n = offsets.size - 1
    hits = _byte_counts(vocab, anywhere) > 0
    if first:
        lengths = np.diff(offsets)
        heads = flat[np.minimum(offsets[:-1], max(flat.size - 1, 0))]
        hits |= (lengths > 0) & np.isin(heads, np.frombuffer(first, dtype=np.uint8))
    return bitmask.from_ids(np.flatnonzero(hits[:n]), vocab.size)


def _byte_counts(vocab: Vocabulary, wanted: bytes) -> np.ndarray:
    """Per token, how many of its bytes are in ``wanted``."""
    flat, offsets = vocab.flat_tokens
    cum = np.concatenate([[0], np.cumsum(np.isin(flat, np.frombuffer(wanted, dtype=np.uint8)))])
    return (cum[offsets[1:]] - cum[offsets[:-1]])[:offsets.size - 1]

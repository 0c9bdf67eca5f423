"""Read SentencePiece ``*.model`` files with a small protobuf reader of our own.

Only the parts a vocabulary needs are decoded from ``ModelProto``:

* field 1, ``pieces`` (repeated ``SentencePiece``: 1 ``piece``, 2 ``score``, 3 ``type``),
* field 2, ``trainer_spec`` (40 ``unk_id``, 41 ``bos_id``, 42 ``eos_id``, 47 ``eos_piece``).

Piece types: NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4 UNUSED=5 BYTE=6. Normal and
user-defined pieces are their text with ``▁`` read as a space; byte pieces ``<0xNN>`` are
the byte ``NN``; control, unknown and unused pieces keep their text and are special.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tether.errors import VocabularyError
from tether.vocab.loaders import TokenTable

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_SPECIAL_TYPES = frozenset({UNKNOWN, CONTROL, UNUSED})
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Piece:
    """One entry of ``ModelProto.pieces``."""

    text: str
    score: float
    type: int


@dataclass(frozen=True)
class SentencePieceModel:
    """The parts of a ``ModelProto`` that tether uses."""

    pieces: list[Piece]
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int | None = None
    eos_piece: str = "</s>"

    def resolved_eos(self) -> int | None:
        """``trainer_spec.eos_id`` when set, else the id of ``eos_piece`` (``</s>``)."""
        if self.eos_id is not None and 0 <= self.eos_id < len(self.pieces):
            return self.eos_id
        for i, p in enumerate(self.pieces):
            if p.text == self.eos_piece:
                return i
        return None


# -- protobuf wire format -------------------------------------------------------------------
class _Reader:
    """Walks the fields of one protobuf message inside ``buf[start:end]``."""

    def __init__(self, buf: bytes, start: int, end: int, source: str) -> None:
        self.buf, self.pos, self.end, self.source = buf, start, end, source

    def fail(self, what: str, at: int) -> VocabularyError:
        return VocabularyError(f"{self.source}: {what} at byte offset {at}")

    def varint(self) -> int:
        buf, pos = self.buf, self.pos
        result = shift = 0
        while True:
            if pos >= self.end:
                raise self.fail("truncated varint", self.pos)
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 63:
                raise self.fail("varint longer than 10 bytes", self.pos)

    def fields(self) -> Iterator[tuple[int, int, int, int]]:
        """Yield ``(field, wire_type, value, offset)``; for length-delimited fields the
        value is the end offset and the payload starts at ``self.pos``."""
        while self.pos < self.end:
            at = self.pos
            key = self.varint()
            number, wire = key >> 3, key & 7
            if wire == _VARINT:
                yield number, wire, self.varint(), at
            elif wire == _LEN:
                length = self.varint()
                stop = self.pos + length
                if stop > self.end:
                    raise self.fail(f"field {number} runs past the end of its message", at)
                yield number, wire, stop, at
                self.pos = stop
            elif wire in (_FIXED32, _FIXED64):
                size = 4 if wire == _FIXED32 else 8
                if self.pos + size > self.end:
                    raise self.fail(f"truncated fixed-size field {number}", at)
                yield number, wire, self.pos, at
                self.pos += size
            else:
                raise self.fail(f"unsupported protobuf wire type {wire} (field {number})", at)


def _int32(value: int) -> int:
    """A varint holding a (possibly negative) int32."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(buf: bytes, start: int, stop: int, r: _Reader, at: int) -> str:
    try:
        return buf[start:stop].decode("utf-8")
    except UnicodeDecodeError as e:
        raise r.fail("piece text is not UTF-8", start + e.start) from e


# -- ModelProto ------------------------------------------------------------------------------
def parse_model(data: bytes, *, source: str) -> SentencePieceModel:
    """Decode the pieces and trainer ids of a serialized ``ModelProto``."""
    r = _Reader(data, 0, len(data), source)
    pieces: list[Piece] = []
    ids: dict[int, int] = {}
    eos_piece = "</s>"
    for number, wire, value, at in r.fields():
        if number == 1 and wire == _LEN:
            pieces.append(_parse_piece(data, r.pos, value, source, at))
        elif number == 2 and wire == _LEN:
            ids, eos_piece = _parse_trainer(data, r.pos, value, source)
    if not pieces:
        raise VocabularyError(f"{source}: not a SentencePiece model (no pieces, field 1, "
                              "found from byte offset 0)")
    return SentencePieceModel(pieces, unk_id=ids.get(40, 0), bos_id=ids.get(41, 1),
                              eos_id=ids.get(42), eos_piece=eos_piece)


def _parse_piece(data: bytes, start: int, stop: int, source: str, at: int) -> Piece:
    r = _Reader(data, start, stop, source)
    text: str | None = None
    score, kind = 0.0, NORMAL
    for number, wire, value, _ in r.fields():
        if number == 1 and wire == _LEN:
            text = _text(data, r.pos, value, r, at)
        elif number == 2 and wire == _FIXED32:
            score = struct.unpack_from("<f", data, value)[0]
        elif number == 3 and wire == _VARINT:
            kind = value
    if text is None:
        raise VocabularyError(f"{source}: piece at byte offset {at} has no text")
    return Piece(text, score, kind)


def _parse_trainer(data: bytes, start: int, stop: int,
                   source: str) -> tuple[dict[int, int], str]:
    r = _Reader(data, start, stop, source)
    ids: dict[int, int] = {}
    eos_piece = "</s>"
    for number, wire, value, at in r.fields():
        if number in (40, 41, 42, 43) and wire == _VARINT:
            ids[number] = _int32(value)
        elif number == 47 and wire == _LEN:
            eos_piece = _text(data, r.pos, value, r, at)
    return ids, eos_piece


# -- vocabulary ------------------------------------------------------------------------------
def piece_bytes(piece: Piece, source: str = "", index: int = 0) -> bytes:
    """The bytes a piece contributes mid-sequence (see the module docstring)."""
    if piece.type == BYTE:
        m = _BYTE_PIECE.fullmatch(piece.text)
        if m is None:
            raise VocabularyError(f"{source}: byte piece {index} is {piece.text!r}, "
                                  "not <0xNN>")
        return bytes([int(m.group(1), 16)])
    if piece.type in _SPECIAL_TYPES:
        return piece.text.encode("utf-8")
    return piece.text.replace("▁", " ").encode("utf-8")


def parse_sentencepiece(data: bytes, *, source: str) -> TokenTable:
    """The token table of a serialized SentencePiece model."""
    model = parse_model(data, source=source)
    tokens = [piece_bytes(p, source, i) for i, p in enumerate(model.pieces)]
    special = {i for i, p in enumerate(model.pieces) if p.type in _SPECIAL_TYPES}
    table = TokenTable(tokens, special)
    table.add_eos([model.resolved_eos()])
    return table


def load_sentencepiece(path: Path) -> TokenTable:
    """Read the SentencePiece model file at ``path``."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read the file ({e.strerror})") from e
    table = parse_sentencepiece(data, source=str(path))
    table.name = path.name
    return table

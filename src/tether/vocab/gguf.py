"""Read the metadata of GGUF files (llama.cpp models) and the vocabulary stored in it.

A GGUF file starts with ``GGUF``, a version (1 to 3), the tensor count and the key/value
count, then the key/values (typed scalars, strings and arrays), then tensor infos and
data. :func:`read_metadata` reads the key/values only and stops there, so it is cheap even
for a large model; the runtime uses it for ``tokenizer.chat_template``,
``tokenizer.ggml.bos_token_id`` and the like.

:func:`load_gguf` builds the token table the way llama.cpp's ``token_to_piece`` (with
special tokens rendered) does, so it matches ``llama_cpp.Llama`` token for token:

* ``tokenizer.ggml.model == "gpt2"``: normal tokens are byte-level strings;
* ``"llama"`` (SentencePiece), ``"t5"``, ``"bert"``: normal tokens read ``▁`` as a space;
* ``token_type`` 6 (byte) ``<0xNN>`` is that byte; 3 (control) and 2 (unknown) keep their
  text and are special; 4 (user-defined) is literal text; 5 (unused) has no bytes.

End of generation is llama.cpp's set: the eos, eot and eom ids, the FIM pad/repo/separator
tokens, and every token whose text is an end marker (``<|im_end|>``, ``<|endoftext|>``...);
tokens llama.cpp recognises by their text become control tokens, as there.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tether.errors import VocabularyError
from tether.vocab import byte_level
from tether.vocab.loaders import TokenTable

# Value types of GGUF key/values.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY = range(10)
_UINT64, _INT64, _FLOAT64 = 10, 11, 12
_SCALAR_FORMATS: dict[int, str] = {
    _UINT8: "B", _INT8: "b", _UINT16: "H", _INT16: "h", _UINT32: "I", _INT32: "i",
    _FLOAT32: "f", _BOOL: "?", _UINT64: "Q", _INT64: "q", _FLOAT64: "d",
}
_NUMPY_TYPES: dict[int, str] = {
    _UINT8: "u1", _INT8: "i1", _UINT16: "u2", _INT16: "i2", _UINT32: "u4", _INT32: "i4",
    _FLOAT32: "f4", _BOOL: "?", _UINT64: "u8", _INT64: "i8", _FLOAT64: "f8",
}

_MAX_NESTING = 16  # arrays of arrays; real files use at most 2 levels

# tokenizer.ggml.token_type values.
UNDEFINED, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = range(7)
_SENTENCEPIECE_MODELS = frozenset({"llama", "t5", "bert"})
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@dataclass(frozen=True)
class GGUFHeader:
    """The header and key/values of a GGUF file; ``data_offset`` is the offset just past
    the key/values, where the tensor infos start."""

    version: int
    tensor_count: int
    metadata: dict[str, Any]
    data_offset: int


class _Reader:
    """Sequential reads from a buffer, raising :class:`VocabularyError` with the offset."""

    def __init__(self, buf: Any, source: str) -> None:
        self.buf, self.pos, self.source = buf, 0, source
        self.size = len(buf)
        self.endian = "<"
        self.wide = True  # GGUF v2+: 64-bit counts and string lengths
        self.key = ""
        self.depth = 0

    def fail(self, what: str, at: int | None = None) -> VocabularyError:
        where = f" in key {self.key!r}" if self.key else ""
        return VocabularyError(f"{self.source}: {what}{where} at byte offset "
                               f"{self.pos if at is None else at}")

    def take(self, n: int) -> int:
        """Reserve ``n`` bytes; returns their start offset."""
        start = self.pos
        if n < 0 or start + n > self.size:
            raise self.fail(f"truncated file (needs {n} more bytes, file is {self.size})")
        self.pos = start + n
        return start

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack_from(self.endian + fmt, self.buf, self.take(size))[0]

    def count(self) -> int:
        return int(self.scalar("Q" if self.wide else "I"))

    def raw_string(self) -> bytes:
        n = self.count()
        start = self.take(n)
        return bytes(self.buf[start:start + n])

    def string(self) -> str:
        # llama.cpp keeps raw bytes; surrogateescape keeps non-UTF-8 ones round-trippable.
        return self.raw_string().decode("utf-8", "surrogateescape")

    def string_array(self, n: int) -> list[str]:
        """``n`` strings in a row (the token list: a tight loop, it is most of the work)."""
        length_format = struct.Struct(self.endian + ("Q" if self.wide else "I"))
        step = length_format.size
        if n > (self.size - self.pos) // step:
            raise self.fail(f"string array of {n} items cannot fit in the file")
        buf, pos, size, unpack = self.buf, self.pos, self.size, length_format.unpack_from
        out: list[str] = []
        for _ in range(n):
            if pos + step > size:
                break
            (length,) = unpack(buf, pos)
            start, pos = pos + step, pos + step + length
            if pos > size:
                pos = start - step
                break
            out.append(buf[start:pos].decode("utf-8", "surrogateescape"))
        self.pos = pos
        if len(out) < n:
            raise self.fail(f"truncated file in string {len(out)} of {n}")
        return out

    def value(self, kind: int) -> Any:
        if kind in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            return self.array()
        raise self.fail(f"unknown value type {kind}")

    def array(self) -> list[Any]:
        kind = int(self.scalar("I"))
        n = self.count()
        if kind in _NUMPY_TYPES:
            dtype = np.dtype(_NUMPY_TYPES[kind]).newbyteorder(self.endian)
            start = self.take(n * dtype.itemsize)
            return np.frombuffer(self.buf, dtype=dtype, count=n, offset=start).tolist()
        if kind == _STRING:
            return self.string_array(n)
        if kind == _ARRAY:
            if n > (self.size - self.pos) // 12:
                raise self.fail(f"array of {n} arrays cannot fit in the file")
            if self.depth >= _MAX_NESTING:
                raise self.fail(f"arrays nested more than {_MAX_NESTING} deep")
            self.depth += 1
            items = [self.array() for _ in range(n)]
            self.depth -= 1
            return items
        raise self.fail(f"unknown array element type {kind}")


# -- metadata --------------------------------------------------------------------------------
def read_header(path: str | Path) -> GGUFHeader:
    """Read the header and all key/values of the GGUF file at ``path`` (not the tensors)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            if p.stat().st_size == 0:
                raise VocabularyError(f"{p}: empty file, not GGUF (byte offset 0)")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse_header(_Reader(buf, str(p)))
    except OSError as e:
        raise VocabularyError(f"{p}: cannot read the file ({e.strerror or e})") from e


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The key/values of a GGUF file (``tokenizer.ggml.tokens``, ``tokenizer.chat_template``...)."""
    return read_header(path).metadata


def _parse_header(r: _Reader) -> GGUFHeader:
    if bytes(r.buf[:4]) != b"GGUF":
        raise r.fail("not a GGUF file (no 'GGUF' magic)", 0)
    r.take(4)
    version = int(r.scalar("I"))
    if not 1 <= version <= 3:
        r.endian = ">"
        version = int.from_bytes(version.to_bytes(4, "little"), "big")
        if not 1 <= version <= 3:
            raise r.fail(f"unsupported GGUF version {version}", 4)
    r.wide = version >= 2
    tensor_count, kv_count = r.count(), r.count()
    if kv_count > (r.size - r.pos) // 12:
        raise r.fail(f"{kv_count} key/values cannot fit in the file")
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        r.key = ""
        key = r.string()
        r.key = key
        metadata[key] = r.value(int(r.scalar("I")))
    r.key = ""
    return GGUFHeader(version, tensor_count, metadata, r.pos)


# -- vocabulary ------------------------------------------------------------------------------
def load_gguf(path: str | Path) -> TokenTable:
    """The token table of the GGUF file at ``path`` (see the module docstring)."""
    p = Path(path)
    return table_from_metadata(read_metadata(p), source=str(p), name=p.name)


def table_from_metadata(meta: dict[str, Any], *, source: str, name: str = "") -> TokenTable:
    """The token table described by GGUF metadata."""
    model = meta.get("tokenizer.ggml.model")
    texts = meta.get("tokenizer.ggml.tokens")
    if not isinstance(texts, list) or not texts:
        raise VocabularyError(f"{source}: key 'tokenizer.ggml.tokens' is missing or empty")
    if model != "gpt2" and model not in _SENTENCEPIECE_MODELS:
        raise VocabularyError(f"{source}: key 'tokenizer.ggml.model' is {model!r}; "
                              "supported: gpt2, llama, t5, bert")
    types = list(meta.get("tokenizer.ggml.token_type") or [NORMAL] * len(texts))
    if len(types) != len(texts):
        raise VocabularyError(f"{source}: key 'tokenizer.ggml.token_type' has {len(types)} "
                              f"entries for {len(texts)} tokens")
    eog = _llama_cpp_eog(meta, model, texts, types)
    to_bytes = _bpe_bytes if model == "gpt2" else _sentencepiece_bytes
    tokens = [to_bytes(t, k) for t, k in zip(texts, types, strict=True)]
    special = {i for i, k in enumerate(types) if k in (CONTROL, UNKNOWN, UNUSED, UNDEFINED)}
    return TokenTable(tokens, special, eog, name=str(meta.get("general.name") or name))


# -- llama.cpp's end-of-generation rule -----------------------------------------------------
# Roles llama.cpp finds by token text when the metadata does not give their id; a token
# found this way is made a control token.
_ROLE_TEXTS: dict[str, tuple[str, ...]] = {
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<end_of_utterance>"),
    "eom": ("<|eom_id|>",),
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
# gpt-oss markers llama.cpp always renders as text (user-defined, not control).
_RENDERED_TEXTS = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
# llama.cpp's eos id when the metadata gives none, by tokenizer model.
_DEFAULT_EOS: dict[str, int] = {"gpt2": 11, "llama": 2, "t5": 1}
# Tokens that end a generation by their text alone.
_EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
})


def _llama_cpp_eog(meta: dict[str, Any], model: str, texts: list[str],
                   types: list[int]) -> set[int]:
    """The ids llama.cpp treats as end of generation; updates ``types`` as llama.cpp does
    (tokens it recognises by text become control tokens)."""
    n = len(texts)
    first_id: dict[str, int] = {}
    for i, t in enumerate(texts):
        first_id.setdefault(t, i)
    roles: dict[str, int] = {}
    for role, candidates in _ROLE_TEXTS.items():
        given = meta.get(f"tokenizer.ggml.{role}_token_id")
        if isinstance(given, int) and 0 <= given < n:
            roles[role] = given
            continue
        found = [first_id[t] for t in candidates if t in first_id]
        if found:
            roles[role] = min(found)
            _make_control(types, roles[role])
    eog = {roles[r] for r in ("fim_pad", "fim_rep", "fim_sep") if r in roles}
    for i, t in enumerate(texts):
        if t in _EOG_TEXTS:
            eog.add(i)
            _make_control(types, i)
    eos = meta.get("tokenizer.ggml.eos_token_id", _DEFAULT_EOS.get(model))
    for i in (eos, roles.get("eot"), roles.get("eom")):
        if isinstance(i, int) and 0 <= i < n:
            eog.add(i)
    _drop_end_for_harmony(eog, texts, types)
    for i, t in enumerate(texts):
        if t in _RENDERED_TEXTS:
            types[i] = USER_DEFINED
    return eog


def _make_control(types: list[int], i: int) -> None:
    types[i] = CONTROL  # llama.cpp adds the control flag, which then decides the bytes


def _drop_end_for_harmony(eog: set[int], texts: list[str], types: list[int]) -> None:
    """llama.cpp: with ``<|return|>`` and ``<|call|>`` (gpt-oss) ``<|end|>`` is plain text."""
    present = {texts[i]: i for i in eog}
    harmony = {"<|return|>", "<|call|>"} <= present.keys()
    solar = {"<|calls|>", "<|flush|>"} <= present.keys()
    if "<|end|>" in present and (harmony or solar):
        eog.discard(present["<|end|>"])
        types[present["<|end|>"]] = USER_DEFINED


def _literal(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _bpe_bytes(text: str, kind: int) -> bytes:
    if kind == NORMAL:
        return _llama_decode_text(text)
    if kind in (CONTROL, UNKNOWN, USER_DEFINED):
        return _literal(text)
    if kind == BYTE:
        return _byte_piece(text)
    return b""  # unused and undefined tokens have no text in llama.cpp


def _llama_decode_text(text: str) -> bytes:
    """Byte-level text to bytes as llama.cpp does it: a character outside the byte-level
    alphabet is written as ``[UNK_BYTE_0x<its UTF-8 in hex><the whole token>]``."""
    if byte_level.is_byte_level(text):
        return byte_level.decode(text)
    out = bytearray()
    for c in text:
        b = byte_level.CHAR_TO_BYTE.get(c)
        if b is not None:
            out.append(b)
        else:
            raw = _literal(c)
            out += b"[UNK_BYTE_0x" + raw.hex().encode() + _literal(text) + b"]"
    return bytes(out)


def _byte_piece(text: str) -> bytes:
    m = _BYTE_PIECE.fullmatch(text)
    return bytes([int(m.group(1), 16)]) if m else b""


def _sentencepiece_bytes(text: str, kind: int) -> bytes:
    if kind == NORMAL:
        return _literal(text.replace("▁", " "))
    if kind in (CONTROL, UNKNOWN, USER_DEFINED):
        return _literal(text)
    if kind == BYTE:
        return _byte_piece(text)
    return b""

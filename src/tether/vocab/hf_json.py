"""Read Hugging Face ``tokenizer.json`` files (and GPT-2 style ``encoder.json``/``vocab.json``).

The token bytes follow the file's decoder steps, in order, the way the ``tokenizers``
library decodes a token in the middle of a sequence:

* ``ByteLevel``: the token string is GPT-2 byte-level text (:mod:`.byte_level`);
* ``ByteFallback``: a token spelled ``<0xNN>`` is the single byte ``NN``;
* ``Metaspace`` / ``Replace``: the metaspace character (``▁``) or pattern becomes its text;
* ``BPEDecoder``: the end-of-word suffix (``</w>``) becomes a space;
* ``Strip`` trims every token unless a ``Fuse`` came first (then it only trims the start
  of the whole text, a start-of-text rule, like the Metaspace prefix, not applied here).

``added_tokens`` override the model's ids; their bytes are their content as literal UTF-8
text, special or not (llama.cpp renders them so; the ``tokenizers`` decoder would also run
them through ``ByteLevel``, which only differs for contents made of byte-level
characters such as ``"Ġfoo"``), and the special ones are flagged.

End of generation: the ``eos_token`` of a sibling ``tokenizer_config.json`` and the
``eos_token_id`` of a sibling ``generation_config.json`` / ``config.json`` (the loader adds
the special tokens spelling an end marker).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.errors import VocabularyError
from tether.vocab import byte_level
from tether.vocab.loaders import TokenTable, check_size

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


# A token on its way through the decoder: text, or final bytes once a byte was produced.
_Value = str | bytes
_Step = Callable[[_Value], _Value]


@dataclass
class _Decoding:
    """The decoder's steps, applied in order to one model token string."""

    steps: list[_Step] = field(default_factory=list)

    def token_bytes(self, text: str) -> bytes:
        value: _Value = text
        for step in self.steps:
            value = step(value)
        return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _byte_fallback(value: _Value) -> _Value:
    """``<0xNN>`` becomes that byte (still text when ASCII, so later steps can edit it)."""
    if isinstance(value, str):
        m = _BYTE_TOKEN.fullmatch(value)
        if m:
            b = int(m.group(1), 16)
            return chr(b) if b < 0x80 else bytes([b])
    return value


def _byte_level(value: _Value) -> _Value:
    return byte_level.decode(value) if isinstance(value, str) else value


def _text_step(edit: Callable[[str], str]) -> _Step:
    return lambda value: edit(value) if isinstance(value, str) else value


def _replace(old: str, new: str) -> _Step:
    return _text_step(lambda text: text.replace(old, new))


def _strip(content: str, start: int, stop: int) -> _Step:
    """The ``Strip`` decoder applied to each token (when no ``Fuse`` came before it)."""
    def edit(text: str) -> str:
        lo, hi = 0, len(text)
        while lo < min(start, hi) and text[lo] == content:
            lo += 1
        while hi > lo and len(text) - hi < stop and text[hi - 1] == content:
            hi -= 1
        return text[lo:hi]
    return _text_step(edit)


# -- files ----------------------------------------------------------------------------------
def load_json_file(path: Path) -> TokenTable:
    """Read ``tokenizer.json`` (or a GPT-2 ``encoder.json``) at ``path``."""
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("model"), dict):
        table = parse_tokenizer_json(data, source=str(path))
    elif isinstance(data, dict) and data and all(isinstance(v, int) for v in data.values()):
        table = parse_gpt2_encoder(data, source=str(path))
    else:
        raise VocabularyError(f"{path}: JSON is neither a tokenizer.json (no 'model' key) "
                              "nor a GPT-2 encoder.json (token -> id object)")
    table.name = table.name or path.parent.name or path.name
    _add_sibling_eos(path.parent, table)
    return table


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read the file ({e.strerror})") from e
    except UnicodeDecodeError as e:
        raise VocabularyError(f"{path}: not UTF-8 text (byte offset {e.start})") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise VocabularyError(f"{path}: invalid JSON at line {e.lineno} column {e.colno} "
                              f"(byte offset {e.pos}): {e.msg}") from e
    except RecursionError:
        raise VocabularyError(f"{path}: the JSON nests too deeply for a tokenizer file") from None


def _add_sibling_eos(folder: Path, table: TokenTable) -> None:
    """End-of-generation ids from the config files next to the tokenizer, when present."""
    by_text = {t: i for i, t in enumerate(table.tokens) if i in table.special}
    config = _optional_json(folder / "tokenizer_config.json")
    if isinstance(config, dict):
        eos = config.get("eos_token")
        content = eos.get("content") if isinstance(eos, dict) else eos
        if isinstance(content, str) and content.encode("utf-8") in by_text:
            table.eos.add(by_text[content.encode("utf-8")])
    for name in ("generation_config.json", "config.json"):
        data = _optional_json(folder / name)
        if isinstance(data, dict):
            ids = data.get("eos_token_id")
            table.add_eos(ids if isinstance(ids, list) else [ids])


def _optional_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # a broken side file only loses an optional hint


# -- tokenizer.json -------------------------------------------------------------------------
def parse_tokenizer_json(data: dict[str, Any], *, source: str) -> TokenTable:
    """The token table of a parsed ``tokenizer.json`` document."""
    model = data.get("model")
    if not isinstance(model, dict):
        raise VocabularyError(f"{source}: key 'model' is not an object")
    pieces = _model_pieces(model, source)
    decoding = _decoding(data, model, source)
    added = _added_tokens(data.get("added_tokens") or [], source)
    size = max([*pieces, *added, -1]) + 1
    if size == 0:
        raise VocabularyError(f"{source}: key 'model.vocab' holds no tokens")
    check_size(size, source)
    tokens = [b""] * size
    for i, text in pieces.items():
        tokens[i] = decoding.token_bytes(text)
    special: set[int] = set()
    for i, (content, is_special) in added.items():
        tokens[i] = content.encode("utf-8", "surrogateescape")
        if is_special:
            special.add(i)
    return TokenTable(tokens, special)


def _model_pieces(model: dict[str, Any], source: str) -> dict[int, str]:
    kind = model.get("type")
    vocab = model.get("vocab")
    if kind is None:  # old files leave the type out; BPE is the only one with merges
        kind = "BPE" if "merges" in model else ("Unigram" if isinstance(vocab, list) else None)
    if kind == "BPE" and isinstance(vocab, dict):
        return _check_ids(vocab, source)
    if kind == "Unigram" and isinstance(vocab, list):
        out: dict[int, str] = {}
        for i, entry in enumerate(vocab):
            if not (isinstance(entry, list) and entry and isinstance(entry[0], str)):
                raise VocabularyError(f"{source}: key 'model.vocab[{i}]' is not [piece, score]")
            out[i] = entry[0]
        return out
    if kind in ("WordPiece", "WordLevel"):
        raise VocabularyError(f"{source}: key 'model.type' is {kind}, whose tokens have no "
                              "fixed bytes mid-sequence (the decoder adds spaces); not supported")
    raise VocabularyError(f"{source}: key 'model' has unsupported type {kind!r} or a "
                          "malformed 'vocab'")


def _check_ids(vocab: dict[str, Any], source: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for text, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise VocabularyError(f"{source}: key 'model.vocab[{text!r}]' is not a token id")
        out[i] = text
    return out


def _decoding(data: dict[str, Any], model: dict[str, Any], source: str) -> _Decoding:
    decoding = _Decoding()
    steps = _flatten(data.get("decoder"), "decoders", source, "decoder")
    if not steps:  # no decoder: fall back on what the model and pre-tokenizer say
        if model.get("byte_fallback") is True:
            decoding.steps.append(_byte_fallback)
        for s in _flatten(data.get("pre_tokenizer"), "pretokenizers", source, "pre_tokenizer"):
            if s.get("type") == "ByteLevel":
                decoding.steps.append(_byte_level)
            elif s.get("type") == "Metaspace":
                decoding.steps.append(_replace(_metaspace_char(s), " "))
        return decoding
    fused = False
    for step in steps:
        fused = _apply_decoder_step(decoding, step, fused, source)
    return decoding


def _apply_decoder_step(decoding: _Decoding, step: dict[str, Any], fused: bool,
                        source: str) -> bool:
    """Add one decoder step; returns whether tokens are joined (``Fuse``) from here on."""
    kind = step.get("type")
    if kind == "ByteLevel":
        decoding.steps.append(_byte_level)
    elif kind == "ByteFallback":
        decoding.steps.append(_byte_fallback)
    elif kind == "Metaspace":
        decoding.steps.append(_replace(_metaspace_char(step), " "))
    elif kind == "Replace":
        pattern = step.get("pattern")
        old = pattern.get("String") if isinstance(pattern, dict) else None
        if not isinstance(old, str) or not old:
            raise VocabularyError(f"{source}: key 'decoder' has a Replace whose pattern is not "
                                  "a plain string (regex patterns are not supported)")
        decoding.steps.append(_replace(old, str(step.get("content", ""))))
    elif kind == "BPEDecoder":
        suffix = step.get("suffix", "</w>")
        if isinstance(suffix, str) and suffix:
            decoding.steps.append(_replace(suffix, " "))
    elif kind == "Strip":
        if not fused:  # after Fuse, Strip only trims the ends of the whole text
            decoding.steps.append(_strip_step(step, source))
    elif kind == "Fuse":
        return True
    else:
        raise VocabularyError(f"{source}: key 'decoder' has unsupported type {kind!r}")
    return fused


def _strip_step(step: dict[str, Any], source: str) -> _Step:
    content, start, stop = step.get("content"), step.get("start", 0), step.get("stop", 0)
    if not (isinstance(content, str) and len(content) == 1 and isinstance(start, int)
            and isinstance(stop, int)):
        raise VocabularyError(f"{source}: key 'decoder' has a malformed Strip step")
    return _strip(content, start, stop)


def _metaspace_char(step: dict[str, Any]) -> str:
    char = step.get("replacement") or step.get("str_rep") or "▁"
    return char if isinstance(char, str) else "▁"


def _flatten(node: Any, key: str, source: str, where: str) -> list[dict[str, Any]]:
    """The steps of a decoder or pre-tokenizer, with ``Sequence`` nodes expanded."""
    if node is None:
        return []
    if not isinstance(node, dict):
        raise VocabularyError(f"{source}: key {where!r} is not an object")
    if node.get("type") != "Sequence":
        return [node]
    children = node.get(key)
    if not isinstance(children, list):
        raise VocabularyError(f"{source}: key '{where}.{key}' is not a list")
    return [s for i, child in enumerate(children)
            for s in _flatten(child, key, source, f"{where}.{key}[{i}]")]


def _added_tokens(entries: Any, source: str) -> dict[int, tuple[str, bool]]:
    if not isinstance(entries, list):
        raise VocabularyError(f"{source}: key 'added_tokens' is not a list")
    out: dict[int, tuple[str, bool]] = {}
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise VocabularyError(f"{source}: key 'added_tokens[{k}]' is not an object")
        i, content = entry.get("id"), entry.get("content")
        if not isinstance(i, int) or isinstance(i, bool) or i < 0 or not isinstance(content, str):
            raise VocabularyError(f"{source}: key 'added_tokens[{k}]' needs an integer 'id' "
                                  "and a string 'content'")
        out[i] = (content, bool(entry.get("special", False)))
    return out


# -- GPT-2 encoder.json ---------------------------------------------------------------------
def parse_gpt2_encoder(vocab: dict[str, Any], *, source: str) -> TokenTable:
    """A GPT-2 ``encoder.json``: byte-level token -> id. ``<|endoftext|>`` is special."""
    pieces = _check_ids(vocab, source)
    tokens = [b""] * check_size(max(pieces) + 1, source)
    special: set[int] = set()
    for i, text in pieces.items():
        tokens[i] = byte_level.decode(text)
        if text == "<|endoftext|>":
            special.add(i)
    return TokenTable(tokens, special)

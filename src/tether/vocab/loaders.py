"""Build a :class:`~tether.vocab.Vocabulary` from a tokenizer file or object (SPEC §2).

:func:`load_file` looks at a file (its name first, then its first bytes) and hands it to
the reader of its format; each reader lives in its own module and needs no tokenizer
library:

* ``tokenizer.json`` (Hugging Face) and GPT-2 ``encoder.json``/``vocab.json`` -> :mod:`.hf_json`
* ``*.tiktoken`` (base64 token and rank per line) -> :mod:`.tiktoken_file`
* SentencePiece ``*.model`` (protobuf) -> :mod:`.sentencepiece_model`
* ``*.gguf`` (llama.cpp) -> :mod:`.gguf`

:func:`load_transformers` and :func:`load_llama` read live tokenizer objects. Every reader
produces a :class:`TokenTable` (bytes per id, special ids, end-of-generation ids) and
:func:`to_vocabulary` adds the end-of-generation markers and builds the vocabulary.
End of generation is the tokenizer's eos (and eot/eom) ids plus the special tokens whose
text is a known end marker; for GGUF files and llama.cpp models it is llama.cpp's own set.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.errors import VocabularyError
from tether.vocab.vocabulary import Vocabulary

# Texts of special tokens that end a generation (GGUF files and llama.cpp models use
# llama.cpp's own rule instead, see :mod:`.gguf`).
END_MARKERS: frozenset[str] = frozenset({
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "</s>",
    "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<end_of_turn>", "<EOT>",
    "<end_of_utterance>",
})
_END_MARKER_BYTES = frozenset(m.encode("utf-8") for m in END_MARKERS)


# The largest vocabulary accepted (real ones have up to a few hundred thousand ids); it
# keeps a corrupt id in a file from allocating gigabytes.
MAX_VOCAB_SIZE = 1 << 24


def check_size(size: int, source: str) -> int:
    """``size`` if it is a plausible vocabulary size, else a :class:`VocabularyError`."""
    if size > MAX_VOCAB_SIZE:
        raise VocabularyError(f"{source}: token id {size - 1} is beyond the largest supported "
                              f"vocabulary ({MAX_VOCAB_SIZE} ids)")
    return size


@dataclass
class TokenTable:
    """What a reader found: ``tokens[i]`` is the bytes of id ``i`` (``b""`` if unused)."""

    tokens: list[bytes]
    special: set[int] = field(default_factory=set)
    eos: set[int] = field(default_factory=set)
    name: str = ""

    def add_eos(self, ids: Iterable[Any]) -> None:
        """Add end-of-generation ids, ignoring ``None`` and ids outside the table."""
        for i in ids:
            if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(self.tokens):
                self.eos.add(i)


def to_vocabulary(table: TokenTable, *, end_markers: bool = True) -> Vocabulary:
    """The vocabulary of ``table``.

    With ``end_markers``, special tokens spelling an end marker (:data:`END_MARKERS`)
    join the end-of-generation set.
    """
    eos = set(table.eos)
    if end_markers:
        eos.update(i for i in table.special if table.tokens[i] in _END_MARKER_BYTES)
    return Vocabulary(table.tokens, special_ids=table.special | eos, eos_ids=eos,
                      name=table.name)


# -- files ----------------------------------------------------------------------------------
def load_file(path: str | os.PathLike[str]) -> Vocabulary:
    """Read a tokenizer file of any supported format (see the module docstring).

    A folder is searched for ``tokenizer.json``, ``tokenizer.model``, ``vocab.json`` or
    ``encoder.json``, then a single ``*.gguf`` or ``*.tiktoken`` file.
    """
    p = Path(path)
    if p.is_dir():
        p = _file_in_folder(p)
    if not p.is_file():
        raise VocabularyError(f"{p}: no such tokenizer file")
    kind = _sniff(p)
    if kind == "gguf":
        from tether.vocab.gguf import load_gguf

        return to_vocabulary(load_gguf(p), end_markers=False)
    if kind == "json":
        from tether.vocab.hf_json import load_json_file

        return to_vocabulary(load_json_file(p))
    if kind == "tiktoken":
        from tether.vocab.tiktoken_file import load_tiktoken

        return to_vocabulary(load_tiktoken(p))
    from tether.vocab.sentencepiece_model import load_sentencepiece

    return to_vocabulary(load_sentencepiece(p))


def _file_in_folder(folder: Path) -> Path:
    for name in ("tokenizer.json", "tokenizer.model", "vocab.json", "encoder.json"):
        if (folder / name).is_file():
            return folder / name
    for pattern in ("*.gguf", "*.tiktoken"):
        found = sorted(folder.glob(pattern))
        if len(found) == 1:
            return found[0]
    raise VocabularyError(f"{folder}: no tokenizer file found in this folder")


def _sniff(path: Path) -> str:
    """The format of ``path``: ``gguf``, ``json``, ``tiktoken`` or ``sentencepiece``."""
    suffix = path.suffix.lower()
    by_suffix = {".gguf": "gguf", ".tiktoken": "tiktoken", ".json": "json",
                 ".model": "sentencepiece"}
    if suffix in by_suffix:
        return by_suffix[suffix]
    try:
        with path.open("rb") as f:
            head = f.read(256)
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read the file ({e.strerror})") from e
    if head[:4] == b"GGUF":
        return "gguf"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    first = head.split(b"\n", 1)[0].split(b" ")
    if len(first) == 2 and first[1].strip().isdigit():
        return "tiktoken"
    if head[:1] == b"\x0a":  # a ModelProto's first field: the repeated pieces
        return "sentencepiece"
    raise VocabularyError(f"{path}: not a tokenizer file (expected tokenizer.json, a "
                          "*.tiktoken file, a SentencePiece *.model or a *.gguf; the "
                          "content looks like none of them)")


# -- tokenizer objects ------------------------------------------------------------------------
def load_transformers(tok: Any) -> Vocabulary:
    """The vocabulary of a tokenizer object.

    A transformers tokenizer (its ``backend_tokenizer`` JSON, or for slow SentencePiece
    tokenizers ``sp_model`` / ``vocab_file`` plus ``added_tokens_decoder``); also a bare
    ``tokenizers.Tokenizer`` or a ``tiktoken.Encoding``. ``all_special_ids`` are special
    and ``eos_token_id`` ends generation, with the special end markers.
    """
    table = _object_table(tok)
    table.name = table.name or str(getattr(tok, "name_or_path", "") or "")
    ids = getattr(tok, "all_special_ids", None) or []
    table.special.update(i for i in ids if isinstance(i, int) and 0 <= i < len(table.tokens))
    table.add_eos([getattr(tok, "eos_token_id", None)])
    return to_vocabulary(table)


def _object_table(tok: Any) -> TokenTable:
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None and callable(getattr(tok, "to_str", None)):
        backend = tok  # a tokenizers.Tokenizer
    if backend is not None:
        return _backend_table(tok, backend)
    if callable(getattr(tok, "decode_single_token_bytes", None)):
        return _tiktoken_encoding_table(tok)
    table = _sentencepiece_table(tok)
    _add_slow_added_tokens(tok, table)
    return table


def _backend_table(tok: Any, backend: Any) -> TokenTable:
    from tether.vocab.hf_json import parse_tokenizer_json

    source = f"{type(tok).__name__} tokenizer JSON"
    try:
        data = json.loads(backend.to_str())
    except (ValueError, TypeError) as e:
        raise VocabularyError(f"{source}: to_str() is not JSON ({e})") from e
    if not isinstance(data, dict):
        raise VocabularyError(f"{source}: to_str() is not a JSON object")
    return parse_tokenizer_json(data, source=source)


def _tiktoken_encoding_table(enc: Any) -> TokenTable:
    """A ``tiktoken.Encoding``: every id it knows; the ids between ranks are ``b""``."""
    tokens: list[bytes] = []
    for i in range(int(enc.n_vocab)):
        try:
            tokens.append(enc.decode_single_token_bytes(i))
        except KeyError:
            tokens.append(b"")
    special = {enc.encode_single_token(t) for t in enc.special_tokens_set}
    return TokenTable(tokens, special, name=str(getattr(enc, "name", "")))


def _sentencepiece_table(tok: Any) -> TokenTable:
    from tether.vocab.sentencepiece_model import parse_sentencepiece

    sp = getattr(tok, "sp_model", None)
    if sp is not None and hasattr(sp, "serialized_model_proto"):
        return parse_sentencepiece(sp.serialized_model_proto(),
                                   source=f"{type(tok).__name__}.sp_model")
    vocab_file = getattr(tok, "vocab_file", None)
    if vocab_file and Path(vocab_file).is_file():
        kind = _sniff(Path(vocab_file))
        if kind == "sentencepiece":
            from tether.vocab.sentencepiece_model import load_sentencepiece

            return load_sentencepiece(Path(vocab_file))
        if kind == "json":
            from tether.vocab.hf_json import load_json_file

            return load_json_file(Path(vocab_file))
    raise VocabularyError(f"{type(tok).__name__}: neither backend_tokenizer, sp_model nor a "
                          "readable vocab_file; cannot read this tokenizer")


def _add_slow_added_tokens(tok: Any, table: TokenTable) -> None:
    """Slow tokenizers keep added tokens apart from the SentencePiece model."""
    added = getattr(tok, "added_tokens_decoder", None) or {}
    for i, token in added.items():
        content = getattr(token, "content", str(token))
        if i >= len(table.tokens):
            table.tokens.extend([b""] * (i + 1 - len(table.tokens)))
        table.tokens[i] = content.encode("utf-8")
        if getattr(token, "special", False):
            table.special.add(i)
        else:
            table.special.discard(i)


# -- llama.cpp ------------------------------------------------------------------------------
# llama.cpp token attributes (``llama_token_attr`` bit flags).
_ATTR_UNKNOWN = 1 << 0
_ATTR_UNUSED = 1 << 1
_ATTR_CONTROL = 1 << 3
_SPECIAL_ATTRS = _ATTR_UNKNOWN | _ATTR_UNUSED | _ATTR_CONTROL


def load_llama(llama: Any) -> Vocabulary:
    """The vocabulary of a ``llama_cpp.Llama`` (``vocab_only=True`` models work too).

    Bytes come from ``llama_token_to_piece`` with special tokens rendered; special ids
    from the token attributes; end of generation from ``llama_vocab_is_eog``.
    """
    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover - the object cannot exist without it
        raise VocabularyError("load_llama needs llama-cpp-python") from e
    vocab = _llama_vocab_handle(llama, llama_cpp)
    n = int(llama.n_vocab())
    table = TokenTable([_llama_piece(llama_cpp, vocab, i) for i in range(n)],
                       name=Path(str(getattr(llama, "model_path", "") or "")).name)
    for i in range(n):
        if int(llama_cpp.llama_vocab_get_attr(vocab, i)) & _SPECIAL_ATTRS:
            table.special.add(i)
        if llama_cpp.llama_vocab_is_eog(vocab, i):
            table.eos.add(i)
    table.add_eos([int(llama.token_eos())])
    return to_vocabulary(table, end_markers=False)


def _llama_vocab_handle(llama: Any, llama_cpp: Any) -> Any:
    model = getattr(llama, "_model", None)
    vocab = getattr(model, "vocab", None)
    if vocab is None and getattr(model, "model", None) is not None:
        vocab = llama_cpp.llama_model_get_vocab(model.model)
    if vocab is None:
        raise VocabularyError(f"{type(llama).__name__}: no loaded model vocabulary "
                              "(was the model closed?)")
    return vocab


def _llama_piece(llama_cpp: Any, vocab: Any, token: int) -> bytes:
    """The exact bytes of ``token`` with special tokens rendered (no lstrip)."""
    size = 32
    while True:
        buf = ctypes.create_string_buffer(size)
        n = int(llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, True))
        if 0 <= n <= size:
            return buf.raw[:n]
        if n >= 0 or -n <= size:
            raise VocabularyError(f"llama_token_to_piece failed for token {token} ({n})")
        size = -n

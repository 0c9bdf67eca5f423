"""Read tiktoken encodings (``*.tiktoken``: one ``base64(token) rank`` pair per line).

The file holds only the mergeable ranks; the special tokens of the public OpenAI
encodings are known here and recognised from the file name (``cl100k_base.tiktoken``,
``o200k_base...``). Ids between the last rank and the special tokens, which the encoding
does not use, get ``b""`` (the vocabulary treats them as control tokens).
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from pathlib import Path

from tether.errors import VocabularyError
from tether.vocab.loaders import TokenTable, check_size

_ENDOFTEXT = "<|endoftext|>"

_O200K_HARMONY: dict[str, int] = {
    "<|startoftext|>": 199998, _ENDOFTEXT: 199999, "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001, "<|return|>": 200002, "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004, "<|channel|>": 200005, "<|start|>": 200006,
    "<|end|>": 200007, "<|message|>": 200008, "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010, "<|reserved_200011|>": 200011, "<|call|>": 200012,
    "<|endofprompt|>": 200018,
    **{f"<|reserved_{i}|>": i for i in (*range(200013, 200018), *range(200019, 201088))},
}

# Special tokens of the public encodings, by encoding name.
KNOWN_SPECIAL_TOKENS: dict[str, dict[str, int]] = {
    "gpt2": {_ENDOFTEXT: 50256},
    "r50k_base": {_ENDOFTEXT: 50256},
    "p50k_base": {_ENDOFTEXT: 50256},
    "p50k_edit": {_ENDOFTEXT: 50256, "<|fim_prefix|>": 50281, "<|fim_middle|>": 50282,
                  "<|fim_suffix|>": 50283},
    "cl100k_base": {_ENDOFTEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k_base": {_ENDOFTEXT: 199999, "<|endofprompt|>": 200018},
    "o200k_harmony": _O200K_HARMONY,
}


def special_tokens_for(path: Path) -> dict[str, int]:
    """The special tokens of the encoding named by the file (longest known name prefix)."""
    stem = path.name.split(".")[0].lower()
    names = [n for n in KNOWN_SPECIAL_TOKENS if stem.startswith(n)]
    return dict(KNOWN_SPECIAL_TOKENS[max(names, key=len)]) if names else {}


def load_tiktoken(path: Path, special_tokens: Mapping[str, int] | None = None) -> TokenTable:
    """Read ``path``; ``special_tokens`` (text -> id) defaults to the known ones for its name."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read the file ({e.strerror})") from e
    ranks = parse_ranks(data, source=str(path))
    specials = dict(special_tokens) if special_tokens is not None else special_tokens_for(path)
    return _table(ranks, specials, source=str(path), name=path.name.split(".")[0])


def parse_ranks(data: bytes, *, source: str) -> dict[int, bytes]:
    """rank -> token bytes from the text of a ``.tiktoken`` file."""
    ranks: dict[int, bytes] = {}
    offset = 0
    for line in data.splitlines(keepends=True):
        body = line.strip()
        if body:
            rank, token = _parse_line(body, offset, source)
            ranks[rank] = token
        offset += len(line)
    if not ranks:
        raise VocabularyError(f"{source}: no 'base64 rank' lines (byte offset 0)")
    return ranks


def _parse_line(body: bytes, offset: int, source: str) -> tuple[int, bytes]:
    parts = body.split()
    if len(parts) != 2 or not parts[1].isdigit():
        raise VocabularyError(f"{source}: line at byte offset {offset} is not 'base64 rank'")
    try:
        token = binascii.a2b_base64(parts[0], strict_mode=True)
    except binascii.Error as e:
        raise VocabularyError(f"{source}: bad base64 at byte offset {offset} ({e})") from e
    return int(parts[1]), token


def _table(ranks: dict[int, bytes], specials: dict[str, int], *, source: str,
           name: str) -> TokenTable:
    size = check_size(max([*ranks, *specials.values()]) + 1, source)
    tokens = [b""] * size
    for rank, token in ranks.items():
        tokens[rank] = token
    for text, i in specials.items():
        if i in ranks:
            raise VocabularyError(f"{source}: special token {text!r} has id {i}, "
                                  "which is also a rank in the file")
        tokens[i] = text.encode("utf-8")
    return TokenTable(tokens, set(specials.values()), name=name)

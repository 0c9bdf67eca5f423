"""The GPT-2 byte <-> unicode mapping used by byte-level BPE tokenizers.

Byte-level BPE vocabularies (GPT-2, SmolLM2, DeepSeek, Llama 3, ...) store every token as a
string in which each *byte* is written as one printable character: the printable bytes
``!``..``~``, ``¡``..``¬`` and ``®``..``ÿ`` stand for themselves, and the 68 others (control
bytes, space, DEL, NBSP, soft hyphen) are moved, in byte order, to U+0100 and up. So a
space is ``Ġ`` (U+0120) and a newline ``Ċ`` (U+010A).

:func:`decode` turns such a string back into bytes the way the ``tokenizers`` ByteLevel
decoder does: a string holding any character outside the mapping is not byte-level
text, and its UTF-8 encoding is used as is.
"""

from __future__ import annotations


def _printable_bytes() -> list[int]:
    return [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]


def _build_maps() -> tuple[dict[int, str], dict[str, int]]:
    kept = set(_printable_bytes())
    byte_to_char: dict[int, str] = {}
    moved = 0
    for b in range(256):
        if b in kept:
            byte_to_char[b] = chr(b)
        else:
            byte_to_char[b] = chr(256 + moved)
            moved += 1
    return byte_to_char, {c: b for b, c in byte_to_char.items()}


BYTE_TO_CHAR, CHAR_TO_BYTE = _build_maps()

# ``str.translate`` table: each mapped character becomes the Latin-1 character of its byte;
# the Latin-1 characters that are *not* part of the mapping (space, control characters...)
# become U+FFFF so that the final ``encode("latin-1")`` fails for them, as it does for any
# other character above U+00FF.
_TO_LATIN1: dict[int, str] = {ord(c): chr(b) for c, b in CHAR_TO_BYTE.items()}
_TO_LATIN1.update({b: "\uffff" for b in range(256) if chr(b) not in CHAR_TO_BYTE})

_FROM_LATIN1: dict[int, str] = {b: c for b, c in BYTE_TO_CHAR.items()}


def decode(text: str) -> bytes:
    """The bytes a byte-level token string stands for.

    A string with a character outside the mapping (an added token such as ``" foo"`` or
    ``"<｜User｜>"``) is returned as its UTF-8 bytes, like the ``tokenizers`` decoder does.
    """
    try:
        return text.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def is_byte_level(text: str) -> bool:
    """True when every character of ``text`` belongs to the byte-level alphabet."""
    return all(c in CHAR_TO_BYTE for c in text)


def encode(data: bytes) -> str:
    """The byte-level string of ``data`` (the inverse of :func:`decode`)."""
    return data.decode("latin-1").translate(_FROM_LATIN1)

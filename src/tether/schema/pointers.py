"""JSON pointers (RFC 6901) as the schema compiler writes and reads them.

Error locations are JSON pointers into the schema (``""`` is the root,
``/properties/a~1b`` the property ``a/b``); ``$ref`` fragments are percent-decoded first.
"""

from __future__ import annotations

from urllib.parse import unquote

from tether.errors import CompileError


def join(pointer: str, *keys: str | int) -> str:
    """``pointer`` extended by ``keys`` (escaped)."""
    for key in keys:
        pointer += "/" + str(key).replace("~", "~0").replace("/", "~1")
    return pointer


def split(fragment: str, location: str) -> list[str]:
    """The keys of the pointer ``fragment`` (percent-encoded, as in a ``$ref``)."""
    text = unquote(fragment)
    if text == "":
        return []
    if not text.startswith("/"):
        raise CompileError(f"{fragment!r} is not a JSON pointer", location=location)
    keys = []
    for raw in text[1:].split("/"):
        if "~" in raw.replace("~0", "").replace("~1", ""):
            raise CompileError(f"bad escape in the JSON pointer {fragment!r}", location=location)
        keys.append(raw.replace("~1", "/").replace("~0", "~"))
    return keys

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


# A node id evaluated in a dynamic scope (``$dynamicRef``) starts with the scope's
# number: ``⟨2⟩/$defs/a``. Node ids without one are in the empty scope.
SCOPE_OPEN, SCOPE_CLOSE = "⟨", "⟩"


def scoped(scope: int, nid: str) -> str:
    """``nid`` in dynamic scope number ``scope``."""
    return f"{SCOPE_OPEN}{scope}{SCOPE_CLOSE}{nid}" if scope else nid


def scope_of(nid: str) -> tuple[int, str]:
    """The dynamic scope number of a node id and the node id without it."""
    if not nid.startswith(SCOPE_OPEN):
        return 0, nid
    number, _, rest = nid[1:].partition(SCOPE_CLOSE)
    return int(number), rest


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

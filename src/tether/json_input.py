"""JSON documents users hand tether (schemas, registries, constraint specs): nesting is
bounded before Python's recursive ``json`` module or any recursive pass sees them.

A document nested deeper than :data:`MAX_NESTING` arrays/objects is a
:class:`~tether.errors.LimitExceeded` naming where it gets too deep (a JSON pointer for a
Python value, ``line:column`` for text) — never a ``RecursionError``. A string (value or
key) with a lone surrogate (JSON's ``"\ud800"`` escape reads as one), which no UTF-8
text holds, is a :class:`~tether.errors.CompileError` at its pointer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tether.errors import CompileError, LimitExceeded

MAX_NESTING = 256  # arrays/objects inside one another

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def parse(text: str, what: str) -> Any:
    """The value of JSON ``text``; ``what`` names it in errors (``"the schema"``)."""
    _check_text_nesting(text, what)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise CompileError(f"{what} is not valid JSON: {e.msg}",
                           location=f"{e.lineno}:{e.colno}") from None
    except RecursionError:  # pragma: no cover - the scan above bounds the depth
        raise LimitExceeded(f"{what} nests deeper than {MAX_NESTING} arrays/objects") from None
    return value


def check_document(value: Any, what: str) -> None:
    """Raise :class:`LimitExceeded` at the first place ``value`` nests too deep, and
    :class:`CompileError` at a string UTF-8 cannot encode (iterative: works on values of
    any depth). Each node carries its path as (parent's path, key) links; the JSON
    pointer is spelled only for a node that fails."""
    stack: list[tuple[Any, _Path, int]] = [(value, None, 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, what, path)
        elif isinstance(node, dict):
            for key in node:
                _check_text(str(key), what, (path, str(key)))
        if isinstance(node, dict | list):
            if depth >= MAX_NESTING:
                raise LimitExceeded(f"{what} nests deeper than {MAX_NESTING} arrays/objects",
                                    location=_pointer(path))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend((v, (path, str(k)), depth + 1) for k, v in items)


_Path = tuple[Any, str] | None  # (the parent's path, the key or index), None at the root


def _pointer(path: _Path) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(_escape(key))
    return "".join(f"/{key}" for key in reversed(keys))


def dump(value: Any, what: str) -> str:
    """``value`` as compact JSON text (bounded nesting, no NaN/Infinity)."""
    check_document(value, what)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CompileError(f"{what} cannot be written as JSON: {e}") from None


def _check_text_nesting(text: str, what: str) -> None:
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                raise LimitExceeded(f"{what} nests deeper than {MAX_NESTING} arrays/objects",
                                    location=f"{line}:{column}")
        elif token in "]}":
            depth -= 1


def _check_text(text: str, what: str, path: _Path) -> None:
    if text.isascii():
        return
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise CompileError(f"{what} holds a string with a lone surrogate "
                           f"(U+{ord(text[e.start]):04X}), which no UTF-8 text holds",
                           location=_pointer(path).encode(errors="backslashreplace").decode()
                           ) from None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")

"""What the Types domain knows about builtin types (docs/code-domains.md, "Types"): the
members of ``str``, ``list``, ``dict``, … and the types builtin functions and methods
return, read from typeshed's ``builtins`` stub (``typeshed_client``) — never from
running code. A type is named by its builtin class (``"str"``); a method not called yet
is ``"str.upper"``. Anything else is unknown (``None``), and constrains nothing.
"""

from __future__ import annotations

import ast
import builtins
import functools

KNOWN = ("str", "bytes", "int", "float", "complex", "bool", "list", "dict", "set",
         "frozenset", "tuple", "range")
_ALIASES = {"LiteralString": "str", "List": "list", "Dict": "dict", "Set": "set",
            "FrozenSet": "frozenset", "Tuple": "tuple"}


def members(type_name: str) -> frozenset[str] | None:
    """The attributes of a known builtin type (``None`` for any other name)."""
    if type_name not in KNOWN:
        return None
    return frozenset(dir(getattr(builtins, type_name)))


def annotation_type(parts: tuple[str, ...]) -> str | None:
    """The type an annotation declares, from its lexemes (``("list", "[", "int", "]")``
    → ``"list"``); ``None`` when it admits other types (``Optional``, ``|``, ``Any``)
    or names no known builtin."""
    if not parts or "|" in parts or any(p in ("Optional", "Union", "None", "Any")
                                         for p in parts):
        return None
    head = parts[0]
    if head == "typing" and len(parts) >= 3 and parts[1] == ".":
        head = parts[2]
    head = _ALIASES.get(head, head)
    return head if head in KNOWN else None


def call_result(callee: object) -> str | None:
    """The type a call returns: a known type's constructor, a builtin function, a
    method of a known type (``"str.split"`` → ``"list"``), or a function the code
    defines (its :class:`~tether.code.expected_types.Signature`'s return type)."""
    if callee is None:
        return None
    if not isinstance(callee, str):
        return getattr(callee, "returns", None)
    if callee in KNOWN:
        return callee
    if callee.startswith("fn:"):
        return _stub_returns().get(("", callee[3:]))
    owner, _, method = callee.partition(".")
    return _stub_returns().get((owner, method))


def builtin_callee(name: str) -> str | None:
    """What calling the builtin ``name`` means for :func:`call_result` (``None``: not
    a builtin the stub types)."""
    if name in KNOWN:
        return name
    if ("", name) in _stub_returns():
        return f"fn:{name}"
    return None


@functools.cache
def _stub_returns() -> dict[tuple[str, str], str]:
    """(class or "", function) → the known type it returns, when every overload agrees."""
    try:
        import typeshed_client

        tree = typeshed_client.get_stub_ast("builtins")
    except Exception:  # no stubs: nothing is known, nothing is constrained
        return {}
    if tree is None:
        return {}
    found: dict[tuple[str, str], set[str | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found.setdefault(("", node.name), set()).add(_returned(node, ""))
        elif isinstance(node, ast.ClassDef) and node.name in KNOWN:
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found.setdefault((node.name, item.name), set()).add(
                        _returned(item, node.name))
    return {key: next(iter(kinds)) for key, kinds in found.items()
            if len(kinds) == 1 and None not in kinds}


def _returned(node: ast.FunctionDef, owner: str) -> str | None:
    annotation = node.returns
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    if not isinstance(annotation, ast.Name):
        return None
    name = annotation.id
    if name == "Self":
        return owner or None
    name = _ALIASES.get(name, name)
    return name if name in KNOWN else None

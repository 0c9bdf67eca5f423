"""What the Types domain knows about builtin types (docs/code-domains.md, "Types"): the
members of ``str``, ``list``, ``dict``, … and the types builtin functions and methods
return, read from typeshed's ``builtins`` stub (``typeshed_client``) — never from
running code. A type is named by its builtin class (``"str"``); a method not called yet
is ``"str.upper"``; the class itself (the name ``str``, not an instance of it) is
``"type:str"``. Anything else is unknown (``None``), and constrains nothing.
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Iterator

KNOWN = ("str", "bytes", "int", "float", "complex", "bool", "list", "dict", "set",
         "frozenset", "tuple", "range")
_ALIASES = {"LiteralString": "str", "List": "list", "Dict": "dict", "Set": "set",
            "FrozenSet": "frozenset", "Tuple": "tuple"}


CLASS = "type:"  # the prefix of a known builtin class's own value ("type:str")


def known(value: object) -> bool:
    """Whether ``value`` is a value of known type: an instance or a class."""
    return value in KNOWN or (isinstance(value, str) and value.startswith(CLASS)
                              and value[len(CLASS):] in KNOWN)


@functools.cache
def members(type_name: str) -> frozenset[str] | None:
    """The attributes of a value of known type (``None`` for any other name): an
    instance's are its class's, a class's also its metaclass's (``str.mro``)."""
    if type_name.startswith(CLASS):
        own = members(type_name[len(CLASS):])
        return None if own is None else own | frozenset(dir(type))
    if type_name not in KNOWN:
        return None
    return frozenset(dir(getattr(builtins, type_name)))


@functools.cache
def operator_methods(value: str) -> frozenset[str] | None:
    """The attributes an operator looks up on a value of known type: its type's — for
    a class its metaclass's (``str | None`` is ``type.__or__``; ``str + 1`` has none)."""
    if value.startswith(CLASS) and known(value):
        return frozenset(dir(type))
    return members(value)


def instance_type(value: str) -> str:
    """The type whose methods ``value.name`` reads: a class's own (``str.join``)."""
    return value[len(CLASS):] if value.startswith(CLASS) else value


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
    if callee.startswith(CLASS):  # a constructor, a method read off the class
        if "." not in callee:
            return instance_type(callee) if known(callee) else None
        callee = callee[len(CLASS):]
    if callee.startswith("fn:"):
        return _stub_returns().get(("", callee[3:]))
    owner, _, method = callee.partition(".")
    return _stub_returns().get((owner, method))


def builtin_callee(name: str) -> str | None:
    """What calling the builtin ``name`` means for :func:`call_result` (``None``: not
    a builtin the stub types)."""
    if name in KNOWN:
        return CLASS + name
    if ("", name) in _stub_functions():
        return f"fn:{name}"
    return None


@functools.cache
def builtins_stub() -> ast.Module | None:
    """typeshed's ``builtins`` stub (``None`` without ``typeshed_client``: nothing is
    known, nothing is constrained)."""
    try:
        import typeshed_client

        return typeshed_client.get_stub_ast("builtins")
    except Exception:
        return None


def stub_definitions(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The definitions in a stub's body, those under ``if sys.version_info …`` (either
    branch) included: every overload counts."""
    for node in body:
        if isinstance(node, ast.If):
            yield from stub_definitions(node.body)
            yield from stub_definitions(node.orelse)
        else:
            yield node


@functools.cache
def _stub_functions() -> dict[tuple[str, str], frozenset[str | None]]:
    """(class or "", function) → the types its overloads return (``None``: unknown)."""
    tree = builtins_stub()
    if tree is None:
        return {}
    found: dict[tuple[str, str], set[str | None]] = {}
    for node in stub_definitions(tree.body):
        if isinstance(node, ast.FunctionDef):
            found.setdefault(("", node.name), set()).add(_returned(node, ""))
        elif isinstance(node, ast.ClassDef) and node.name in KNOWN:
            for item in stub_definitions(node.body):
                if isinstance(item, ast.FunctionDef):
                    found.setdefault((node.name, item.name), set()).add(
                        _returned(item, node.name))
    return {key: frozenset(kinds) for key, kinds in found.items()}


@functools.cache
def _stub_returns() -> dict[tuple[str, str], str]:
    """(class or "", function) → the known type it returns, when every overload agrees."""
    return {key: next(iter(kinds)) for key, kinds in _stub_functions().items()
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

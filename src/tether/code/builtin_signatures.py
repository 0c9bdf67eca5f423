"""The signatures of builtin callables, as the Types domain checks their calls
(docs/code-domains.md, "Types"): builtin functions (``len``), the constructors of the
known builtin types (``range``) and their methods (``"abc".split``), read from typeshed's
``builtins`` stub (``typeshed_client``), every overload of each.

What a call's argument may not be is decided on the few values whose type the Types
domain knows — an instance of a known builtin type (``"int"``), such a class itself
(``"type:str"``) or ``None`` — and only where *no* overload accepts it: a parameter
annotated with a builtin class accepts its subclasses (and mypy's promotions: an ``int``
is a ``float``); one annotated with a protocol (``Sized``, ``Iterable``, ``SupportsIndex``,
…) the values that have its methods; anything else (a type variable, an alias the stub
defines, ``object``) accepts every value. So ``len(1.5)``, ``sum(1, 2)``, ``bin("a")`` and
``len(str)`` are refused (mypy's arg-type or call-overload), a call with an arity or a
keyword no overload has likewise, and nothing the stub does not say is ever refused.
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass

from tether.code.expected_types import Refused, Signature, fits
from tether.code.value_types import (
    CLASS,
    KNOWN,
    builtins_stub,
    instance_type,
    known,
    operator_methods,
    stub_definitions,
)

# The values whose type is known: instances, the classes themselves, None.
_VALUES = tuple(KNOWN) + tuple(CLASS + name for name in KNOWN) + ("None",)
# Structural protocols of typing/_typeshed and the methods a value needs to be one.
_PROTOCOLS = {
    "Sized": ("__len__",), "Iterable": ("__iter__",), "SupportsIter": ("__iter__",),
    "Iterator": ("__iter__", "__next__"), "SupportsNext": ("__next__",),
    "SupportsIndex": ("__index__",), "SupportsInt": ("__int__",),
    "SupportsFloat": ("__float__",), "SupportsComplex": ("__complex__",),
    "SupportsAbs": ("__abs__",), "SupportsBytes": ("__bytes__",),
    "SupportsLenAndGetItem": ("__len__", "__getitem__"),
    "SupportsKeysAndGetItem": ("keys", "__getitem__"), "Mapping": ("keys", "__getitem__"),
    "Sequence": ("__len__", "__getitem__"), "Collection": ("__len__", "__iter__"),
    "Container": ("__contains__",), "Callable": ("__call__",),
}
_ACCEPTS_ALL = frozenset({"object", "Any", "Hashable"})
_UNIONS = frozenset({"Union", "Optional"})


@dataclass(frozen=True)
class _Overload:
    """One overload: positional parameters (name, has a default, positional-only), the
    type each refuses; ``*args``'s; keyword-only parameters; whether ``**kwargs``."""

    positional: tuple[tuple[str, bool, bool], ...]
    refused: tuple[frozenset[str], ...]
    star: frozenset[str] | None  # what *args refuses (None: no *args)
    keyword_only: tuple[tuple[str, bool], ...]
    keyword_refused: tuple[frozenset[str], ...]
    double_star: bool

    def refused_at(self, i: int) -> frozenset[str] | None:
        """What the ``i``-th positional argument may not be (``None``: no parameter)."""
        if i < len(self.refused):
            return self.refused[i]
        return self.star

    def refused_as(self, keyword: str) -> frozenset[str] | None:
        for (name, _, only), refused in zip(self.positional, self.refused, strict=True):
            if name == keyword and not only:
                return refused
        for (name, _), refused in zip(self.keyword_only, self.keyword_refused, strict=True):
            if name == keyword:
                return refused
        return frozenset() if self.double_star else None

    def refuses(self, positional: int, keywords: frozenset[str]) -> bool:
        if positional > len(self.positional) and self.star is None:
            return True  # too many positional arguments
        for keyword in keywords:
            if self.refused_as(keyword) is None:
                return True  # no such parameter
            if any(name == keyword for name, _, _ in self.positional[:positional]):
                return True  # given twice
        for i, (name, default, only) in enumerate(self.positional):
            if i >= positional and not default and (only or name not in keywords):
                return True  # missing
        return any(not default and name not in keywords for name, default in self.keyword_only)


@dataclass(frozen=True)
class BuiltinSignature:
    """A builtin callable as its calls see it, over all its overloads (the interface of
    :class:`~tether.code.expected_types.Signature`): what each argument may not be, and
    whether an arity or keyword fits none."""

    overloads: tuple[_Overload, ...]

    def positional_type(self, i: int) -> Refused | None:
        """What the ``i``-th positional argument may not be: refused by every overload
        that has such a parameter (``None``: none has one, or nothing is refused)."""
        return _common([o.refused_at(i) for o in self.overloads])

    def keyword_type(self, name: str) -> Refused | None:
        return _common([o.refused_as(name) for o in self.overloads])

    def refuses(self, positional: int, keywords: frozenset[str]) -> bool:
        return all(o.refuses(positional, keywords) for o in self.overloads)


def _common(refused: list[frozenset[str] | None]) -> Refused | None:
    present = [r for r in refused if r is not None]
    if not present:
        return None
    values = frozenset.intersection(*present)
    return Refused(values) if values else None


def builtin_signature(callee: object) -> BuiltinSignature | None:
    """The signature of the callable ``callee`` names (:func:`value_types.call_result`'s
    names: ``"fn:len"``, ``"type:range"``, ``"str.split"``, ``"type:str.maketrans"``);
    ``None`` when the stub does not type it (or a class's method read off the class,
    which takes its instance first, unless static)."""
    if not isinstance(callee, str):
        return None
    return _signatures().get(callee)


@functools.cache
def _signatures() -> dict[str, BuiltinSignature]:
    tree = builtins_stub()
    if tree is None:
        return {}
    defs: dict[str, list[_Overload]] = {}
    for node in stub_definitions(tree.body):
        if isinstance(node, ast.FunctionDef):
            defs.setdefault(f"fn:{node.name}", []).append(_overload(node, skip=0))
        elif isinstance(node, ast.ClassDef) and node.name in KNOWN:
            for item in stub_definitions(node.body):
                if not isinstance(item, ast.FunctionDef):
                    continue
                decorators = {d.id for d in item.decorator_list if isinstance(d, ast.Name)}
                if "property" in decorators:
                    continue
                static = "staticmethod" in decorators
                overload = _overload(item, skip=0 if static else 1)
                if item.name in ("__new__", "__init__"):
                    defs.setdefault(CLASS + node.name, []).append(overload)
                    continue
                defs.setdefault(f"{node.name}.{item.name}", []).append(overload)
                if static:
                    defs.setdefault(f"{CLASS}{node.name}.{item.name}", []).append(overload)
    return {callee: BuiltinSignature(tuple(overloads)) for callee, overloads in defs.items()}


def _overload(node: ast.FunctionDef, skip: int) -> _Overload:
    args = node.args
    only = [(a, True) for a in args.posonlyargs] + [(a, False) for a in args.args]
    only = only[skip:]
    first_default = len(args.posonlyargs) + len(args.args) - len(args.defaults) - skip
    positional = tuple((a.arg, i >= first_default, po or a.arg.startswith("__"))
                       for i, (a, po) in enumerate(only))
    return _Overload(
        positional=positional,
        refused=tuple(_refused(a.annotation) for a, _ in only),
        star=None if args.vararg is None else _refused(args.vararg.annotation),
        keyword_only=tuple((a.arg, d is not None)
                           for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)),
        keyword_refused=tuple(_refused(a.annotation) for a in args.kwonlyargs),
        double_star=args.kwarg is not None)


def _refused(annotation: ast.expr | None) -> frozenset[str]:
    """The known values a parameter so annotated does not accept."""
    return frozenset(v for v in _VALUES if not _accepts(annotation, v))


def _accepts(annotation: ast.expr | None, value: str) -> bool:
    """Whether a parameter annotated ``annotation`` may be given ``value`` (a known value,
    :data:`_VALUES`); ``True`` wherever the annotation is not understood."""
    if annotation is None:
        return True
    if isinstance(annotation, ast.Constant):
        return annotation.value is not None or value == "None"  # (a string: unknown)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _accepts(annotation.left, value) or _accepts(annotation.right, value)
    args: list[ast.expr] = []
    if isinstance(annotation, ast.Subscript):
        sub = annotation.slice
        args = list(sub.elts) if isinstance(sub, ast.Tuple) else [sub]
        annotation = annotation.value
    if not isinstance(annotation, ast.Name):
        return True
    name = "str" if annotation.id == "LiteralString" else annotation.id
    if name in _UNIONS:
        return not args or value == "None" and name == "Optional" or any(
            _accepts(a, value) for a in args)
    if name in _ACCEPTS_ALL:
        return True
    if name == "type":
        return value.startswith(CLASS)
    if name in _PROTOCOLS:
        have = operator_methods(value) if known(value) else frozenset(dir(None))
        return all(method in (have or ()) for method in _PROTOCOLS[name])
    if name not in _nominal_classes():
        return True  # a type variable, an alias: unknown
    if value == "None" or value.startswith(CLASS):
        return False
    return fits(name, value) or name in (
        c.__name__ for c in getattr(builtins, instance_type(value)).__mro__)


@functools.cache
def _nominal_classes() -> frozenset[str]:
    """The classes the stub defines that are not protocols (a value is one only by
    inheritance: ``bytes`` is no ``frozendict``, ``bool`` is an ``int``)."""
    tree = builtins_stub()
    if tree is None:
        return frozenset()
    return frozenset(node.name for node in stub_definitions(tree.body)
                     if isinstance(node, ast.ClassDef) and not any(
                         "Protocol" in ast.unparse(base) for base in node.bases))


def call_signature(callee: object) -> Signature | BuiltinSignature | None:
    """What a call of ``callee`` is checked against: the function the code defines, or
    the builtin (``None``: neither known)."""
    return callee if isinstance(callee, Signature) else builtin_signature(callee)

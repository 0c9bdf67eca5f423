"""``uniqueItems`` beyond finite item domains: which arrays the matcher checks.

Distinct items are not a context-free language, so where an array's items do not come
from a small finite set (:mod:`tether.schema.arrays` spells those out) the grammar
allows any items and the matcher checks them as the text is read
(:mod:`tether.engine.unique_items`): an item that is complete and equal to an earlier
one is refused. That is exact only if every *open* item can still become a new value —
so the items must be *extendable* (:func:`extendable`): strings without a length bound,
pattern or format, numbers without bounds or ``multipleOf``, arrays without
``maxItems``, objects that take more keys, and ``true``/``false``/``null`` (decided by
their first byte). Anything else keeps the old answer: refused (``strict``) or ignored
with a warning.

The matcher knows an array by its path in the JSON text, so the arrays must be found at
fixed paths from the root (:func:`unique_paths`): the walk follows declared properties
(``("key", name)``), prefix positions (``("index", i)``), later items
(``("from", n)``) and undeclared keys (``("any",)``); a path where some arrays need the
check and others may repeat items, or a checked array inside a recursion, is a
:class:`~tether.errors.CompileError` at the ``uniqueItems`` pointer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.errors import CompileError
from tether.schema.shapes import ANY, Arr, Bool, Null, Num, Obj, Shape, Str, Sub

if TYPE_CHECKING:
    from tether.schema.normalize import Normalizer

Step = tuple  # ("key", name) | ("any",) | ("index", i) | ("from", n)
Path = tuple[Step, ...]
MAX_PATH_DEPTH = 24  # nesting the walk follows to find the checked arrays


def extendable(shapes: tuple[Shape, ...]) -> bool:
    """Whether every open value of these shapes can still become infinitely many values
    (or is decided by its first byte: ``true``/``false``/``null``)."""
    for x in shapes:
        if isinstance(x, Null | Bool):
            continue
        if isinstance(x, Str):
            if x.max_len is not None or x.patterns or x.formats:
                return False
        elif isinstance(x, Num):
            if x.lo is not None or x.hi is not None or x.multiples:
                return False
        elif isinstance(x, Arr):
            if x.max_items is not None:
                return False
        elif isinstance(x, Obj):
            if x.max_props is not None or x.names != ANY or x.pattern_props or any(
                    sub != ANY for _, sub in x.additional) or x.unevaluated:
                return False
        else:  # enum/const values, refused parts
            return False
    return True


def unique_paths(norm: Normalizer, root: Sub, checked: set[str]) -> tuple[Path, ...]:
    """The paths of the arrays whose ``uniqueItems`` (by pointer, ``checked``) the
    matcher enforces (see the module docstring)."""
    reaches: dict[frozenset[Sub], bool] = {}
    found: set[str] = set()
    paths: list[Path] = []

    def shapes_of(subs: frozenset[Sub]) -> list[Shape]:
        out: list[Shape] = []
        for sub in subs:
            out += [x for x in norm.of_sub(sub).shapes if x not in out]
        return out

    def reaches_checked(subs: frozenset[Sub]) -> bool:
        hit = reaches.get(subs)
        if hit is None:
            reaches[subs] = False  # (a cycle reaches what its other paths reach)
            shapes = shapes_of(subs)
            hit = any(isinstance(x, Arr) and x.unique in checked for x in shapes) or any(
                reaches_checked(child) for _, child in _children(norm, shapes))
            reaches[subs] = hit
        return hit

    def visit(subs: frozenset[Sub], path: Path) -> None:
        shapes = shapes_of(subs)
        arrays = [x for x in shapes if isinstance(x, Arr)]
        wanted = [x.unique for x in arrays if x.unique in checked]
        if wanted:
            if any(x.unique is None for x in arrays):
                raise CompileError("uniqueItems cannot be enforced: at this place other "
                                   "branches of the schema allow repeated items",
                                   location=wanted[0])
            found.update(wanted)  # type: ignore[arg-type]
            paths.append(path)
        for step, child in _children(norm, shapes):
            if reaches_checked(child):
                if len(path) >= MAX_PATH_DEPTH:
                    raise CompileError("uniqueItems cannot be enforced inside a recursive "
                                       f"schema (deeper than {MAX_PATH_DEPTH} levels)",
                                       location=min(checked))
                visit(child, (*path, step))

    visit(frozenset({root}), ())
    missing = checked - found
    if missing:
        raise CompileError("uniqueItems cannot be enforced here: the array is not at a "
                           "fixed place in the document", location=min(missing))
    return tuple(paths)


def _children(norm: Normalizer, shapes: list[Shape]) -> list[tuple[Step, frozenset[Sub]]]:
    """The positions below these shapes: one step each, with the subschemas there."""
    out: list[tuple[Step, frozenset[Sub]]] = []
    objects = [x for x in shapes if isinstance(x, Obj)]
    keys = dict.fromkeys(k for x in objects for k, _ in x.props)
    for key in keys:
        out.append((("key", key), frozenset(norm.value_sub(x, key) for x in objects)))
    undeclared = frozenset(sub for x in objects for sub in
                           [*(s for _, s in x.pattern_props), *(s for _, s in x.additional)])
    if any(not x.additional for x in objects):  # keys no keyword describes: any value
        undeclared |= {ANY}
    if objects and undeclared:
        out.append((("any",), undeclared))
    arrays = [x for x in shapes if isinstance(x, Arr)]
    n = max((len(x.prefix) for x in arrays), default=0)
    for i in range(n):
        out.append((("index", i), frozenset(x.prefix[i] if i < len(x.prefix) else x.items
                                            for x in arrays)))
    if arrays:
        out.append((("from", n), frozenset(x.items for x in arrays)))
    return out

"""What the matcher checks beside the grammar: distinct items, long strings' lengths,
distinct keys.

Two JSON Schema constraints are left to the matcher (:mod:`tether.engine.json_checks`),
which reads the text with a JSON scanner as it is generated:

- ``uniqueItems`` where an array's items do not come from a small finite set
  (:mod:`tether.schema.arrays` spells those out): distinct items are not a context-free
  language, so the grammar allows any items and the matcher refuses an item that is
  complete and equal to an earlier one. That is exact only if every *open* item can
  still become a new value — so the items must be *extendable* (:func:`extendable`):
  strings without a length bound, pattern or format, numbers without bounds or
  ``multipleOf``, arrays without ``maxItems``, objects that take more keys, and
  ``true``/``false``/``null`` (decided by their first byte). Anything else keeps the
  old answer: refused (``strict``) or ignored with a warning.
- ``maxLength`` too large for the automaton (each counted code point costs states:
  ``maxLength: 65535``) on a string with no pattern or format: the grammar bounds the
  string by its other constraints only and the matcher counts its code points (a string
  without a pattern can end at any length, so counting is exact).

- Distinct keys (:class:`~tether.JsonSchema`'s ``distinct_keys``, which the generation
  policy turns on): keys a pattern or ``additionalProperties`` allows could be written
  twice in one object (JSON allows it; most consumers do not). The grammar gives each
  declared property once; the matcher refuses a key an object already has, in every
  object — a key is decided by its closing quote, and a string with no other key
  allowed than the ones written is rare (then the object cannot go on).

The matcher knows a value by its path in the JSON text, so these values must be found at
fixed paths from the root (:func:`checked_paths`): the walk follows declared properties
(``("key", name)``), prefix positions (``("index", i)``), later items
(``("from", n)``) and undeclared keys (``("any",)``); a path where some values need the
check and others do not, or a checked value inside a recursion, is a
:class:`~tether.errors.CompileError` at the keyword's pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tether.errors import CompileError, LimitExceeded
from tether.schema.shapes import ANY, Arr, Bool, Lit, Null, Num, Obj, Shape, Str, Sub

if TYPE_CHECKING:
    from tether.schema.normalize import Normalizer

Step = tuple  # ("key", name) | ("any",) | ("index", i) | ("from", n)
Path = tuple[Step, ...]
MAX_PATH_DEPTH = 24  # nesting the walk follows to find the checked values


@dataclass(frozen=True)
class RuntimeChecks:
    """The paths of the arrays whose items must be distinct, of the strings whose code
    points are counted (with their ``maxLength``), and whether objects' keys must be
    distinct."""

    unique: tuple[Path, ...] = ()
    lengths: tuple[tuple[Path, int], ...] = ()
    distinct_keys: bool = False


def counted(s: Str) -> Str | None:
    """``s`` without its ``maxLength``, if the matcher may count it instead (no pattern
    or format: the string can end at any length); else None."""
    if s.max_len is None or s.patterns or s.excluded_patterns or s.formats \
            or s.excluded_formats:
        return None
    return replace(s, max_len=None)


def length_key(s: Str) -> Str:
    """What identifies a string shape across the walk and the emitter."""
    return replace(s, where="")


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
            if x.lo is not None or x.hi is not None or x.multiples or x.non_multiples:
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


def checked_paths(norm: Normalizer, root: Sub, unique: set[str],
                  lengths: dict[Str, tuple[int, str]]) -> RuntimeChecks:
    """The paths of the arrays whose ``uniqueItems`` (by pointer, ``unique``) and of the
    strings whose ``maxLength`` (``lengths``: by :func:`length_key` of the shape, the
    bound and its pointer) the matcher enforces (see the module docstring)."""
    reaches: dict[frozenset[Sub], bool] = {}
    found: set = set()
    unique_at: list[Path] = []
    lengths_at: list[tuple[Path, int]] = []

    def shapes_of(subs: frozenset[Sub]) -> list[Shape]:
        out: list[Shape] = []
        for sub in subs:
            out += [x for x in norm.of_sub(sub).shapes if x not in out]
        return out

    def checked(x: Shape) -> bool:
        return (isinstance(x, Arr) and x.unique in unique) or \
            (isinstance(x, Str) and length_key(x) in lengths)

    def reaches_checked(subs: frozenset[Sub]) -> bool:
        hit = reaches.get(subs)
        if hit is None:
            reaches[subs] = False  # (a cycle reaches what its other paths reach)
            shapes = shapes_of(subs)
            hit = any(checked(x) for x in shapes) or any(
                reaches_checked(child) for _, child in _children(norm, shapes))
            reaches[subs] = hit
        return hit

    def visit(subs: frozenset[Sub], path: Path) -> None:
        shapes = shapes_of(subs)
        arrays = [x for x in shapes if isinstance(x, Arr)]
        wanted = [x.unique for x in arrays if x.unique in unique]
        if wanted:
            if any(x.unique is None for x in arrays):
                raise CompileError("uniqueItems cannot be enforced: at this place other "
                                   "branches of the schema allow repeated items",
                                   location=wanted[0])
            found.update(wanted)
            unique_at.append(path)
        strings = [x for x in shapes if isinstance(x, Str)]
        limits = {lengths[length_key(x)][0] for x in strings if length_key(x) in lengths}
        if limits:
            where = next(lengths[length_key(x)][1] for x in strings
                         if length_key(x) in lengths)
            longest = max((len(v) for x in shapes if isinstance(x, Lit) and x.kind == "string"
                           for v in x.values), default=0)
            if len(limits) > 1 or any(length_key(x) not in lengths for x in strings) \
                    or longest > min(limits):
                raise LimitExceeded("maxLength is too large for the automaton, and other "
                                    "branches of the schema bound this string otherwise",
                                    location=where)
            found.update(length_key(x) for x in strings)
            lengths_at.append((path, limits.pop()))
        for step, child in _children(norm, shapes):
            if reaches_checked(child):
                if len(path) >= MAX_PATH_DEPTH:
                    raise CompileError("uniqueItems or a long maxLength cannot be enforced "
                                       f"inside a recursive schema (deeper than "
                                       f"{MAX_PATH_DEPTH} levels)", location=_first(
                                           unique, lengths))
                visit(child, (*path, step))

    visit(frozenset({root}), ())
    missing = (unique | set(lengths)) - found
    if missing:
        raise CompileError("uniqueItems or a long maxLength cannot be enforced here: the "
                           "value is not at a fixed place in the document (an object key?)",
                           location=_first(unique & missing,
                                           {k: v for k, v in lengths.items() if k in missing}))
    return RuntimeChecks(tuple(unique_at), tuple(lengths_at))


def _first(unique: set[str], lengths: dict[Str, tuple[int, str]]) -> str:
    """A pointer to report: the first ``uniqueItems``, else a string's ``maxLength``."""
    if unique:
        return min(unique)
    return min(where for _, where in lengths.values())


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

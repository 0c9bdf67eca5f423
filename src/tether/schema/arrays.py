"""Array shapes → JSON array text.

Item ``i`` follows ``prefixItems[i]`` (draft-07: ``items`` as a list), later items
follow ``items``/``additionalItems``; ``minItems``/``maxItems`` become counted
repetitions. ``contains`` splits items into hits and misses and counts the hits
(arrays with no other length or position constraint). ``uniqueItems`` is enforced on
finite item domains (``enum``/``const``/booleans/null, at most :data:`MAX_UNIQUE`
values) by spelling out the orders of distinct values; on extendable items by the
matcher (:mod:`tether.schema.runtime_checks`); elsewhere it cannot be enforced and is
refused (``strict``) or ignored with a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.automata.regex_ast import Repeat
from tether.errors import CompileError
from tether.grammar.ir import Expr
from tether.schema.json_text import alternate, concat
from tether.schema.keywords import report
from tether.schema.runtime_checks import extendable
from tether.schema.shapes import Arr, Bool, Lit, Null, negate_sub

if TYPE_CHECKING:
    from tether.schema.emit import Emitter

MAX_UNIQUE = 6  # distinct values uniqueItems may permute


def emit_array(a: Arr, em: Emitter) -> Expr | None:
    """The array text of ``a``; None when no array fits it."""
    if a.contains:
        return _contains(a, em)
    if a.unique and (a.max_items is None or a.max_items > 1):
        unique = _unique(a, em)
        if unique is not False:
            return unique
    elements: list[Expr | None] = [em.ref(sub) for sub in a.prefix]
    items = em.ref(a.items)
    hi = a.max_items
    for i, element in enumerate(elements):
        if element is None:
            hi = i if hi is None else min(hi, i)
            break
    if items is None:
        hi = len(elements) if hi is None else min(hi, len(elements))
    if hi is not None and a.min_items > hi:
        return em.empty(f"no array has {a.min_items} items that all fit", a.unique or "")
    body = _items(elements, items, a.min_items, hi, em) if hi != 0 else None
    return em.layout.container("[", body, "]", empty_ok=a.min_items == 0)


def _items(elements: list[Expr | None], items: Expr | None, lo: int, hi: int | None,
           em: Emitter) -> Expr:
    """Non-empty item sequences: element ``i`` from ``elements`` then ``items``."""
    n = len(elements)
    comma = em.layout.comma
    if hi is not None:
        n = min(n, hi)
    if n == 0:
        assert items is not None
        return em.layout.joined(items, items, max(lo - 1, 0), None if hi is None else hi - 1)
    rest: Expr | None = None
    if items is not None and (hi is None or hi > n):
        rest = Repeat(concat(comma, items), max(lo - n, 0), None if hi is None else hi - n)
    for i in range(n - 1, 0, -1):  # right to left: ", e_i (rest)" optional past minItems
        step = concat(comma, elements[i]) if rest is None else concat(comma, elements[i], rest)
        rest = step if i < lo else Repeat(step, 0, 1)
    return elements[0] if rest is None else concat(elements[0], rest)


def _contains(a: Arr, em: Emitter) -> Expr | None:
    if len(a.contains) > 1 or a.prefix or a.unique or a.min_items > a.contains[0].min \
            or a.max_items is not None:
        raise CompileError("contains together with prefixItems, uniqueItems, minItems or "
                           "maxItems is not supported", location=a.contains[0].where)
    c = a.contains[0]
    hit = em.ref(a.items | c.sub)
    miss = em.ref(a.items | negate_sub(c.sub))
    comma = em.layout.comma
    forms: list[Expr] = []
    if c.min == 0 and miss is not None:
        forms.append(em.layout.joined(miss, miss, 0, None))
    if hit is not None and (c.max is None or c.max >= max(c.min, 1)):
        misses = None if miss is None else em.layout.joined(miss, miss, 0, None)
        block = hit if misses is None else concat(hit, Repeat(concat(comma, misses), 0, 1))
        lead = [] if misses is None else [Repeat(concat(misses, comma), 0, 1)]
        more = Repeat(concat(comma, block), max(c.min - 1, 0),
                      None if c.max is None else c.max - 1)
        forms.append(concat(*lead, block, more))
    if not forms:
        return em.empty("no array has the items 'contains' needs", c.where)
    return em.layout.container("[", alternate(forms), "]", empty_ok=c.min == 0)


def _unique(a: Arr, em: Emitter) -> Expr | None | bool:
    """Arrays of distinct values from a finite domain; False if the domain is not finite
    (after refusing or warning)."""
    values = _finite_domain(a, em)
    if values is None and all(extendable(em.norm.of_sub(sub).shapes)
                              for sub in (*a.prefix, a.items)):
        em.unique_checked.add(a.unique)  # type: ignore[arg-type]
        return False  # any items here; the matcher checks them (runtime_checks.py)
    if values is None or len(values) > MAX_UNIQUE:
        what = "the items are not from a small finite set" if values is None else \
            f"more than {MAX_UNIQUE} distinct item values"
        report(f"uniqueItems cannot be enforced: {what}", a.unique or "", strict=em.strict)
        return False
    texts = [em.layout.literal_value(v) for v in values]
    lo, hi = a.min_items, min(a.max_items if a.max_items is not None else len(texts), len(texts))
    if lo > hi:
        return em.empty(f"minItems {lo} > the {len(texts)} distinct allowed values", a.unique)

    def orders(left: tuple[int, ...], depth: int) -> Expr | None:
        forms = []
        for i in left:
            tail = orders(tuple(j for j in left if j != i), depth + 1) \
                if depth + 1 < hi else None
            step = texts[i] if tail is None else concat(
                texts[i], tail if depth + 1 < lo else Repeat(tail, 0, 1))
            forms.append(step if depth == 0 else concat(em.layout.comma, step))
        return alternate(forms) if forms else None

    body = orders(tuple(range(len(texts))), 0) if hi > 0 else None
    return em.layout.container("[", body, "]", empty_ok=lo == 0)


def _finite_domain(a: Arr, em: Emitter) -> list | None:
    if a.prefix:
        return None
    values: list = []
    for shape in em.norm.of_sub(a.items).shapes:
        if isinstance(shape, Lit):
            values += shape.values
        elif isinstance(shape, Bool):
            values += sorted(shape.values)
        elif isinstance(shape, Null):
            values.append(None)
        else:
            return None
    return values


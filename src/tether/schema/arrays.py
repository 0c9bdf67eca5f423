"""Array shapes → JSON array text.

Item ``i`` follows ``prefixItems[i]`` (draft-07: ``items`` as a list), later items
follow ``items``/``additionalItems``; ``minItems``/``maxItems`` become counted
repetitions. ``contains`` (one or several, with or without ``minItems``/``maxItems``)
splits items into classes by the clauses they match and counts hits and length in a
small automaton (not beside ``prefixItems`` or ``uniqueItems``). ``uniqueItems`` is
enforced on finite item domains (``enum``/``const``/booleans/null, at most
:data:`MAX_UNIQUE` values) by spelling out the orders of distinct values; on extendable
items by the matcher (:mod:`tether.schema.runtime_checks`); elsewhere it cannot be
enforced and is refused (``strict``) or ignored with a warning.
"""

from __future__ import annotations

from itertools import product
from typing import TYPE_CHECKING

from tether.automata.regex_ast import EMPTY, Repeat
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import Expr
from tether.schema.json_text import alternate, concat
from tether.schema.keywords import report
from tether.schema.runtime_checks import extendable
from tether.schema.shapes import Arr, Bool, Lit, Null, negate_sub

if TYPE_CHECKING:
    from tether.schema.emit import Emitter

MAX_UNIQUE = 6  # distinct values uniqueItems may permute
MAX_CONTAINS = 3  # contains of one array (each doubles the classes of items)
MAX_CONTAINS_STATES = 256  # counting states of contains and the length together


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
    """Arrays whose items each ``contains`` counts within its bounds, of a length within
    ``minItems``/``maxItems``: the items split into classes by the ``contains`` they
    match (one subschema each), and the arrays are the words of a counting automaton
    over those classes — per clause the hits so far and the length, each counted up to
    where its bounds stop telling counts apart — written as right-linear rules: after an
    item, the rule of the counts reached."""
    where = a.contains[0].where
    if a.prefix or a.unique or len(a.contains) > MAX_CONTAINS:
        raise CompileError(f"contains together with prefixItems or uniqueItems, or more than "
                           f"{MAX_CONTAINS} contains on one array, is not supported",
                           location=where)
    clauses = a.contains
    caps = [c.min if c.max is None else c.max + 1 for c in clauses]  # counts past: alike
    cap_n = a.min_items if a.max_items is None else a.max_items + 1
    classes: list[tuple[tuple[bool, ...], Expr]] = []
    for hits in product((True, False), repeat=len(clauses)):
        sub = a.items.union(*(c.sub if hit else negate_sub(c.sub)
                              for c, hit in zip(clauses, hits, strict=True)))
        item = em.ref(sub)
        if item is not None:
            classes.append((hits, item))

    def step(state: tuple[int, ...], hits: tuple[bool, ...]) -> tuple[int, ...] | None:
        counts = [min(h + hit, cap) for h, hit, cap in zip(state, hits, caps, strict=False)]
        n = min(state[-1] + 1, cap_n)
        if any(c.max is not None and h > c.max for c, h in zip(clauses, counts, strict=True)) \
                or (a.max_items is not None and n > a.max_items):
            return None
        return (*counts, n)

    def accepting(state: tuple[int, ...]) -> bool:
        return all(h >= c.min for c, h in zip(clauses, state, strict=False)) \
            and state[-1] >= a.min_items

    start = (0,) * (len(clauses) + 1)
    moves: dict[tuple[int, ...], list[tuple[Expr, tuple[int, ...]]]] = {}
    todo = [start]
    while todo:
        state = todo.pop()
        if state in moves:
            continue
        if len(moves) >= MAX_CONTAINS_STATES:
            raise LimitExceeded(f"contains and the array's length need more than "
                                f"{MAX_CONTAINS_STATES} counting states", location=where)
        moves[state] = [(item, nxt) for hits, item in classes
                        if (nxt := step(state, hits)) is not None]
        todo += [nxt for _, nxt in moves[state]]
    live = {q for q in moves if accepting(q)}  # states from which an end is reached
    grew = True
    while grew:
        grew = False
        for q, out in moves.items():
            if q not in live and any(nxt in live for _, nxt in out):
                live.add(q)
                grew = True
    if start not in live:
        return em.empty("no array has the items 'contains' needs", where)
    rules = {q: em.reserve("contains", where) for q in live}
    for q, rule in rules.items():  # what follows an item that reached q
        steps = [concat(em.layout.comma, item, rules[nxt]) for item, nxt in moves[q]
                 if nxt in live]
        body = alternate(steps) if steps else EMPTY
        em.define(rule, Repeat(body, 0, 1) if accepting(q) and steps else body)
    first = [concat(item, rules[nxt]) for item, nxt in moves[start] if nxt in live]
    return em.layout.container("[", alternate(first) if first else None, "]",
                               empty_ok=accepting(start))


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


"""What a :class:`~tether.grammar.ir.Grammar` needs before an engine runs it: its
invariants checked (:func:`check_grammar`), whether it is recursive
(:func:`recursive_rules`), and, for one that is not, its rules inlined into one regular
expression (:func:`inline`). Which engine runs it is chosen in one place,
:func:`tether.compiler.to_automaton`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar, cast

from tether.automata.regex_ast import Alternate, CharSet, Concat, Node, Repeat
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import AnyOrder, Expr, Grammar, Ref, deep_recursion, nodes_in, refs_in

MAX_INLINED_SIZE = 200_000  # syntax-tree nodes a grammar may grow to when inlined

T = TypeVar("T", bound=Hashable)


def check_grammar(grammar: Grammar) -> Grammar:
    """Verify the IR invariants, drop rules the start rule cannot reach (with a warning
    naming them) and make every part of an :class:`AnyOrder` group that is not a
    reference a rule of its own (what the pushdown engine expects). Raises
    :class:`CompileError` for a missing start rule, an undefined reference, an
    unproductive rule (one that derives no string) or a rule to match longest that is
    not defined."""
    if grammar.start not in grammar.rules:
        raise CompileError(f"the start rule {grammar.start!r} is not defined",
                           source=grammar.source)
    for name in sorted(grammar.longest - grammar.rules.keys()):
        raise CompileError(f"the rule {name!r} to match longest is not defined",
                           source=grammar.source)
    found = {name: nodes_in(body, (Ref, AnyOrder)) for name, body in grammar.rules.items()}
    refs = {name: [n for n in nodes if isinstance(n, Ref)] for name, nodes in found.items()}
    to_lift = [name for name, nodes in found.items() if any(
        isinstance(n, AnyOrder) and not all(isinstance(p, Ref) for p in n.parts())
        for n in nodes)]  # (a schema's groups have references only)
    for name, used in refs.items():
        for ref in used:
            if ref.name not in grammar.rules:
                raise CompileError(f"rule {name!r} refers to undefined rule {ref.name!r}",
                                   location=ref.pos or grammar.where.get(name),
                                   source=grammar.source)
    reachable = _reachable(grammar.start, refs)
    unreachable = [n for n in grammar.rules if n not in reachable]
    if unreachable:
        warnings.warn(f"rules not reachable from {grammar.start!r}: "
                      + ", ".join(sorted(unreachable)), stacklevel=3)
    rules = {n: b for n, b in grammar.rules.items() if n in reachable}
    productive = _productive(rules, refs)
    for name in rules:
        if name not in productive:
            raise CompileError(f"rule {name!r} derives no string (every alternative needs "
                               "itself or another unproductive rule)",
                               location=grammar.where.get(name), source=grammar.source)
    checked = replace(grammar, rules=rules, where=dict(grammar.where))
    return _lift_groups(checked, [n for n in to_lift if n in rules])


def _lift_groups(grammar: Grammar, owners: list[str]) -> Grammar:
    """The grammar with every part of an :class:`AnyOrder` group of rules ``owners``
    that is not a reference made a rule of its own (named after the rule it is in)."""
    if not owners:
        return grammar
    rules = dict(grammar.rules)
    where = dict(grammar.where)
    changed = False

    def lift(owner: str, expr: Expr) -> Expr:
        nonlocal changed
        if isinstance(expr, AnyOrder):
            def as_ref(part: Expr) -> Ref:
                nonlocal changed
                if isinstance(part, Ref):
                    return part
                changed = True
                k = 0
                while f"{owner}.{k}" in rules:
                    k += 1
                name = f"{owner}.{k}"
                rules[name] = part  # placeholder while it is lifted in turn
                rules[name] = lift(name, part)
                if owner in where:
                    where[name] = where[owner]
                return Ref(name, expr.pos)
            return AnyOrder(tuple(as_ref(m) for m in expr.members), expr.required,
                            None if expr.extra is None else as_ref(expr.extra),
                            as_ref(expr.comma), expr.min_count, expr.max_count, expr.pos)
        if isinstance(expr, Concat | Alternate):
            items = tuple(lift(owner, i) for i in expr.items)
            if all(a is b for a, b in zip(items, expr.items, strict=True)):
                return expr
            return type(expr)(items, expr.pos)
        if isinstance(expr, Repeat):
            item = lift(owner, expr.item)
            return expr if item is expr.item else Repeat(item, expr.min, expr.max, expr.pos)
        return expr

    with deep_recursion(grammar.source):
        for name in owners:
            rules[name] = lift(name, rules[name])
    if not changed:
        return grammar
    return replace(grammar, rules=rules, where=where)


def merge_equal_rules(grammar: Grammar) -> Grammar:
    """The grammar with rules that derive the same strings by construction made one: a
    rule whose body is a reference to another (an alias) is replaced by that rule, and
    rules whose bodies are the same expression (positions aside, references to rules
    made one compared as one) are made one, until no more are — each step keeps the
    language, by induction on derivations. References are renamed to the rule kept (the
    first defined; the start rule is always kept), and the others dropped.

    A schema's grammar has a rule per subschema, and a third of them repeat another
    (the same property type in several objects, a property's rule that only refers to a
    shared string rule): an engine that runs rules one by one builds and walks each
    once, not once per copy. Rules matched longest are left as they are (their ends
    carry guards)."""
    rules, longest = grammar.rules, grammar.longest
    canon: dict[str, str] = {}
    for name, body in rules.items():
        if (type(body) is Ref and name != grammar.start and name not in longest
                and body.name not in longest and body.name != name):
            canon[name] = body.name

    def find(name: str) -> str:
        seen = 0
        while name in canon and seen <= len(canon):  # (an alias cycle derives nothing)
            name = canon[name]
            seen += 1
        return name

    order = [grammar.start, *(n for n in rules if n != grammar.start)]
    with deep_recursion(grammar.source):
        plain = _merge_equal(rules, order, longest, canon, find)
        if not canon:
            return grammar
        merged_rules = {name: _renamed(body, find, plain) for name, body in rules.items()
                        if name not in canon}
    return replace(grammar, rules=merged_rules)


def _merge_equal(rules: dict[str, Expr], order: list[str], longest: frozenset[str],
                 canon: dict[str, str], find: Callable[[str], str]) -> dict[int, int]:
    """Note in ``canon`` each rule of ``order`` whose body has the shape of an earlier
    one's, round after round until no shape read in a round refers to a rule merged in
    it (a rule merged before its shape was read: the shape is the merged one's); return
    the subtrees without references (by node)."""
    shapes = _Shapes(find)
    names = [n for n in order if n not in canon and n not in longest]
    while True:
        kept_by_shape: dict[int, str] = {}
        merged = False
        shapes.refs_seen.clear()
        for name in names:
            kept = kept_by_shape.setdefault(shapes.of(rules[name])[0], name)
            if kept != name:
                canon[name] = kept
                merged = True
        # Another round only if a shape of this one read a reference to a rule merged
        # after it was read (most rounds merge rules no shape read before).
        if not merged or all(find(ref) == read for ref, read in shapes.refs_seen):
            return shapes.plain
        names = [n for n in names if n not in canon]


class _Shapes:
    """What :func:`merge_equal_rules` compares: an expression's shape, a number equal
    for two expressions exactly when they are the same tree (positions left out,
    references by the rule they are merged into). Shapes are hash-consed (a node's is a
    tuple of its children's numbers); subtrees without references keep theirs, by node,
    from round to round."""

    def __init__(self, find: Callable[[str], str]) -> None:
        self.find = find
        self.numbers: dict[tuple, int] = {}
        self.plain: dict[int, int] = {}  # by node: the shape of a subtree with no reference
        self.refs_seen: list[tuple[str, str]] = []  # (reference, the rule it was read as)

    def of(self, expr: Expr) -> tuple[int, bool]:
        """The shape of ``expr`` and whether it has a reference."""
        hit = self.plain.get(id(expr))
        if hit is not None:
            return hit, False
        refs = False
        key: tuple
        if isinstance(expr, Ref):
            read = self.find(expr.name)
            self.refs_seen.append((expr.name, read))
            key, refs = ("ref", read), True
        elif isinstance(expr, CharSet):
            key = ("set", expr.ranges)
        elif isinstance(expr, Concat | Alternate | AnyOrder):
            numbers = []
            for part in (expr.parts() if isinstance(expr, AnyOrder) else expr.items):
                if type(part) is CharSet:  # (most parts: a literal's bytes)
                    numbers.append(self.numbers.setdefault(("set", part.ranges),
                                                           len(self.numbers)))
                    continue
                number, part_refs = self.of(cast(Expr, part))
                numbers.append(number)
                refs |= part_refs
            key = (type(expr).__name__, *numbers)
            if isinstance(expr, AnyOrder):
                key += (expr.extra is None, expr.required, expr.min_count, expr.max_count)
        elif isinstance(expr, Repeat):
            item, refs = self.of(cast(Expr, expr.item))
            key = ("rep", expr.min, expr.max, item)
        else:  # a pre-built automaton: copies of one (another position) share its arrays
            key = ("automaton", id(expr.edges), expr.n_states, expr.start, expr.accepting,
                   id(expr.exceptions))
        number = self.numbers.setdefault(key, len(self.numbers))
        if not refs:
            self.plain[id(expr)] = number
        return number, refs


def _renamed(expr: Expr, find: Callable[[str], str], plain: dict[int, int]) -> Expr:
    """``expr`` with every reference to the rule it is merged into (the same object if
    none changes; ``plain``: the subtrees without references, by node)."""
    if id(expr) in plain:
        return expr
    if isinstance(expr, Ref):
        target = find(expr.name)
        return expr if target == expr.name else Ref(target, expr.pos)
    if isinstance(expr, Concat | Alternate):
        items = tuple(_renamed(cast(Expr, i), find, plain) for i in expr.items)
        if all(a is b for a, b in zip(items, expr.items, strict=True)):
            return expr
        return replace(expr, items=cast(tuple[Node, ...], items))
    if isinstance(expr, Repeat):
        item = _renamed(cast(Expr, expr.item), find, plain)
        return expr if item is expr.item else replace(expr, item=cast(Node, item))
    if isinstance(expr, AnyOrder):
        parts = [_renamed(p, find, plain) for p in expr.parts()]
        if all(a is b for a, b in zip(parts, expr.parts(), strict=True)):
            return expr
        n = len(expr.members)
        return replace(expr, members=tuple(parts[:n]),
                       extra=None if expr.extra is None else parts[n], comma=parts[-1])
    return expr


def recursive_rules(grammar: Grammar) -> set[str]:
    """The rules that can reach themselves through references."""
    return on_cycles({n: [r.name for r in refs_in(b) if r.name in grammar.rules]
                      for n, b in grammar.rules.items()})


def on_cycles(graph: Mapping[T, Sequence[T]]) -> set[T]:
    """The nodes of ``graph`` (each node's successors, all of them nodes) that lie on a
    cycle: those of strongly connected components with one."""
    return {node for component in strong_components(graph)
            if len(component) > 1 or component[0] in graph[component[0]]
            for node in component}


def strong_components(graph: Mapping[T, Sequence[T]]) -> list[list[T]]:
    """The strongly connected components of ``graph`` (each node's successors, all of
    them nodes), each after every component its nodes lead to — successors first
    (Tarjan's algorithm, iteratively: linear in the graph, however long its paths)."""
    index: dict[T, int] = {}
    low: dict[T, int] = {}
    on_stack: set[T] = set()
    stack: list[T] = []
    out: list[list[T]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = graph[node]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out


def inline(grammar: Grammar) -> Node:
    """The start rule with every reference replaced by its rule's body (the grammar must
    not be recursive); :class:`LimitExceeded` if the tree grows past a bound."""
    done: dict[str, Node] = {}
    size = [0]

    def expand(expr: Expr) -> Node:
        size[0] += 1
        if size[0] > MAX_INLINED_SIZE:
            raise LimitExceeded("the grammar is too large to inline")
        if isinstance(expr, Ref):
            if expr.name not in done:
                done[expr.name] = expand(grammar.rules[expr.name])
            return done[expr.name]
        if isinstance(expr, Concat):
            return Concat(tuple(expand(i) for i in expr.items), expr.pos)
        if isinstance(expr, Alternate):
            return Alternate(tuple(expand(i) for i in expr.items), expr.pos)
        if isinstance(expr, Repeat):
            return Repeat(expand(expr.item), expr.min, expr.max, expr.pos)
        if isinstance(expr, CharSet):
            return expr
        if isinstance(expr, AnyOrder):  # every order spelled out: the pushdown engine
            raise LimitExceeded("an any-order group is not inlined")
        return expr  # a pre-built automaton node

    return expand(grammar.rules[grammar.start])


def _reachable(start: str, refs: dict[str, list[Ref]]) -> set[str]:
    """The rules ``start`` uses, directly or not (``refs``: the references of each rule,
    all defined)."""
    seen = {start}
    stack = [start]
    while stack:
        for ref in refs[stack.pop()]:
            if ref.name not in seen:
                seen.add(ref.name)
                stack.append(ref.name)
    return seen


def _productive(rules: dict[str, Expr], refs: dict[str, list[Ref]]) -> set[str]:
    """The rules that derive some string (``refs``: the references of each rule): a rule
    is looked at again only when a rule it refers to turns out productive (a chain of
    rules, each needing the next, takes one pass, not one per rule)."""
    users: dict[str, set[str]] = {}
    for name in rules:
        for ref in refs[name]:
            users.setdefault(ref.name, set()).add(name)
    productive: set[str] = set()
    # Popped callees first: one pass over the rules that are on no cycle.
    work = [name for component in strong_components(
        {n: [r.name for r in refs[n] if r.name in rules] for n in rules})
        for name in component][::-1]
    waiting = set(work)
    while work:
        name = work.pop()
        waiting.discard(name)
        if _derives(rules[name], productive):
            productive.add(name)
            for user in users.get(name, ()):
                if user not in productive and user not in waiting:
                    waiting.add(user)
                    work.append(user)
    return productive


def _derives(expr: Expr, productive: set[str]) -> bool:
    """Whether ``expr`` derives some string when only ``productive`` rules may be used."""
    if isinstance(expr, Ref):
        return expr.name in productive
    if isinstance(expr, CharSet):
        return bool(expr.ranges)
    if isinstance(expr, Concat):
        return all(_derives(i, productive) for i in expr.items)
    if isinstance(expr, Alternate):
        return any(_derives(i, productive) for i in expr.items)
    if isinstance(expr, Repeat):
        return expr.min == 0 or _derives(expr.item, productive)
    if isinstance(expr, AnyOrder):
        return any_order_derives(expr, [_derives(m, productive) for m in expr.members],
                                 expr.extra is not None and _derives(expr.extra, productive))
    return True


def any_order_derives(group: AnyOrder, members: list[bool], extra: bool) -> bool:
    """Whether ``group`` derives some string when only the members flagged in
    ``members`` (and the extra member if ``extra``) derive one."""
    if any(r and not m for r, m in zip(group.required, members, strict=True)):
        return False
    n_required = sum(group.required)
    most = None if extra else sum(members)
    hi = group.max_count
    if hi is not None and (n_required > hi or group.min_count > hi):
        return False
    return most is None or most >= group.min_count

"""The pushdown engine: a recursive grammar run as a lazily built automaton over bytes.

Every rule body becomes a fragment of one byte NFA in which a reference to rule ``k``
is a *call edge*. Sets of NFA states of one rule (its *item sets*, determinised on
demand) are the frames of a stack; a parser configuration is a set of stacks (more than
one when the grammar is ambiguous), each stack a hash-consed linked list of frames, so
configurations with the same stacks are the same object whatever the input that led
there. Reading a byte advances the top frame of every stack; a frame that may call a
rule pushes the callee's start (with the caller's frame already advanced past the call
below it), and a frame whose rule may end pops. A call in tail position does not grow
the stack, so right recursion and repetition run in constant depth.

:class:`PushdownAutomaton` interns configurations as the states of a
:class:`~tether.automata.dfa.LazyAutomaton`: the token masks, caches, forced bytes and
matchers built for regular constraints serve grammars unchanged, and masks are cached
per configuration, i.e. per (parser stack, position in the current rule).

Invariants: every rule derives some string and every NFA state that can be in a frame
reaches its rule's end (:func:`tether.grammar.lower.check_grammar` and trimming), so a
non-empty configuration is always a prefix of some string of the language — "not DEAD"
means viable, as for the DFA. Left recursion would push forever; direct left recursion
(``A: A x | y``) is rewritten to iteration (``A: y x*``), and any other left-recursive
cycle is refused at compile time. Stack depth, stack nodes and configurations are
bounded (:class:`~tether.errors.LimitExceeded`).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable

import numpy as np

from tether.automata.dfa import DEAD, LazyAutomaton, epsilon_closure
from tether.automata.dfa import byte_classes as partition_bytes
from tether.automata.nfa import _Builder, trim_moves
from tether.automata.regex_ast import Alternate, Concat, Repeat
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import Expr, Grammar, Ref

MAX_CONFIGURATIONS = 500_000
MAX_STACK_NODES = 2_000_000
MAX_STACK_DEPTH = 2_000
MAX_EXPANSION = 20_000  # stacks in one configuration
MAX_NFA_STATES = 500_000

BUILD_RECURSION_LIMIT = 20_000  # syntax-tree depth the NFA builder may recurse to

BOTTOM = -1  # the parent of a bottom frame
WALL = -2  # a parent that cannot be popped into: marks where the frame above would end


class PushdownAutomaton(LazyAutomaton):
    """A recursive grammar as a lazy automaton (see the module docstring)."""

    def __init__(self, grammar: Grammar, *, max_states: int = MAX_CONFIGURATIONS,
                 byte_classes: bool = True) -> None:
        grammar = without_direct_left_recursion(grammar)
        self.grammar = grammar
        self._build_nfa(grammar)
        self._nullable = _nullable_rules(self)
        _refuse_left_recursion(self, grammar)
        # Bytes no edge tells apart share a class (fewer trie nodes to walk, narrower
        # rows); byte_classes=False gives one class per byte, whose trie every such
        # automaton shares — no class trie to build, which is what a constraint compiled
        # once per request (a JSON Schema) wants.
        if byte_classes:
            class_of_byte, n_classes = partition_bytes(self._edges)
            self._edges = [[(int(class_of_byte[lo]), int(class_of_byte[hi]), t)
                            for lo, hi, t in edges] for edges in self._edges]
        else:
            class_of_byte, n_classes = np.arange(256, dtype=np.int32), 256
        super().__init__(class_of_byte, n_classes, frozenset(), max_states=max_states,
                         source=grammar.source)
        # Item sets (frames): interned closed sets of NFA states of one rule.
        self._item_ids: dict[frozenset[int], int] = {}
        self._items: list[frozenset[int]] = []
        self._item_rows: list[list[tuple[int, int]] | None] = []
        self._item_calls: list[tuple[tuple[int, int], ...] | None] = []
        self._item_accepts: list[bool] = []
        self._item_final: list[bool] = []
        self._closure_memo: dict[int, frozenset[int]] = {}
        self._rule_start_item = [self._item(self._closure(s)) for s in self._rule_start]
        # Stack nodes: (item set, parent node) hash-consed, with their depth.
        self._node_ids: dict[tuple[int, int], int] = {}
        self._nodes: list[tuple[int, int]] = []
        self._depth: list[int] = []
        self._expanded: dict[frozenset[int], tuple[tuple[int, ...], bool, bool]] = {}
        self._ends: dict[int, tuple[bool, bool]] = {}
        self.pops = np.zeros(self.accepting.size, dtype=bool)
        root = self._rule_index[grammar.start]
        self.start = self._intern(frozenset({self._node(self._rule_start_item[root], BOTTOM)}))

    # -- the NFA of all rules ------------------------------------------------------------
    def _build_nfa(self, grammar: Grammar) -> None:
        names = list(grammar.rules)
        self._rule_index = {n: i for i, n in enumerate(names)}
        builder = _RuleBuilder(self._rule_index, grammar.source)
        self._rule_start: list[int] = []
        self._rule_accept: list[int] = []
        self._rule_first_state: list[int] = []  # NFA states are numbered rule by rule
        # Bodies from large schemas nest deeply; the builder recurses over them.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, BUILD_RECURSION_LIMIT))
        try:
            for name in names:
                self._rule_first_state.append(len(builder.edges))
                s, e = builder.build(grammar.rules[name])
                self._rule_start.append(s)
                self._rule_accept.append(e)
        except RecursionError:
            raise LimitExceeded("a rule of the grammar nests too deeply to build",
                                source=grammar.source) from None
        finally:
            sys.setrecursionlimit(limit)
        self._edges = builder.edges
        self._eps = builder.eps
        self._calls = builder.calls
        self._accept_states = set(self._rule_accept)
        # Drop moves into NFA states that cannot reach their rule's end.
        trim_moves(self._edges, self._eps, self._rule_accept, self._calls)

    # -- item sets -----------------------------------------------------------------------
    def _closure(self, nfa_state: int) -> frozenset[int]:
        memo = self._closure_memo.get(nfa_state)
        if memo is None:
            memo = self._closure_memo[nfa_state] = epsilon_closure(
                self._eps, nfa_state,
                lambda s: bool(self._edges[s]) or s in self._calls or s in self._accept_states)
        return memo

    def _item(self, states: frozenset[int]) -> int:
        iid = self._item_ids.get(states)
        if iid is not None:
            return iid
        iid = len(self._items)
        self._item_ids[states] = iid
        self._items.append(states)
        self._item_rows.append(None)
        self._item_calls.append(None)
        accepts = not states.isdisjoint(self._accept_states)
        self._item_accepts.append(accepts)
        self._item_final.append(accepts and not any(self._edges[s] or s in self._calls
                                                    for s in states))
        return iid

    def _calls_of(self, iid: int) -> tuple[tuple[int, int], ...]:
        """The calls an item set may make: (rule, item set to continue with after it)."""
        calls = self._item_calls[iid]
        if calls is not None:
            return calls
        targets: dict[int, set[int]] = {}
        for s in self._items[iid]:
            for rule, target in self._calls.get(s, ()):
                targets.setdefault(rule, set()).update(self._closure(target))
        calls = tuple((rule, self._item(frozenset(t))) for rule, t in sorted(targets.items()))
        self._item_calls[iid] = calls
        return calls

    def _item_moves(self, iid: int) -> list[tuple[int, int, int]]:
        """The byte moves of an item set: disjoint ranges (lo, hi, item set reached)."""
        moves = self._item_rows[iid]
        if moves is not None:
            return moves
        edges = [(lo, hi, self._closure(t)) for s in self._items[iid]
                 for lo, hi, t in self._edges[s]]
        moves = []
        cuts = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
        for lo, end in zip(cuts, cuts[1:], strict=False):
            reached: set[int] = set()
            for e_lo, e_hi, closure in edges:
                if e_lo <= lo and end - 1 <= e_hi:
                    reached |= closure
            if not reached:
                continue
            target = self._item(frozenset(reached))
            if moves and moves[-1][1] == lo - 1 and moves[-1][2] == target:
                moves[-1] = (moves[-1][0], end - 1, target)
            else:
                moves.append((lo, end - 1, target))
        self._item_rows[iid] = moves
        return moves

    # -- stacks and configurations -------------------------------------------------------
    def _node(self, item: int, parent: int) -> int:
        key = (item, parent)
        nid = self._node_ids.get(key)
        if nid is not None:
            return nid
        depth = 1 if parent < 0 else self._depth[parent] + 1
        if depth > MAX_STACK_DEPTH:
            raise LimitExceeded(f"the grammar nests deeper than {MAX_STACK_DEPTH} rules",
                                source=self.source)
        nid = len(self._nodes)
        if nid >= MAX_STACK_NODES:
            raise LimitExceeded(f"the parser needs more than {MAX_STACK_NODES} stack nodes",
                                source=self.source)
        self._node_ids[key] = nid
        self._nodes.append(key)
        self._depth.append(depth)
        return nid

    def _expand(self, kernel: frozenset[int]) -> tuple[tuple[int, ...], bool, bool]:
        """The stacks a configuration stands for once every possible call is pushed and
        every possible return popped; whether it accepts (the start rule may end with
        nothing below it) and whether it pops (a frame may end onto a ``WALL``)."""
        seen = set(kernel)
        work = list(kernel)
        accepts = pops = False
        while work:
            node = work.pop()
            item, parent = self._nodes[node]
            pushed = []
            for rule, cont in self._calls_of(item):
                below = parent if self._item_final[cont] else self._node(cont, parent)
                pushed.append(self._node(self._rule_start_item[rule], below))
            if self._item_accepts[item]:
                if parent == BOTTOM:
                    accepts = True
                elif parent == WALL:
                    pops = True
                else:
                    pushed.append(parent)
            for n in pushed:
                if n not in seen:
                    seen.add(n)
                    work.append(n)
                    if len(seen) > MAX_EXPANSION:
                        raise LimitExceeded(
                            f"the grammar is too ambiguous here: more than {MAX_EXPANSION} "
                            "parse stacks at once", source=self.source)
        return tuple(sorted(seen)), accepts, pops

    def _expansion(self, kernel: frozenset[int]) -> tuple[tuple[int, ...], bool, bool]:
        hit = self._expanded.get(kernel)
        if hit is None:
            hit = self._expanded[kernel] = self._expand(kernel)
        return hit

    def _node_ends(self, node: int) -> tuple[bool, bool]:
        """Whether the stack ``node`` can end without reading a byte — onto the bottom
        (the text may stop here) or onto a ``WALL`` (the walled frame may end here).

        Cheaper than :meth:`_expand`: only calls of rules that derive the empty string
        are followed, and nothing is pushed."""
        hit = self._ends.get(node)
        if hit is not None:
            return hit
        accepts = pops = False
        seen = {node}
        work = [node]
        while work:
            item, parent = self._nodes[work.pop()]
            # A nullable call whose continuation is final ends the frame, like its end.
            ends = self._item_accepts[item] or any(
                self._nullable[rule] and self._item_final[cont]
                for rule, cont in self._calls_of(item))
            nxt = [self._node(cont, parent) for rule, cont in self._calls_of(item)
                   if self._nullable[rule] and not self._item_final[cont]]
            if ends:
                if parent == BOTTOM:
                    accepts = True
                elif parent == WALL:
                    pops = True
                else:
                    nxt.append(parent)
            for n in nxt:
                if n not in seen:
                    seen.add(n)
                    work.append(n)
        hit = self._ends[node] = (accepts, pops)
        return hit

    def _accepts(self, key: Hashable) -> bool:
        return any(self._node_ends(n)[0] for n in key)  # type: ignore[attr-defined]

    def _on_new_state(self, sid: int, key: Hashable) -> None:
        if self.pops.size < self.accepting.size:
            self.pops = np.concatenate(
                [self.pops, np.zeros(self.accepting.size - self.pops.size, dtype=bool)])
        accepts = pops = False
        for node in key:  # type: ignore[attr-defined]
            node_accepts, node_pops = self._node_ends(node)
            accepts |= node_accepts
            pops |= node_pops
        self.accepting[sid] = accepts
        self.pops[sid] = pops

    # -- the pieces a configuration's mask is composed of --------------------------------
    def kernel(self, state: int) -> tuple[tuple[int, int], ...]:
        """The stacks of ``state`` before expansion, as (top item set, parent node)."""
        return tuple(self._nodes[n] for n in self._keys[state])  # type: ignore[attr-defined]

    @property
    def n_stack_nodes(self) -> int:
        """Stack nodes built so far (bounded by MAX_STACK_NODES)."""
        return len(self._nodes)

    def rules_at(self, state: int) -> list[str]:
        """The rules on top of the stacks of ``state`` (where the input is, for errors)."""
        names = list(self.grammar.rules)
        out = []
        for item, _ in self.kernel(state):
            nfa_state = min(self._items[item]) if self._items[item] else 0
            rule = int(np.searchsorted(self._rule_first_state, nfa_state, side="right")) - 1
            if names[rule] not in out:
                out.append(names[rule])
        return out

    def stack_state(self, node: int) -> int:
        """The state whose only stack is ``node``."""
        return self._intern(frozenset({node}))

    def walled_state(self, item: int) -> int:
        """The state of a frame ``item`` standing on a ``WALL``: the walks from it are
        what the frame reads by itself, and its ``pops`` flags say where it may end."""
        return self._intern(frozenset({self._node(item, WALL)}))

    def _fill_row(self, out: np.ndarray, ranges: list[tuple[int, int, int]]) -> None:
        """Sweep the byte axis: each elementary segment's state is the set of targets of
        the ranges covering it."""
        events = sorted([(lo, 1, n) for lo, _, n in ranges]
                        + [(hi + 1, -1, n) for _, hi, n in ranges])
        active: dict[int, int] = {}
        interned: dict[frozenset[int], int] = {}
        at = 0
        for where, delta, node in events:
            if where != at and active:
                key = frozenset(active)
                sid = interned.get(key)
                if sid is None:
                    sid = interned[key] = self._intern(key)
                out[at:where] = sid
            at = where
            count = active.get(node, 0) + delta
            if count:
                active[node] = count
            else:
                del active[node]

    def _compute_row(self, state: int) -> None:
        stacks = self._expansion(self._keys[state])[0]  # type: ignore[arg-type]
        node_ids = self._node_ids
        ranges: list[tuple[int, int, int]] = []
        for node in stacks:
            item, parent = self._nodes[node]
            for lo, hi, moved in self._item_moves(item):
                nxt = node_ids.get((moved, parent))
                if nxt is None:
                    nxt = self._node(moved, parent)
                ranges.append((lo, hi, nxt))
        out = np.full(self.n_classes, DEAD, dtype=np.int32)
        if len(ranges) == 1:
            lo, hi, nxt = ranges[0]
            out[lo:hi + 1] = self._intern(frozenset((nxt,)))
        elif ranges:
            # Sweep the byte axis: each elementary segment's kernel is the set of targets
            # of the ranges covering it.
            self._fill_row(out, ranges)
        self.table[state] = out


class _RuleBuilder(_Builder):
    """The NFA builder with one more node kind: a :class:`Ref` becomes a call edge."""

    def __init__(self, rule_index: dict[str, int], source: str | None) -> None:
        super().__init__(MAX_NFA_STATES, source)
        self.rule_index = rule_index
        self.calls: dict[int, list[tuple[int, int]]] = {}

    def build(self, node):  # type: ignore[override]
        if isinstance(node, Ref):
            start, end = self.new(), self.new()
            self.calls.setdefault(start, []).append((self.rule_index[node.name], end))
            return start, end
        return super().build(node)


def without_direct_left_recursion(grammar: Grammar) -> Grammar:
    """Rewrite every rule ``A: A x1 | A x2 | y1 | y2`` (top-level alternatives) as
    ``A: (y1 | y2) (x1 | x2)*`` — the same language without left recursion."""
    rules: dict[str, Expr] = {}
    for name, body in grammar.rules.items():
        alternatives = body.items if isinstance(body, Alternate) else (body,)
        bases: list[Expr] = []
        tails: list[Expr] = []
        for alt in alternatives:
            head, rest = _split_head(alt)
            if isinstance(head, Ref) and head.name == name:
                if rest:  # `A: A` alone adds nothing
                    tails.append(rest[0] if len(rest) == 1 else Concat(tuple(rest)))
            else:
                bases.append(alt)
        if not tails:
            rules[name] = body
            continue
        if not bases:
            raise CompileError(f"rule {name!r} derives no string (every alternative "
                               "starts with the rule itself)", location=grammar.where.get(name),
                               source=grammar.source)
        base = bases[0] if len(bases) == 1 else Alternate(tuple(bases))
        tail = tails[0] if len(tails) == 1 else Alternate(tuple(tails))
        rules[name] = Concat((base, Repeat(tail, 0, None)))
    return Grammar(rules, grammar.start, dict(grammar.where), grammar.source)


def _split_head(alt: Expr) -> tuple[Expr | None, list[Expr]]:
    """The first item of an alternative and the rest (flattening nested sequences)."""
    items: list[Expr] = []
    stack: list[Expr] = [alt]
    while stack:
        node = stack.pop()
        if isinstance(node, Concat):
            stack.extend(reversed(node.items))
        else:
            items.append(node)
    if not items:
        return None, []
    return items[0], items[1:]


def _nullable_rules(pda: PushdownAutomaton) -> list[bool]:
    """Which rules derive the empty string."""
    nullable = [False] * len(pda._rule_start)
    changed = True
    while changed:
        changed = False
        for k in range(len(nullable)):
            if not nullable[k] and _reaches_end(pda, k, nullable):
                nullable[k] = changed = True
    return nullable


def _refuse_left_recursion(pda: PushdownAutomaton, grammar: Grammar) -> None:
    """Raise :class:`CompileError` if some rule can call itself before reading a byte."""
    n_rules = len(pda._rule_start)
    nullable = pda._nullable
    left_calls: list[set[int]] = []
    for k in range(n_rules):
        seen = {pda._rule_start[k]}
        stack = [pda._rule_start[k]]
        called: set[int] = set()
        while stack:
            s = stack.pop()
            nxt = list(pda._eps[s])
            for rule, target in pda._calls.get(s, ()):
                called.add(rule)
                if nullable[rule]:
                    nxt.append(target)
            for t in nxt:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        left_calls.append(called)
    names = list(grammar.rules)
    for k in range(n_rules):
        path = _cycle_through(k, left_calls)
        if path:
            cycle = " -> ".join(names[i] for i in path)
            raise CompileError(
                f"left recursion through {cycle} is not supported (only a rule's own "
                "alternatives starting with the rule are rewritten, e.g. `a: a x | y`)",
                location=grammar.where.get(names[k]), source=grammar.source)


def _reaches_end(pda: PushdownAutomaton, rule: int, nullable: list[bool]) -> bool:
    seen = {pda._rule_start[rule]}
    stack = [pda._rule_start[rule]]
    while stack:
        s = stack.pop()
        if s == pda._rule_accept[rule]:
            return True
        nxt = list(pda._eps[s])
        nxt += [t for r, t in pda._calls.get(s, ()) if nullable[r]]
        for t in nxt:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return False


def _cycle_through(k: int, graph: list[set[int]]) -> list[int]:
    """A path ``k -> ... -> k`` in ``graph`` (as a list of nodes), or []."""
    parent: dict[int, int] = {}
    frontier = [k]
    while frontier:
        u = frontier.pop()
        for v in graph[u]:
            if v == k:
                path = [u]
                while path[-1] != k:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [k]
            if v not in parent:
                parent[v] = u
                frontier.append(v)
    return []

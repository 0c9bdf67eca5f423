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

:class:`PushdownAutomaton` interns configurations (keyed by their stack nodes as a sorted
tuple) as the states of a :class:`~tether.automata.dfa.LazyAutomaton`: the token masks,
caches, forced bytes and matchers built for regular constraints serve grammars unchanged,
and masks are cached per configuration, i.e. per (parser stack, position in the current
rule). A configuration's row is composed from per-stack-node pieces cached per node: the
stacks it expands to (:meth:`PushdownAutomaton._expansion`) and each stack's own moves.

Invariants: every rule derives some string and every NFA state that can be in a frame
reaches its rule's end (:func:`tether.grammar.lower.check_grammar` and trimming), so a
non-empty configuration is always a prefix of some string of the language — "not DEAD"
means viable, as for the DFA. Left recursion would push forever; direct left recursion
(``A: A x | y``) is rewritten to iteration (``A: y x*``), and any other left-recursive
cycle is refused at compile time. Stack depth, stack nodes and configurations are
bounded (:class:`~tether.errors.LimitExceeded`).

The rules of ``grammar.longest`` are matched longest, as a lexer matches its tokens: none
ends right before a byte that it, or another of them reading the same text, could go on
with (a keyword that a name also matches: ``in`` does not end before ``s``, ``insert`` is
one name). Its end pops to the parent *guarded* — the parent's item set with those bytes
removed from its moves, until a byte is read (see :meth:`PushdownAutomaton.guarded`).

An :class:`~tether.grammar.ir.AnyOrder` group (members in any order, each at most once)
becomes a family of rules built on demand, one per reached *state*: the set of members
written so far and the number of members written in all (counted up to the group's
bounds, so only what ``min_count``/``max_count`` need tells states apart). From a state
the rule reads a comma (unless nothing is written yet), then any member not written yet or
the extra member, then calls the rule of the state that leaves — a tail call, so the
stack does not grow; it may end when every required member is written and ``min_count``
is reached. A successor is offered only if it can still be completed (the required
members left fit under ``max_count``, ``min_count`` can be reached), so every rule of the
family derives some string and the invariants above hold for it. A state's rule is
numbered (with its nullability, known in closed form) when a call of it is first looked
at (:meth:`PushdownAutomaton._calls_of`) and built when first pushed
(:meth:`PushdownAutomaton._expansion`), after the rules of the grammar, so only reached
states are ever built: an object of 40 optional properties builds as many rules as the
orders written so far reach, not 2^40. Members are rules of their own
(:func:`~tether.grammar.lower.check_grammar` gives a part of a group that is not a
reference a rule, named after its owner), none derives the empty string, and a group's
left calls are its members: left recursion through a group is refused like any other.
The number of family rules is bounded (:class:`~tether.errors.LimitExceeded`).
"""

from __future__ import annotations

import hashlib
import heapq
from bisect import bisect_right
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from typing import NamedTuple

import numpy as np

from tether.automata.dfa import DEAD, UNKNOWN, LazyAutomaton, segments
from tether.automata.dfa import byte_classes as partition_bytes
from tether.automata.nfa import CopiedMoves, LazyCopies, MoveLists, NfaBuilder, trim_moves
from tether.automata.regex_ast import Alternate, Automaton, Concat, Repeat
from tether.automata.shortest import INF, Spelling, Witnesses, distances_to_end
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import AnyOrder, Expr, Grammar, Ref, deep_recursion
from tether.grammar.lower import on_cycles

MAX_CONFIGURATIONS = 500_000
MAX_STACK_NODES = 2_000_000
MAX_STACK_DEPTH = 2_000
MAX_EXPANSION = 20_000  # stacks in one configuration
MAX_NFA_STATES = 500_000
MAX_LONGEST_ITEMS = 10_000  # item sets of a rule matched longest, enumerated at compile time
NO_GUARD = -1  # see PushdownAutomaton.rule_guard
MAX_GROUP_RULES = 500_000  # rules numbered for states of AnyOrder groups
PENDING = -1  # the rule of a call to a group state not numbered yet (see _group_next)
MAX_KEYED_RULE_STATES = 50_000  # a leaf rule larger than this gets no content key
MAX_CHAIN = 256  # forced bytes followed at most (a token is shorter)
MAX_FIRST_DEPTH = 32  # calls followed for first_classes; deeper: any class

FEW_RUNS = 16  # a row of at most this many runs is written by numpy slices, not a list
# What the grammar's built structure (NFA, rules, syntax trees) holds per NFA edge, for
# held_bytes (measured with tracemalloc on Glaive schemas: 135–215 bytes per edge).
STRUCTURE_BYTES_PER_EDGE = 160

BOTTOM = -1  # the parent of a bottom frame
WALL = -2  # a parent that cannot be popped into: marks where the frame above would end


class PushdownAutomaton(LazyAutomaton):
    """A recursive grammar as a lazy automaton (see the module docstring)."""

    def __init__(self, grammar: Grammar, *, max_states: int = MAX_CONFIGURATIONS,
                 byte_classes: bool = True) -> None:
        grammar = without_direct_left_recursion(grammar)
        self.grammar = grammar
        callers = self._build_nfa(grammar)
        self._nullable = _nullable_rules(self, callers)
        self._check_groups()
        _refuse_left_recursion(self, grammar)
        # Bytes no edge tells apart share a class (fewer trie nodes to walk, narrower
        # rows); byte_classes=False gives one class per byte, whose trie every such
        # automaton shares — no class trie to build, which is what a constraint compiled
        # once per request (a JSON Schema) wants.
        if byte_classes:
            class_of_byte, n_classes = partition_bytes(self._all_moves())
            self._edges = tuple(tuple([(int(class_of_byte[lo]), int(class_of_byte[hi]), t)
                                       for lo, hi, t in edges]) for edges in self._edges)
            by_class = class_of_byte.astype(np.int64)
            self._copied_moves = {block: moves._replace(lo=by_class[moves.lo],
                                                        hi=by_class[moves.hi])
                                  for block, moves in self._copied_moves.items()}
        else:
            class_of_byte, n_classes = np.arange(256, dtype=np.int32), 256
        super().__init__(class_of_byte, n_classes, (), max_states=max_states,
                         source=grammar.source)
        # The byte classes, as part of the keys of what is shared across grammars.
        self.class_key = self.class_of_byte.tobytes()
        # Item sets (frames): interned closed sets of NFA states of one rule.
        # (an item set as a sorted tuple: tuples of numbers leave the garbage collector's
        # lists at its first pass; frozensets stay, and are scanned at every collection)
        self._item_ids: dict[tuple[int, ...], int] = {}
        self._items: list[tuple[int, ...]] = []
        self._item_rows: list[tuple[tuple[int, int, int], ...] | None] = []
        self._item_calls: list[tuple[tuple[int, int], ...] | None] = []
        self._item_accepts: list[bool] = []
        self._item_final: list[bool] = []
        self._closure_memo: dict[int, tuple[int, ...]] = {}
        # Guards (byte-class ranges a frame must not read first, see rule_guard) and the
        # item sets that carry one: the states of a plain item set, fewer moves.
        self._guards: list[tuple[tuple[int, int], ...]] = []
        self._guard_ids: dict[tuple[tuple[int, int], ...], int] = {}
        self._item_guard: list[int] = []
        self._item_base: list[int] = []
        self._guarded_ids: dict[tuple[int, int], int] = {}
        for k in range(self._n_static):
            self._rule_start_item[k] = self._item(self._closure(self._rule_start[k]))
        self._longest = self._longest_guards(sorted(grammar.longest))
        self.completion_exact = not self._longest  # guards are not counted in distances
        # The bytes some guard holds: a witness without any reads as if unguarded.
        self._guard_bytes = bytes(b for b in range(256) if any(
            lo <= class_of_byte[b] <= hi for guard in self._longest.values()
            if guard != NO_GUARD for lo, hi in self._guards[guard])) if self._longest else b""
        self._pop_guards: dict[int, int] = {}  # per item set: pop_guard
        # Stack nodes: (item set, parent node) hash-consed, with their depth.
        self._node_ids: dict[tuple[int, int], int] = {}
        self._nodes: list[tuple[int, int]] = []
        self._depth: list[int] = []
        self._expanded: dict[int, tuple[int, ...]] = {}  # per node: _expansion
        self._moves: dict[int, tuple[tuple[int, int, int], ...]] = {}  # per node: _node_moves
        self._ends: dict[int, tuple[bool, bool]] = {}
        self._can_end: dict[int, bool] = {}  # per item set: _item_can_end
        self._stack_states: dict[int, int] = {}  # node -> the state of that stack alone
        self._walled: dict[int, int] = {}  # item set -> walled_state
        self._calls_in_block: dict[int, bool] = {}  # per NFA block: _block_calls
        self._rule_keys: dict[int, bytes | None] = {}  # per NFA block: _leaf_rule_digest
        self._frame_keys: dict[int, Hashable | None] = {}  # per item set: leaf_frame_key
        self._chains: dict[int, tuple] = {}  # per item set: forced_chain (() if none)
        self._parts: dict[int, FrameParts | tuple] = {}  # per item set: frame_parts (() if none)
        self._alone: dict[int, int] = {}  # per item set: moves_alone
        self._firsts: dict[int, int] = {}  # per item set: first_classes
        self._rule_firsts: dict[int, int] = {}  # per rule: the first_classes of its start
        self._first_path: set[int] = set()  # rules _rule_first is inside
        self.pops = np.zeros(self.accepting.size, dtype=bool)
        # Shortest completions (see completion_bytes), computed on first use.
        self.structure_bytes = STRUCTURE_BYTES_PER_EDGE * self._copies.n_moves(self._edges)
        self._nfa_distances: np.ndarray | None = None
        self._group_costs: dict[int, int] = {}  # per group rule, once distances settled
        self._late_distances: dict[int, int] = {}  # NFA states of group rules built later
        self._node_distances: dict[int, int] = {}
        self._item_distances: dict[int, int] = {}
        self._completion: dict[int, int] = {}
        root = self._rule_index[grammar.start]
        self.start = self._intern((self._node(self._rule_start_item[root], BOTTOM),))
        # The rules are built into the NFA: their syntax trees, tracked by the garbage
        # collector for the life of the automaton (~1,000 objects a schema, most of those
        # a server's compiled constraints hold), go. Kept: the pre-built automata, which a
        # leaf frame's key digests.
        self.grammar = replace(grammar, rules={name: body for name, body in grammar.rules.items()
                                               if isinstance(body, Automaton)})
        self._group_ids.clear()  # (keyed by groups of the trees: looked up while building)

    # -- the NFA of all rules ------------------------------------------------------------
    def _build_nfa(self, grammar: Grammar) -> dict[int, set[int]]:
        names = list(grammar.rules)
        self._rule_index = {n: i for i, n in enumerate(names)}
        builder = _RuleBuilder(self, grammar.source)
        # Per rule: the rules of the grammar first, then the rules of AnyOrder states as
        # they are numbered (-1: not built yet).
        n = self._n_static = len(names)
        self._rule_names = list(names)
        self._rule_start = [-1] * n
        self._rule_accept = [-1] * n
        self._rule_start_item = [-1] * n
        self._nullable = [False] * n  # the grammar's rules: filled in by _nullable_rules
        self._groups: list[_Group] = []
        self._group_ids: dict[AnyOrder, int] = {}
        self._group_rules: dict[tuple[int, int, int], int] = {}
        self._group_states: list[tuple[int, int, int]] = []  # per rule, from _n_static on
        # The group state a PENDING call of an NFA state stands for.
        self._group_next: dict[int, tuple[int, int, int]] = {}
        # Rules whose body is an automaton with exceptions: the automaton and the state
        # of it each NFA state of the rule stands for (see frame_exception).
        self._excepting_rules: dict[int, tuple[Automaton, np.ndarray]] = {}
        # Per NFA block of a rule whose body is an automaton: its moves (see copied_state).
        self._copied_moves: dict[int, CopiedMoves] = {}
        self._item_class_rows: dict[int, tuple[int, ...]] = {}  # per item set: item_row
        self._item_steps: dict[int, int] = {}  # per (item set, class): _item_step
        # NFA states are numbered in blocks, one per rule built, in the order built.
        self._block_first: list[int] = []
        self._block_rule: list[int] = []
        with deep_recursion(grammar.source):  # (the builder recurses over the bodies)
            for k, name in enumerate(names):
                first = len(builder.edges)
                self._block_first.append(first)
                self._block_rule.append(k)
                builder.owner = name
                body = grammar.rules[name]
                s, e = builder.build(body)
                self._rule_start[k] = s
                self._rule_accept[k] = e
                if isinstance(body, Automaton):
                    self._copied_moves[k] = builder.copied_moves[first]
                    if first in builder.copied_states:
                        self._excepting_rules[k] = (body, builder.copied_states[first])
        self._edges = builder.edges
        self._copies = builder.edges.copies
        self._eps = builder.eps
        self._calls = builder.calls
        self._accept_states = set(self._rule_accept[:n])
        # Drop moves into NFA states that cannot reach their rule's end.
        trim_moves(self._edges, self._eps, self._rule_accept[:n], self._calls)
        # Moves and calls as tuples of tuples from now on: tuples of numbers leave the
        # garbage collector's lists at its first pass, lists (and what they hold) are
        # scanned at every collection of their generation (a full one: ~0.5 us an object,
        # 40-150 ms inside a mask with a few dozen grammars compiled). States of group
        # rules, numbered later, read no byte; their one epsilon move is in _late_eps.
        # A copied automaton's states get their moves when first asked for (None here,
        # kept in _made: see LazyCopies).
        self._edges = tuple([tuple(moves) if type(moves) is list else moves
                             for moves in self._edges])
        self._made: dict[int, tuple[tuple[int, int, int], ...]] = {}
        self._eps = tuple(map(tuple, self._eps))
        self._calls = {s: tuple(calls) for s, calls in self._calls.items()}
        self._static_nfa = self._n_nfa = len(self._edges)  # the grammar's own rules' states
        self._late_eps: dict[int, tuple[int, ...]] = {}  # a nullable group rule's start
        return builder.callers

    # -- AnyOrder groups: rules built per reached state (module docstring) ---------------
    def _group_root(self, group: AnyOrder, owner: str) -> int:
        """The rule of ``group`` with nothing written yet (the group numbered on first
        use; its parts are references, see :func:`~tether.grammar.lower.check_grammar`)."""
        gid = self._group_ids.get(group)
        if gid is None:
            index = self._rule_index
            hi = group.max_count
            g = _Group(members=tuple(index[m.name] for m in group.members),  # type: ignore[union-attr]
                       required=sum(1 << k for k, r in enumerate(group.required) if r),
                       extra=-1 if group.extra is None else index[group.extra.name],  # type: ignore[union-attr]
                       comma=index[group.comma.name],  # type: ignore[union-attr]
                       lo=group.min_count, hi=hi,
                       cap=max(group.min_count, 1) if hi is None else hi, owner=owner)
            if (hi is not None and group.min_count > hi) or not self._productive(g, 0, 0):
                raise CompileError(f"an any-order group of rule {owner!r} derives no string "
                                   "(its required members or min_count do not fit)",
                                   location=self.grammar.where.get(owner),
                                   source=self.grammar.source)
            gid = self._group_ids[group] = len(self._groups)
            self._groups.append(g)
        return self._group_rule(gid, 0, 0)

    @staticmethod
    def _productive(g: _Group, written: int, count: int) -> bool:
        """Whether the state (``written`` members, ``count`` in all) can be completed."""
        need = (g.required & ~written).bit_count()
        if g.hi is not None and count + need > g.hi:
            return False
        if count >= g.lo or g.extra >= 0:
            return True
        return count + len(g.members) - written.bit_count() >= g.lo

    def _group_rule(self, gid: int, written: int, count: int) -> int:
        """The rule of a state of group ``gid``, numbered (not built) on first use."""
        key = (gid, written, count)
        rule = self._group_rules.get(key)
        if rule is None:
            if len(self._group_states) >= MAX_GROUP_RULES:
                raise LimitExceeded(f"more than {MAX_GROUP_RULES} states of objects with "
                                    "properties in any order", source=self.grammar.source)
            g = self._groups[gid]
            rule = self._group_rules[key] = len(self._rule_start)
            self._group_states.append(key)
            self._rule_names.append(g.owner)
            self._rule_start.append(-1)
            self._rule_accept.append(-1)
            self._rule_start_item.append(-1)
            self._nullable.append(not g.required & ~written and count >= g.lo)
        return rule

    def _new_state(self) -> int:
        if self._n_nfa >= MAX_NFA_STATES:
            raise LimitExceeded(f"the grammar needs more than {MAX_NFA_STATES} NFA states",
                                source=self.grammar.source)
        self._n_nfa += 1
        return self._n_nfa - 1

    def _build_group_rule(self, rule: int) -> int:
        """Build the rule of a group state: ``(comma)? (member next)*`` over the members
        it may write next, each followed by a tail call to the state that leaves (a
        PENDING call, numbered when looked at); returns its start item set."""
        gid, written, count = self._group_states[rule - self._n_static]
        g = self._groups[gid]
        moves: list[tuple[int, tuple[int, int, int]]] = []  # (member rule, next state)
        if g.hi is None or count < g.hi:
            step = min(count + 1, g.cap)
            for k, member in enumerate(g.members):
                after = written | (1 << k)
                if not written & (1 << k) and self._productive(g, after, step):
                    moves.append((member, (gid, after, step)))
            if g.extra >= 0 and self._productive(g, written, step):
                moves.append((g.extra, (gid, written, step)))
        self._block_first.append(self._n_nfa)
        self._block_rule.append(rule)
        start, end = self._new_state(), self._new_state()
        self._accept_states.add(end)
        at = start
        if moves and count > 0:
            at = self._new_state()
            self._calls[start] = ((g.comma, at),)
        member_calls = []
        for member, nxt in moves:
            after_member = self._new_state()
            member_calls.append((member, after_member))
            self._calls[after_member] = ((PENDING, end),)
            self._group_next[after_member] = nxt
        if member_calls:
            self._calls[at] = tuple(member_calls)
        if self._nullable[rule]:
            self._late_eps[start] = (end,)
        self._rule_start[rule] = start
        self._rule_accept[rule] = end
        item = self._rule_start_item[rule] = self._item(self._closure(start))
        return item

    def _start_item(self, rule: int) -> int:
        """The start item set of ``rule`` (a group state's rule built when first met)."""
        start = self._rule_start_item[rule]
        return start if start >= 0 else self._build_group_rule(rule)

    def _check_groups(self) -> None:
        names = self._rule_names
        for g in self._groups:
            for member in (*g.members, g.extra):
                if member >= 0 and self._nullable[member]:
                    raise CompileError(
                        f"a member of an any-order group of rule {g.owner!r} derives the "
                        f"empty string (rule {names[member]!r})",
                        location=self.grammar.where.get(g.owner), source=self.grammar.source)

    # -- item sets -----------------------------------------------------------------------
    def _closure(self, nfa_state: int) -> tuple[int, ...]:
        memo = self._closure_memo.get(nfa_state)
        if memo is None:
            if nfa_state < self._static_nfa:  # (static states move to static states only)
                memo = self._static_closure(nfa_state)
            else:  # a group rule's: calls, its end, and its start's move to the end
                memo = tuple(sorted({s for s in (nfa_state, *self._late_eps.get(nfa_state, ()))
                                     if s in self._calls or s in self._accept_states}))
            self._closure_memo[nfa_state] = memo
        return memo

    def _static_closure(self, nfa_state: int) -> tuple[int, ...]:
        """The states of a grammar rule an item set keeps (they read a byte, call a rule
        or end it) reached from ``nfa_state`` by epsilon moves, sorted."""
        edges, eps, calls, accept = self._edges, self._eps, self._calls, self._accept_states
        if not eps[nfa_state]:  # (most: a literal's bytes, a copied automaton's states)
            moves = edges[nfa_state]
            keep = moves is None or bool(moves) or nfa_state in calls or nfa_state in accept
            return (nfa_state,) if keep else ()
        seen = {nfa_state}
        todo = [nfa_state]
        kept = []
        while todo:
            s = todo.pop()
            moves = edges[s]
            if moves is None or moves or s in calls or s in accept:
                kept.append(s)
            for t in eps[s]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        kept.sort()
        return tuple(kept)

    def _item(self, states: tuple[int, ...]) -> int:
        """The id of the item set of NFA ``states`` (sorted, distinct)."""
        iid = self._item_ids.get(states)
        if iid is not None:
            return iid
        iid = len(self._items)
        self._item_ids[states] = iid
        self._items.append(states)
        self._item_rows.append(None)
        self._item_calls.append(None)
        self._item_guard.append(NO_GUARD)
        self._item_base.append(iid)
        accepts = not self._accept_states.isdisjoint(states)
        self._item_accepts.append(accepts)
        self._item_final.append(accepts and not any(self._reads(s) or s in self._calls
                                                    for s in states))
        return iid

    def _calls_of(self, iid: int) -> tuple[tuple[int, int], ...]:
        """The calls an item set may make: (rule, item set to continue with after it)."""
        calls = self._item_calls[iid]
        if calls is not None:
            return calls
        targets: dict[int, tuple[int, ...] | set[int]] = {}
        for s in self._items[iid]:
            for rule, target in self._calls.get(s, ()):
                if rule == PENDING:  # the next state of a group: numbered now
                    rule = self._group_rule(*self._group_next.pop(s))
                    self._calls[s] = ((rule, target),)
                closure = self._closure(target)
                had = targets.setdefault(rule, closure)
                if had is not closure:  # (a rule called from two states: rare)
                    targets[rule] = set(had).union(closure)
        calls = tuple((rule, self._item(t if type(t) is tuple else tuple(sorted(t))))
                      for rule, t in sorted(targets.items()))
        self._item_calls[iid] = calls
        return calls

    def _item_moves(self, iid: int) -> tuple[tuple[int, int, int], ...]:
        """The byte moves of an item set: disjoint ranges (lo, hi, item set reached)."""
        hit = self._item_rows[iid]
        if hit is not None:
            return hit
        if self._item_guard[iid] != NO_GUARD:
            hit = self._item_rows[iid] = tuple(_without(
                self._item_moves(self._item_base[iid]), self._guards[self._item_guard[iid]]))
            return hit
        # Each elementary segment of the byte axis reaches the union of the closures of
        # the edges covering it.
        moves: list[tuple[int, int, int]] = []
        for lo, hi, ends in segments([e for s in self._items[iid] for e in self._edges_of(s)]):
            if len(ends) == 1:
                target = self._item(self._closure(ends[0]))
            else:
                reached: set[int] = set()
                for t in ends:
                    reached.update(self._closure(t))
                target = self._item(tuple(sorted(reached)))
            if moves and moves[-1][1] == lo - 1 and moves[-1][2] == target:
                moves[-1] = (moves[-1][0], hi, target)
            else:
                moves.append((lo, hi, target))
        hit = self._item_rows[iid] = tuple(moves)
        return hit

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

    def _expansion(self, node: int) -> tuple[int, ...]:
        """The stacks stack ``node`` stands for once every possible call is pushed and
        every possible return popped (itself included; cached per node, so a
        configuration's expansion is the union of its stacks')."""
        hit = self._expanded.get(node)
        if hit is not None:
            return hit
        seen = {node}
        work = [node]
        while work:
            item, parent = self._nodes[work.pop()]
            pushed = []
            guard = self._item_guard[item]  # the callee reads first: it inherits the guard
            for rule, cont in self._calls_of(item):
                below = parent if self._item_final[cont] else self._node(cont, parent)
                pushed.append(self._node(self.guarded(self._start_item(rule), guard), below))
            if parent >= 0 and self._item_accepts[item]:
                pushed.append(self.popped_to(item, parent))
            for n in pushed:
                if n not in seen:
                    seen.add(n)
                    work.append(n)
                    if len(seen) > MAX_EXPANSION:
                        raise LimitExceeded(
                            f"the grammar is too ambiguous here: more than {MAX_EXPANSION} "
                            "parse stacks at once", source=self.source)
        hit = self._expanded[node] = tuple(sorted(seen))
        return hit

    def _node_moves(self, node: int) -> tuple[tuple[int, int, int], ...]:
        """The byte moves of stack ``node``'s top frame alone: (lo, hi, stack reached)."""
        hit = self._moves.get(node)
        if hit is None:
            item, parent = self._nodes[node]
            hit = self._moves[node] = tuple((lo, hi, self._node(moved, parent))
                                            for lo, hi, moved in self._item_moves(item))
        return hit

    def _node_ends(self, node: int) -> tuple[bool, bool]:
        """Whether the stack ``node`` can end without reading a byte — onto the bottom
        (the text may stop here) or onto a ``WALL`` (the walled frame may end here).

        Cheaper than :meth:`_expansion`: a frame that can end (:meth:`_item_can_end`) hands
        the question to its parent; nothing is pushed. Cached per node."""
        chain = []
        n = node
        while True:
            hit = self._ends.get(n)
            if hit is not None:
                break
            item, parent = self._nodes[n]
            chain.append(n)
            if not self._item_can_end(item):
                hit = (False, False)
            elif parent == BOTTOM:
                hit = (True, False)
            elif parent == WALL:
                hit = (False, True)
            else:
                n = parent
                continue
            break
        for n in chain:
            self._ends[n] = hit
        return hit

    def _item_can_end(self, item: int) -> bool:
        """Whether a frame of ``item`` can end without reading a byte: its rule may end
        here, or after calls of rules that derive the empty string."""
        hit = self._can_end.get(item)
        if hit is not None:
            return hit
        seen = {item}
        work = [item]
        can_end = False
        while work and not can_end:
            it = work.pop()
            if self._item_accepts[it]:
                can_end = True
                break
            for rule, cont in self._calls_of(it):
                if not self._nullable[rule]:
                    continue
                if self._item_final[cont]:
                    can_end = True
                    break
                if cont not in seen:
                    seen.add(cont)
                    work.append(cont)
        self._can_end[item] = can_end
        return can_end

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

    # -- shortest completions (tether.automata.shortest) ---------------------------------
    def completion_bytes(self, state: int) -> int:
        """Bytes of the shortest string that completes ``state``: the least over its stacks
        of the sum of their frames' distances to their rules' ends. Guards of rules
        matched longest are not counted (a lower bound there)."""
        hit = self._completion.get(state)
        if hit is None:
            hit = self._completion[state] = min(
                (self._node_distance(n) for n in self._keys[state]),  # type: ignore[attr-defined]
                default=INF)
        return hit

    # -- completions that accept (checked, or found, without interning states) ----------
    def witness_holds(self, data: bytes) -> bool:
        """A witness of the distances accepts when it holds no byte of a guard: a guard
        takes only its own bytes out of a parent's moves, so the text reads as without
        guards (closing brackets, line breaks and a fence, after a deep expression)."""
        return self.completion_exact or len(data.translate(None, self._guard_bytes)) == len(data)

    def accepts_after(self, state: int, data: bytes) -> bool:
        """Whether reading ``data`` from ``state`` ends where the text may stop (a
        witness checked before it is trusted: its distances do not count the guards of
        rules matched longest), read as :meth:`walk_lightly` reads."""
        sid, nodes = self._read_lightly(state, data)
        if sid is not None:
            return sid != DEAD and bool(self.accepting[sid])
        return any(self._node_ends(n)[0] for n in nodes)

    def walk_lightly(self, state: int, data: bytes) -> int:
        """:meth:`walk` computing no row: rows already computed are followed, elsewhere
        the stacks themselves are read; only the state reached is interned."""
        sid, nodes = self._read_lightly(state, data)
        return sid if sid is not None else self._intern(nodes)

    def _read_lightly(self, state: int, data: bytes) -> tuple[int | None, tuple[int, ...]]:
        """Where reading ``data`` from ``state`` ends: a state (``DEAD`` if it dies), or
        the stacks of one not interned (``None, stacks``)."""
        sid: int | None = state
        nodes: tuple[int, ...] = ()
        for b in data:
            cls = int(self.class_of_byte[b])
            if sid is not None:
                nxt = int(self.table[sid, cls])
                if nxt != UNKNOWN:
                    if nxt == DEAD:
                        return DEAD, ()
                    sid = nxt
                    continue
                nodes = self._keys[sid]  # type: ignore[assignment]
            nodes = self._stacks_after(nodes, cls)
            if not nodes:
                return DEAD, ()
            sid = self._ids.get(nodes)  # a state interned already, if any
        return sid, nodes

    def search_completion(self, state: int, spelling: Spelling, limit: int) -> bytes | None:
        """A shortest string that takes ``state`` to where the text may stop: a
        best-first search over sets of stacks (exact, guards included), the stacks'
        distances — lower bounds — as the estimate; each class spelled by ``spelling``.
        ``None`` when none is found within ``limit`` sets expanded."""
        start = frozenset(self._keys[state])  # type: ignore[arg-type]
        best = {start: 0}
        came: dict[frozenset[int], tuple[frozenset[int], int]] = {}
        frontier = [(self._stacks_distance(start), 0, 0, start)]
        tie = 0
        expanded = 0
        while frontier:
            _, d, _, nodes = heapq.heappop(frontier)
            if d > best[nodes]:
                continue
            if any(self._node_ends(n)[0] for n in nodes):
                out = bytearray()
                while nodes != start:
                    nodes, b = came[nodes]
                    out.append(b)
                return bytes(reversed(out))
            expanded += 1
            if expanded > limit:
                return None
            moves = [m for n in nodes for e in self._expansion(n) for m in self._node_moves(e)]
            for lo, hi, targets in segments(moves) if moves else ():
                reached = frozenset(targets)
                if best.get(reached, INF) <= d + 1:
                    continue
                estimate = self._stacks_distance(reached)
                if estimate >= INF:
                    continue
                best[reached] = d + 1
                came[reached] = (nodes, spelling.of_range(lo, hi))
                tie += 1
                heapq.heappush(frontier, (d + 1 + estimate, d + 1, tie, reached))
        return None

    def _stacks_after(self, nodes: Sequence[int], cls: int) -> tuple[int, ...]:
        """The stacks (sorted: a state's key) reading a byte of class ``cls`` leads to."""
        stacks = (self._expansion(nodes[0]) if len(nodes) == 1 else
                  set().union(*(self._expansion(n) for n in nodes)))
        reached = set()
        frames, item_step = self._nodes, self._item_step
        for stack in stacks:
            item, parent = frames[stack]
            moved = item_step(item, cls)  # (one node made, not one per move: _node_moves)
            if moved >= 0:
                reached.add(self._node(moved, parent))
        return tuple(sorted(reached))

    def _stacks_distance(self, nodes: Iterable[int]) -> int:
        return min((self._node_distance(n) for n in nodes), default=INF)

    def _node_distance(self, node: int) -> int:
        chain = []
        n = node
        total = 0
        while n >= 0 and n not in self._node_distances:
            chain.append(n)
            n = self._nodes[n][1]
        if n >= 0:
            total = self._node_distances[n]
        for n in reversed(chain):
            total += self._item_distance(self._nodes[n][0])
            self._node_distances[n] = total
        return total

    def _item_distance(self, item: int) -> int:
        """The bytes from a frame of ``item`` to its rule's end (cached per item set)."""
        hit = self._item_distances.get(item)
        if hit is None:
            hit = self._item_distances[item] = min(
                (self._nfa_distance(s) for s in self._items[item]), default=INF)
        return hit

    def _nfa_distance(self, s: int) -> int:
        """The bytes from NFA state ``s`` to its rule's end (a fixed point over the
        grammar's rules, computed once; group rules built later, on demand)."""
        if self._nfa_distances is None:
            self._nfa_distances = distances_to_end(
                self._all_moves(), self._eps, list(self._accept_states), calls=self._calls,
                rule_start=lambda rule: self._rule_start[rule] if rule < self._n_static else -1,
                priced=self._call_cost, n=self._static_nfa)
        if s < self._static_nfa:
            return int(self._nfa_distances[s])
        hit = self._late_distances.get(s)
        if hit is None:  # a state of a group rule's block: calls and epsilon moves, acyclic
            best = 0 if s in self._accept_states else INF
            for t in self._late_eps.get(s, ()):
                best = min(best, self._nfa_distance(t))
            for rule, t in self._calls.get(s, ()):
                cost = self._call_cost(self._called(rule, s), self._nfa_distances)
                best = min(best, cost + self._nfa_distance(t))
            hit = self._late_distances[s] = best
        return hit

    def _byte_moves(self) -> Iterable[Iterable[tuple[int, int, int]]]:
        return self._all_moves()  # group rules add calls only

    def _all_moves(self) -> Sequence[tuple[tuple[int, int, int], ...]]:
        """The byte moves of every state of the grammar's rules (all made now)."""
        if None in self._edges:
            edges = list(self._edges)
            self._copies.spell_out(edges)
            self._edges = tuple(edges)
            self._made.clear()
        return self._edges

    def item_origin(self, item: int) -> int:
        """The NFA state of ``item`` nearest its rule's end (-1: ``item`` is empty)."""
        return min(self._items[item], key=self._nfa_distance, default=-1)

    def witnesses(self, spelling: Spelling) -> Witnesses:
        """Shortest strings to a rule's end per NFA state (memoised), spelled for one
        vocabulary (``spelling``)."""
        def call_cost(rule: int, s: int) -> int:
            return self._call_cost(self._called(rule, s), self._nfa_distances)

        def rule_start(rule: int, s: int) -> int:
            return self._rule_start[self._start_rule(self._called(rule, s))]

        return Witnesses(self._nfa_distance, self._nfa_moves, call_cost, rule_start, spelling)

    def _nfa_moves(self, s: int) -> tuple:
        return self._eps_of(s), self._edges_of(s), self._calls.get(s, ())

    def _edges_of(self, s: int) -> tuple[tuple[int, int, int], ...]:
        """The byte moves of NFA state ``s`` (none for a group rule's)."""
        if s >= self._static_nfa:
            return ()
        moves = self._edges[s]
        if moves is None:  # a copied automaton's state: made on first use
            moves = self._made.get(s)
            if moves is None:
                moves = self._made[s] = self._copies.moves(s)
        return moves

    def _reads(self, s: int) -> bool:
        """Whether NFA state ``s`` has byte moves (without making a copied state's)."""
        if s >= self._static_nfa:
            return False
        moves = self._edges[s]
        return moves is None or bool(moves)

    def _eps_of(self, s: int) -> tuple[int, ...]:
        """The epsilon moves of NFA state ``s``."""
        return self._eps[s] if s < self._static_nfa else self._late_eps.get(s, ())

    def _called(self, rule: int, s: int) -> int:
        """The rule a call of NFA state ``s`` stands for (a group state not numbered yet
        for a PENDING one)."""
        return self._group_rule(*self._group_next[s]) if rule == PENDING else rule

    def _start_rule(self, rule: int) -> int:
        """``rule``, built if it is a group state's not built yet."""
        if self._rule_start[rule] < 0:
            self._start_item(rule)
        return rule

    def _call_cost(self, rule: int, dist: np.ndarray) -> int:
        if rule < self._n_static:
            return int(dist[self._rule_start[rule]])
        if dist is not self._nfa_distances:  # pricing, while the distances settle
            return self._group_length(self._group_states[rule - self._n_static], dist)
        hit = self._group_costs.get(rule)
        if hit is None:
            hit = self._group_costs[rule] = self._group_length(
                self._group_states[rule - self._n_static], dist)
        return hit

    def _group_length(self, key: tuple[int, int, int], dist: np.ndarray) -> int:
        """The shortest rest of an AnyOrder group from state ``key`` (members written,
        count): its required members left, as many of the cheapest others (or the extra
        member) as ``min_count`` still needs, and a comma before each but a first one."""
        gid, written, count = key
        g = self._groups[gid]

        def length(rule: int) -> int:  # a Python int: sums of INF must not overflow
            return int(dist[self._rule_start[rule]])

        total = n_must = 0
        must = g.required & ~written  # (bit by bit: groups have many members, few required)
        while must:
            low = must & -must
            total += length(g.members[low.bit_length() - 1])
            n_must += 1
            must ^= low
        more = max(0, g.lo - count - n_must)
        if more:
            pool = sorted(length(g.members[k]) for k in range(len(g.members))
                          if not (written | g.required) >> k & 1)
            if g.extra >= 0:
                pool += [length(g.extra)] * more
                pool.sort()
            total += sum(pool[:more]) if len(pool) >= more else INF
        written_now = n_must + more
        commas = written_now if count > 0 else max(written_now - 1, 0)
        return total + commas * length(g.comma)

    # -- the pieces a configuration's mask is composed of --------------------------------
    def kernel(self, state: int) -> tuple[tuple[int, int], ...]:
        """The stacks of ``state`` before expansion, as (top item set, parent node)."""
        return tuple(map(self._nodes.__getitem__, self._keys[state]))  # type: ignore[arg-type]

    def leaf_frame_key(self, item: int) -> Hashable | None:
        """A key that two item sets share — across automata, grammars and schemas — only
        if they read exactly alike standing on a wall: the item set's rule calls no rule,
        the rule's NFA fragment is the same (a digest of its states, edges and end) and
        so are the item set's states in it. ``None`` for an item set whose rule calls
        others (what it reads depends on them) or is too large to key."""
        hit = self._frame_keys.get(item, ())
        if hit != ():
            return hit
        states = self._items[item]
        key: Hashable | None = None
        if states and self._item_guard[item] == NO_GUARD:
            block = bisect_right(self._block_first, min(states)) - 1
            digest = self._rule_keys.get(block, b"")
            if digest == b"":
                digest = self._rule_keys[block] = self._leaf_rule_digest(block)
            if digest is not None:
                first = self._block_first[block]
                key = digest, self.class_key, tuple(sorted(s - first for s in states))
        self._frame_keys[item] = key
        return key

    def copied_state(self, item: int) -> tuple[CopiedMoves, int] | None:
        """For an item set of a rule whose body is a pre-built automaton (a string with
        lengths, a pattern, a format), which reads as one state of it: the automaton's
        moves (in byte classes) and that state; else None."""
        states = self._items[item]
        if not self._copied_moves or not states or self._item_guard[item] != NO_GUARD:
            return None
        block = bisect_right(self._block_first, states[0]) - 1
        moves = self._copied_moves.get(block)
        if moves is None:
            return None
        state = states[0] - self._block_first[block]
        end = moves.accepting.size  # (the rule's end, after the automaton's states)
        if state >= end or len(states) > 2 or (len(states) == 2
                                                 and states[1] - states[0] != end - state):
            return None
        return moves, state

    def frame_exception(self, item: int) -> int | None:
        """For an item set that is one state ``q`` of a rule's automaton with
        :class:`~tether.automata.regex_ast.Exceptions`: the item set of the state ``q``
        reads like (but for a few strings); else None."""
        states = self._items[item]
        if not self._excepting_rules or len(states) != 1 \
                or self._item_guard[item] != NO_GUARD:
            return None
        (nfa_state,) = states
        block = bisect_right(self._block_first, nfa_state) - 1
        hit = self._excepting_rules.get(self._block_rule[block])
        if hit is None:
            return None
        automaton, copied = hit
        first = self._block_first[block]
        if nfa_state - first >= copied.size:  # the rule's end
            return None
        like = automaton.exceptions.like.get(int(copied[nfa_state - first]))  # type: ignore[union-attr]
        if like is None:
            return None
        at = int(np.searchsorted(copied, like))
        if at == copied.size or copied[at] != like:
            return None
        return self._item(self._closure(first + at))

    def item_row(self, item: int) -> tuple[int, ...]:
        """The item set a frame of ``item`` moves to on each byte class (-1: it cannot
        read it); cached."""
        hit = self._item_class_rows.get(item)
        if hit is None:
            row = [-1] * self.n_classes
            for lo, hi, target in self._item_moves(item):
                row[lo:hi + 1] = [target] * (hi + 1 - lo)
            hit = self._item_class_rows[item] = tuple(row)
        return hit

    def _item_step(self, item: int, cls: int) -> int:
        """The item set a frame of ``item`` moves to on a byte of class ``cls`` (-1: it
        cannot read it): from its row if one is made, else from the moves of its states
        that cover ``cls`` (cached per item set and class) — a text read token by token
        meets most item sets once (a string's counted states), and a row makes the item
        set of every move."""
        row = self._item_class_rows.get(item)
        if row is not None:
            return row[cls]
        key = item * self.n_classes + cls
        hit = self._item_steps.get(key)
        if hit is not None:
            return hit
        if self._item_guard[item] != NO_GUARD:  # (its moves are its base's, less a guard)
            hit = self.item_row(item)[cls]
        else:
            targets = [t for s in self._items[item] for lo, hi, t in self._edges_of(s)
                       if lo <= cls <= hi]
            if len(targets) == 1:
                hit = self._item(self._closure(targets[0]))
            elif targets:
                hit = self._item(tuple(sorted({s for t in targets for s in self._closure(t)})))
            else:
                hit = -1
        self._item_steps[key] = hit
        return hit

    def item_accepts(self, item: int) -> bool:
        """Whether a frame of ``item`` may end here (its rule's end is in it)."""
        return self._item_accepts[item]

    def ends_at_once(self, item: int) -> bool:
        """Whether a frame of ``item`` (on a wall) may end before reading a byte: its
        walled state's ``pops`` flag (:meth:`_node_ends` of its one stack), known
        without interning that state (most frames asked are composed, never walked)."""
        return self._item_can_end(item)

    def frame_parts(self, item: int) -> FrameParts | None:
        """The parts a frame of ``item`` reads, for an item set of a rule that calls rules
        (see :class:`FrameParts`); None for one of a rule that calls none (walked, and
        shared across grammars: :meth:`leaf_frame_key`), that reads nothing, or that calls
        a rule matched longest where the frame could end with it (the callee's guard
        would reach the frame's parent). Cached per item set."""
        hit = self._parts.get(item)
        if hit is None:
            hit = self._parts[item] = self._find_parts(item) or ()
        return hit or None

    def _find_parts(self, item: int) -> FrameParts | None:
        calls = self._calls_of(item)
        if not calls and not self._rule_calls(item):
            return None
        guard = self._item_guard[item]  # the callees read first: they inherit it
        out = []
        for rule, cont in calls:
            callee = self.guarded(self._start_item(rule), guard)
            final = self._item_final[cont]
            after = self.guarded(cont, self.rule_guard(callee))
            if after != cont and (final or self.ends_at_once(cont)):
                return None
            empty = (self.guarded(cont, self.pop_guard(callee))
                     if self._nullable[rule] and not final else -1)
            out.append((callee, after, final, empty))
        reads = (any(map(self._reads, self._items[item])) if guard == NO_GUARD
                 else bool(self._item_moves(item)))  # (a guard may take every move)
        if not reads and not out:
            return None
        return FrameParts(reads, tuple(out))

    def first_classes(self, item: int) -> int:
        """The byte classes a frame of ``item`` may read first, as the bits of an int:
        those of its states' own moves, of the rules they call, and of what follows a
        call of a rule that may derive the empty string. A superset: a rule reached
        again while its classes are being found, or more than MAX_FIRST_DEPTH calls
        deep, counts as any class. Cached per item set, and per rule (no item set is
        made for a call's continuation, nor for the moves' targets); an item set found
        to start a literal (:meth:`forced_chain`) has that literal's first class."""
        hit = self._firsts.get(item)
        if hit is None:
            chain = self._chains.get(item)
            hit = self._firsts[item] = ((1 << chain[0][0]) if chain
                                        else self._states_first(self._items[item], 0))
        return hit

    def _states_first(self, states: Iterable[int], depth: int) -> int:
        if depth > MAX_FIRST_DEPTH:  # (a long run of calls of rules that may be empty)
            return (1 << self.n_classes) - 1
        bits = 0
        for s in states:
            for lo, hi, _ in self._edges_of(s):
                bits |= (1 << (hi + 1)) - (1 << lo)
            for rule, target in self._calls.get(s, ()):
                if rule == PENDING:  # the next state of a group: numbered now
                    rule = self._group_rule(*self._group_next.pop(s))
                    self._calls[s] = ((rule, target),)
                bits |= self._rule_first(rule, depth + 1)
                if self._nullable[rule]:
                    bits |= self._states_first(self._closure(target), depth + 1)
        return bits

    def _rule_first(self, rule: int, depth: int) -> int:
        hit = self._rule_firsts.get(rule)
        if hit is not None:
            return hit
        if rule in self._first_path:
            return (1 << self.n_classes) - 1
        self._first_path.add(rule)
        try:
            hit = self._states_first(self._items[self._start_item(rule)], depth)
        finally:
            self._first_path.discard(rule)
        self._rule_firsts[rule] = hit
        return hit

    def moves_alone(self, item: int) -> int:
        """The item set of the states of ``item`` that read bytes themselves, with its
        guard: its frame is what a frame of ``item`` reads before any call (it calls
        nothing and may not end at once; its moves lead where those of ``item`` do)."""
        hit = self._alone.get(item)
        if hit is None:
            reading = tuple(s for s in self._items[item] if self._reads(s))
            hit = self._alone[item] = self.guarded(self._item(reading),
                                                   self._item_guard[item])
        return hit

    def _rule_calls(self, item: int) -> bool:
        """Whether the rule of ``item`` calls rules (somewhere, not only from here)."""
        states = self._items[item]
        return bool(states) and self._block_calls(bisect_right(self._block_first,
                                                               min(states)) - 1)

    def _block_calls(self, block: int) -> bool:
        """Whether the rule whose NFA states are ``block`` calls rules (cached)."""
        hit = self._calls_in_block.get(block)
        if hit is None:
            first, end = self._block_range(block)
            hit = self._calls_in_block[block] = not self._calls.keys().isdisjoint(
                range(first, end))
        return hit

    def _block_range(self, block: int) -> tuple[int, int]:
        """The NFA states of a rule: ``block``'s first and its end."""
        end = (self._block_first[block + 1] if block + 1 < len(self._block_first)
               else self._n_nfa)
        return self._block_first[block], end

    def forced_chain(self, item: int) -> tuple[tuple[int, ...], int] | None:
        """The byte classes a frame of ``item`` must read one after the other (each the
        only move of an item set that calls nothing, may not end and has no guard, the
        way through a literal) and the item set after them; None if the first byte is
        not forced. Cached per item set."""
        hit = self._chains.get(item)
        if hit is None:
            classes: list[int] = []
            at = item
            while (self._item_guard[at] == NO_GUARD and not self._item_accepts[at]
                   and not self._calls_of(at) and len(classes) < MAX_CHAIN):
                states = self._items[at]
                if len(states) == 1:  # (a literal's: read on by its NFA states)
                    end = self._literal_run(states[0], classes)
                    if end != states[0]:
                        at = self._item(self._closure(end))
                        continue
                moves = self._item_moves(at)
                if len(moves) != 1 or moves[0][0] != moves[0][1]:
                    break
                classes.append(moves[0][0])
                at = moves[0][2]
            hit = self._chains[item] = (tuple(classes), at) if classes else ()
        return hit or None

    def _literal_run(self, s: int, classes: list[int]) -> int:
        """From NFA state ``s`` (an item set of its own, which may not end and calls
        nothing), the states of a literal read one after the other: each with one move,
        on one class, into a state with no epsilon move (so the item set of each is
        that state alone, with that one move — as :meth:`forced_chain` asks — and none
        is made); their classes appended to ``classes``; the state where the run stops
        (``s``: not a step)."""
        edges, eps, calls, accept = self._edges, self._eps, self._calls, self._accept_states
        while len(classes) < MAX_CHAIN and s < self._static_nfa:
            moves = edges[s] if edges[s] is not None else self._edges_of(s)
            if len(moves) != 1 or moves[0][0] != moves[0][1] or s in calls or s in accept:
                break
            classes.append(moves[0][0])
            s = moves[0][2]
            if eps[s]:  # (its item set is its closure: made by the caller)
                break
        return s

    def _leaf_rule_digest(self, block: int) -> bytes | None:
        """A digest of the NFA states of a rule that calls no rule (``block``: where its
        states are), or None."""
        first, end = self._block_range(block)
        if end - first > MAX_KEYED_RULE_STATES:
            return None
        rule = self._block_rule[block]
        body = self.grammar.rules.get(self._rule_names[rule]) if rule < self._n_static else None
        if isinstance(body, Automaton):  # its copy is a function of it: digest it at once
            head = np.array([body.n_states, body.start, *body.accepting], dtype=np.int64)
            return hashlib.blake2b(b"automaton" + head.tobytes()
                                   + np.ascontiguousarray(body.edges).tobytes(),
                                   digest_size=16).digest()
        if self._block_calls(block) or end > self._static_nfa:  # (a group rule's block)
            return None
        # A copied automaton's states by its template's digest, whether their moves are
        # made yet or not; the other states by their moves (flattened by iterators in C:
        # a bounded number's rule has ~5,000 states).
        copies = self._copies.copies_in(first, end)
        if copies:
            plain, at = [], first
            for copy_first, n, _ in copies:
                plain.append(self._edges[at:copy_first])
                at = copy_first + n
            plain.append(self._edges[at:end])
            edges = list(chain.from_iterable(plain))
        else:
            edges = self._edges[first:end]
        eps = self._eps[first:end]
        sizes = np.fromiter(chain(map(len, edges), map(len, eps)), dtype=np.int64,
                            count=len(edges) + end - first)
        moves = np.fromiter(chain.from_iterable(chain.from_iterable(edges)), dtype=np.int64)
        moves[2::3] -= first
        targets = np.fromiter(chain.from_iterable(eps), dtype=np.int64) - first
        head = np.array([end - first, self._rule_accept[rule] - first,
                         *(x for c, n, _ in copies for x in (c - first, n))], dtype=np.int64)
        return hashlib.blake2b(b"".join([a.tobytes() for a in (head, sizes, moves, targets)]
                                        + [digest for _, _, digest in copies]),
                               digest_size=16).digest()

    # -- rules matched longest ------------------------------------------------------------
    # A rule in ``grammar.longest`` never ends right before a byte it could go on with: its
    # *guard* is the byte classes it may read after a prefix where it may end. A frame of
    # it that ends pops to its parent *guarded*: the parent's item set with the guard, whose
    # moves skip the guard's bytes; a guarded frame's calls push guarded callees, and if it
    # ends before reading a byte its parent is guarded in turn (with both guards). The
    # first byte read lifts the guard (moves lead to plain item sets).
    def guarded(self, item: int, guard: int) -> int:
        """Item set ``item`` with ``guard`` added to its own (``NO_GUARD``: itself)."""
        if guard == NO_GUARD:
            return item
        guard = self._both_guards(self._item_guard[item], guard)
        base = self._item_base[item]
        gid = self._guarded_ids.get((base, guard))
        if gid is None:
            gid = self._guarded_ids[base, guard] = len(self._items)
            for table in (self._items, self._item_accepts, self._item_final):
                table.append(table[base])  # type: ignore[attr-defined]
            self._item_rows.append(None)
            self._item_calls.append(None)
            self._item_guard.append(guard)
            self._item_base.append(base)
        return gid

    def rule_guard(self, item: int) -> int:
        """The guard a frame of ``item``'s rule leaves when it ends after reading a byte
        (``NO_GUARD`` unless the rule is matched longest)."""
        if not self._longest:
            return NO_GUARD
        states = self._items[item]
        if not states:
            return NO_GUARD
        block = bisect_right(self._block_first, min(states)) - 1
        return self._longest.get(self._block_rule[block], NO_GUARD)

    def pop_guard(self, item: int) -> int:
        """The guard a frame of ``item`` leaves when it ends before reading a byte: its
        rule's and its own."""
        hit = self._pop_guards.get(item)
        if hit is None:
            hit = self._pop_guards[item] = self._both_guards(self._item_guard[item],
                                                             self.rule_guard(item))
        return hit

    def popped_to(self, item: int, parent: int) -> int:
        """The stack a frame of ``item`` over ``parent`` leaves when it ends before
        reading a byte: ``parent``, guarded if ``pop_guard`` says so."""
        guard = self.pop_guard(item)
        if guard == NO_GUARD:
            return parent
        parent_item, grandparent = self._nodes[parent]
        return self._node(self.guarded(parent_item, guard), grandparent)

    def _both_guards(self, a: int, b: int) -> int:
        """The guard of the bytes of guards ``a`` and ``b``."""
        if a in (NO_GUARD, b):
            return b
        if b == NO_GUARD:
            return a
        return self._guard(self._guards[a] + self._guards[b])

    def _guard(self, ranges: tuple[tuple[int, int], ...]) -> int:
        """The id of the guard of these class ranges (merged), or NO_GUARD if empty."""
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(ranges):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        if not merged:
            return NO_GUARD
        key = tuple(merged)
        gid = self._guard_ids.get(key)
        if gid is None:
            gid = self._guard_ids[key] = len(self._guards)
            self._guards.append(key)
        return gid

    def _longest_guards(self, names: list[str]) -> dict[int, int]:
        """Per rule matched longest, its guard: the byte classes that it, or another rule
        matched longest reading the same text alongside it, may read where it may end
        (the rules' item sets enumerated in step; they must call no rule)."""
        rules = [self._rule_index[name] for name in names]
        starts = tuple(self._rule_start_item[rule] for rule in rules)
        for name, item in zip(names, starts, strict=True):
            self._check_longest(name, item)
        guards = {}
        by_class: dict[int, dict[int, int]] = {}  # per item set: its moves by class
        for k, name in enumerate(names):
            ranges: list[tuple[int, int]] = []
            seen = {starts}
            todo = [starts]
            while todo:
                items = todo.pop()
                if self._item_accepts[items[k]]:
                    ranges += ((lo, hi) for item in items if item >= 0
                               for lo, hi, _ in self._item_moves(item))
                for nxt in self._steps_alongside(items, k, by_class):
                    if nxt not in seen:
                        if len(seen) >= MAX_LONGEST_ITEMS:
                            raise LimitExceeded(
                                f"the rule {name!r} to match longest has more than "
                                f"{MAX_LONGEST_ITEMS} item sets (with the other rules "
                                "matched longest alongside)",
                                location=self.grammar.where.get(name), source=self.source)
                        seen.add(nxt)
                        todo.append(nxt)
            guards[rules[k]] = self._guard(tuple(ranges))
        return guards

    def _steps_alongside(self, items: tuple[int, ...], k: int,
                         by_class: dict[int, dict[int, int]]) -> Iterable[tuple[int, ...]]:
        """Where the item sets of rules read in step (-1: a rule that cannot read the
        text so far) go by each byte class rule ``k`` reads."""
        moves = []
        for item in items:
            hit = by_class.get(item) if item >= 0 else {}
            if hit is None:
                hit = by_class[item] = {c: t for lo, hi, t in self._item_moves(item)
                                        for c in range(lo, hi + 1)}
            moves.append(hit)
        for cls in moves[k]:
            yield tuple(m.get(cls, -1) for m in moves)

    def _check_longest(self, name: str, start: int) -> None:
        """Refuse a rule to match longest that calls a rule."""
        seen = {start}
        todo = [start]
        while todo:
            item = todo.pop()
            if self._calls_of(item):
                raise CompileError(f"the rule {name!r} to match longest calls other rules "
                                   "(only a terminal can be matched longest)",
                                   location=self.grammar.where.get(name), source=self.source)
            for _, _, target in self._item_moves(item):
                if target not in seen:
                    if len(seen) >= MAX_LONGEST_ITEMS:
                        raise LimitExceeded(f"the rule {name!r} to match longest has more "
                                            f"than {MAX_LONGEST_ITEMS} item sets",
                                            location=self.grammar.where.get(name),
                                            source=self.source)
                    seen.add(target)
                    todo.append(target)

    def frame_of(self, node: int) -> tuple[int, int]:
        """The stack ``node`` as (top item set, parent node)."""
        return self._nodes[node]

    @property
    def n_stack_nodes(self) -> int:
        """Stack nodes built so far (bounded by MAX_STACK_NODES)."""
        return len(self._nodes)

    def rules_at(self, state: int) -> list[str]:
        """The rules on top of the stacks of ``state`` (where the input is, for errors)."""
        out = []
        for item, _ in self.kernel(state):
            nfa_state = min(self._items[item]) if self._items[item] else 0
            rule = self._block_rule[bisect_right(self._block_first, nfa_state) - 1]
            name = self._rule_names[rule]
            if name not in out:
                out.append(name)
        return out

    def stack_state(self, node: int) -> int:
        """The state whose only stack is ``node``."""
        sid = self._stack_states.get(node)
        if sid is None:
            sid = self._stack_states[node] = self._intern((node,))
        return sid

    def walled_state(self, item: int) -> int:
        """The state of a frame ``item`` standing on a ``WALL``: the walks from it are
        what the frame reads by itself, and its ``pops`` flags say where it may end."""
        sid = self._walled.get(item)
        if sid is None:
            sid = self._walled[item] = self._intern((self._node(item, WALL),))
        return sid

    def _compute_row(self, state: int) -> None:
        key = self._keys[state]
        if len(key) == 1:  # type: ignore[arg-type]
            (node,) = key  # type: ignore[misc]
            stacks = self._expansion(node)
        else:
            expanded: set[int] = set()
            for node in key:  # type: ignore[attr-defined]
                expanded.update(self._expansion(node))
            if len(expanded) > MAX_EXPANSION:
                raise LimitExceeded(f"the grammar is too ambiguous here: more than "
                                    f"{MAX_EXPANSION} parse stacks at once", source=self.source)
            stacks = tuple(expanded)
        runs: list[tuple[int, int, int]] = []  # (lo, hi, state reached), ascending
        if len(stacks) == 1:
            runs = [(lo, hi, self.stack_state(nxt)) for lo, hi, nxt in self._node_moves(stacks[0])]
        else:
            # Each elementary segment of the byte axis goes to the state whose stacks are
            # the targets of the moves covering it.
            moves = [m for n in stacks for m in self._node_moves(n)]
            interned: dict[tuple[int, ...], int] = {}
            for lo, hi, nodes in segments(moves):
                if len(nodes) == 1:
                    sid = self.stack_state(nodes[0])
                else:
                    kernel = tuple(sorted(set(nodes)))
                    sid = interned.get(kernel)
                    if sid is None:
                        sid = interned[kernel] = self._intern(kernel)
                runs.append((lo, hi, sid))
        # (written once every target is interned: interning may reallocate the table)
        if len(runs) <= FEW_RUNS:  # a few numpy slices: cheaper than converting a list
            row = self.table[state]
            row.fill(DEAD)
            for lo, hi, sid in runs:
                row[lo:hi + 1] = sid
        else:
            out = [DEAD] * self.n_classes
            for lo, hi, sid in runs:
                out[lo:hi + 1] = [sid] * (hi + 1 - lo)
            self.table[state] = out


class FrameParts(NamedTuple):
    """What a frame of an item set reads, in parts (:meth:`PushdownAutomaton.frame_parts`).

    ``reads``: whether it reads bytes itself (see :meth:`PushdownAutomaton.moves_alone`).
    ``calls`` are its calls: (the callee's start item set, the item set that reads after
    the callee ends having read a byte, whether it is final — nothing follows —, the item
    set that reads if the callee ends before reading a byte, or -1 if it may not or if
    nothing follows). Guards are the item sets': a guarded frame's callees inherit its
    guard, and so does the continuation of an empty callee; a callee matched longest
    leaves its guard on what follows it (see :meth:`PushdownAutomaton.guarded`)."""

    reads: bool
    calls: tuple[tuple[int, int, bool, int], ...]


@dataclass(frozen=True)
class _Group:
    """An AnyOrder group as rule numbers: ``required`` is a bit set over ``members``,
    ``extra`` is -1 when there is none; members written in all are counted up to
    ``cap``."""

    members: tuple[int, ...]
    required: int
    extra: int
    comma: int
    lo: int
    hi: int | None
    cap: int
    owner: str


class _RuleBuilder(NfaBuilder):
    """The NFA builder with two more node kinds: a :class:`Ref` becomes a call edge, and
    so does an :class:`AnyOrder` group (a call of its first state's rule)."""

    def __init__(self, pda: PushdownAutomaton, source: str | None) -> None:
        super().__init__(MAX_NFA_STATES, source)
        self.edges = MoveLists(LazyCopies())  # (copied automata's moves made on demand)
        self.pda = pda
        self.rule_index = pda._rule_index
        self.calls: dict[int, list[tuple[int, int]]] = {}
        self.callers: dict[int, set[int]] = {}  # per rule: the rules whose bodies call it
        self.owner = ""  # the rule being built

    def too_large(self, why: str) -> LimitExceeded:
        """Located at the rule being built: its schema pointer, else its name."""
        where = self.pda.grammar.where.get(self.owner)
        return LimitExceeded(f"the grammar needs more than {self.max_states} automaton states "
                             f"({why})", location=where if where is not None
                             else f"rule {self.owner!r}", source=self.source)

    def build(self, node):  # type: ignore[override]
        if isinstance(node, Ref | AnyOrder):
            rule = (self.rule_index[node.name] if isinstance(node, Ref)
                    else self.pda._group_root(node, self.owner))
            start, end = self.new(), self.new()
            self.calls.setdefault(start, []).append((rule, end))
            self.callers.setdefault(rule, set()).add(self.rule_index[self.owner])
            return start, end
        return super().build(node)


def _without(moves: Sequence[tuple[int, int, int]], guard: tuple[tuple[int, int], ...]
             ) -> list[tuple[int, int, int]]:
    """``moves`` (disjoint class ranges with targets) without the classes of ``guard``."""
    out = []
    for lo, hi, target in moves:
        for g_lo, g_hi in guard:
            if g_hi < lo or g_lo > hi:
                continue
            if g_lo > lo:
                out.append((lo, g_lo - 1, target))
            lo = g_hi + 1
            if lo > hi:
                break
        if lo <= hi:
            out.append((lo, hi, target))
    return out


def without_direct_left_recursion(grammar: Grammar) -> Grammar:
    """Rewrite every rule ``A: A x1 | A x2 | y1 | y2`` (top-level alternatives) as
    ``A: (y1 | y2) (x1 | x2)*`` — the same language without left recursion."""
    rules: dict[str, Expr] = {}
    for name, body in grammar.rules.items():
        alternatives = body.items if isinstance(body, Alternate) else (body,)
        bases: list[Expr] = []
        tails: list[Expr] = []
        for alt in alternatives:
            items = _items_of(alt)
            head = next(items, None)
            if isinstance(head, Ref) and head.name == name:
                rest = list(items)
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
    return replace(grammar, rules=rules, where=dict(grammar.where))


def _items_of(alt: Expr) -> Iterator[Expr]:
    """The items of an alternative in order, nested sequences flattened (lazily: the
    first is all most callers look at)."""
    stack: list[Expr] = [alt]
    while stack:
        node = stack.pop()
        if isinstance(node, Concat):
            stack.extend(reversed(node.items))  # type: ignore[arg-type]
        else:
            yield node


def _nullable_rules(pda: PushdownAutomaton, callers: dict[int, set[int]]) -> list[bool]:
    """Which rules derive the empty string (those of group states are known already): a
    rule is looked at again only when a rule it calls (``callers``: the rules that call
    each rule) turns out nullable."""
    nullable = list(pda._nullable)
    work = list(range(pda._n_static))
    waiting = set(work)
    while work:
        k = work.pop()
        waiting.discard(k)
        if not nullable[k] and _reaches_end(pda, k, nullable):
            nullable[k] = True
            for caller in callers.get(k, ()):
                if caller < pda._n_static and not nullable[caller] and caller not in waiting:
                    waiting.add(caller)
                    work.append(caller)
    return nullable


def _refuse_left_recursion(pda: PushdownAutomaton, grammar: Grammar) -> None:
    """Raise :class:`CompileError` if some rule can call itself before reading a byte."""
    n_rules = len(pda._rule_start)
    nullable = pda._nullable
    eps, calls = pda._eps, pda._calls  # (the grammar's rules only: no group rule built yet)
    left_calls: list[set[int]] = []
    for k in range(n_rules):
        if k >= pda._n_static:  # a group's first state: it starts with any member
            g = pda._groups[pda._group_states[k - pda._n_static][0]]
            left_calls.append({r for r in (*g.members, g.extra) if r >= 0})
            continue
        seen = {pda._rule_start[k]}
        stack = [pda._rule_start[k]]
        called: set[int] = set()
        while stack:
            s = stack.pop()
            for t in eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
            for rule, target in calls.get(s, ()):
                called.add(rule)
                if nullable[rule] and target not in seen:
                    seen.add(target)
                    stack.append(target)
        left_calls.append(called)
    names = pda._rule_names
    cyclic = on_cycles({k: sorted(called) for k, called in enumerate(left_calls)})
    for k in range(n_rules):
        if k in cyclic:
            cycle = " -> ".join(names[i] for i in _cycle_through(k, left_calls))
            raise CompileError(
                f"left recursion through {cycle} is not supported (only a rule's own "
                "alternatives starting with the rule are rewritten, e.g. `a: a x | y`)",
                location=grammar.where.get(names[k]), source=grammar.source)


def _reaches_end(pda: PushdownAutomaton, rule: int, nullable: list[bool]) -> bool:
    """Whether ``rule`` (of the grammar: its states are the NFA's own) reaches its end
    by epsilon moves and calls of rules that derive the empty string."""
    start, end = pda._rule_start[rule], pda._rule_accept[rule]
    eps, calls = pda._eps, pda._calls
    seen = {start}
    stack = [start]
    while stack:
        s = stack.pop()
        if s == end:
            return True
        for t in eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
        for r, t in calls.get(s, ()):
            if nullable[r] and t not in seen:
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

"""Intersection and difference of regular languages, as eager byte DFAs.

Regex syntax trees are closed under union, concatenation and repetition but not under
intersection or complement, which JSON Schema needs (``pattern`` ∩ ``maxLength`` ∩
``format``, keys that match no ``patternProperties``…). Here an operand is determinised
eagerly (the subset construction of :class:`~tether.automata.dfa.LazyDFA`, run to the end),
two DFAs are combined by a product over the reachable pairs of states, the result is
trimmed, and :func:`to_node` turns it back into a syntax-tree node (an
:class:`~tether.automata.regex_ast.Automaton`) that any larger expression can embed.

A :class:`Dfa` is a complete table over byte classes: state 0 is dead (its row is all 0)
and ``start`` is 0 exactly when the language is empty. Every size is bounded
(:class:`~tether.errors.LimitExceeded`, located where the caller says).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, types
from numba.typed import Dict

from tether.automata.dfa import LazyDFA
from tether.automata.nfa import build_nfa, coreachable
from tether.automata.regex_ast import Alternate, Automaton, CharSet, Concat, Node, Repeat
from tether.errors import LimitExceeded

MAX_OPERAND_STATES = 50_000  # states of a determinised operand
MAX_PRODUCT_STATES = 200_000  # states of a product (before trimming)
EMPTY_LANGUAGE = CharSet(())  # the node that matches no string at all


@dataclass
class Dfa:
    """A complete DFA over byte classes (see the module docstring)."""

    table: np.ndarray  # int32 (n_states, n_classes); row 0: the dead state
    class_of_byte: np.ndarray  # int64 (256,)
    accepting: np.ndarray  # bool (n_states,)
    start: int

    @property
    def n_states(self) -> int:
        return int(self.table.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.table.shape[1])

    def is_empty(self) -> bool:
        return self.start == 0

    def walk(self, state: int, data: bytes) -> int:
        """The state after reading ``data`` from ``state`` (0, the dead state, once dead)."""
        for b in data:
            state = int(self.table[state, self.class_of_byte[b]])
        return state

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (for tests and checks)."""
        return bool(self.accepting[self.walk(self.start, data)])


def empty_dfa() -> Dfa:
    """The DFA of the empty language."""
    return Dfa(np.zeros((1, 1), dtype=np.int32), np.zeros(256, dtype=np.int64),
               np.zeros(1, dtype=bool), 0)


def is_empty(node: Node) -> bool:
    """Whether ``node`` matches no string (exact: every non-empty character set encodes)."""
    if isinstance(node, CharSet):
        return not node.ranges
    if isinstance(node, Concat):
        return any(is_empty(i) for i in node.items)
    if isinstance(node, Alternate):
        return all(is_empty(i) for i in node.items)
    if isinstance(node, Repeat):
        return node.min > 0 and is_empty(node.item)
    if isinstance(node, Automaton):
        return not node.accepting
    return False


def to_dfa(node: Node, *, max_states: int = MAX_OPERAND_STATES,
           location: str | int | None = None) -> Dfa:
    """Determinise ``node`` completely (bounded by ``max_states``)."""
    if is_empty(node):
        return empty_dfa()
    try:
        lazy = LazyDFA(build_nfa(node), max_states=max_states)
        complete = lazy.materialize(max_states)
    except LimitExceeded as e:
        raise _too_large(e.message, location) from None
    if not complete:
        raise _too_large(f"an automaton needs more than {max_states} states", location)
    n = lazy.n_states
    return Dfa(lazy.table[:n].copy(), lazy.class_of_byte.astype(np.int64),
               lazy.accepting[:n].copy(), lazy.start)


def intersect_dfa(a: Dfa, b: Dfa, *, location: str | int | None = None) -> Dfa:
    """The DFA of L(a) ∩ L(b), trimmed."""
    return _product(a, b, difference=False, location=location)


def difference_dfa(a: Dfa, b: Dfa, *, location: str | int | None = None) -> Dfa:
    """The DFA of L(a) ∖ L(b), trimmed."""
    return _product(a, b, difference=True, location=location)


def intersect(a: Node, b: Node, *, location: str | int | None = None) -> Node:
    """A node matching the strings both ``a`` and ``b`` match."""
    return to_node(intersect_dfa(to_dfa(a, location=location), to_dfa(b, location=location),
                                 location=location), pos=location or 0)


def difference(a: Node, b: Node, *, location: str | int | None = None) -> Node:
    """A node matching the strings ``a`` matches and ``b`` does not (``b``'s complement
    relative to the universe ``a``)."""
    return to_node(difference_dfa(to_dfa(a, location=location), to_dfa(b, location=location),
                                  location=location), pos=location or 0)


def to_node(dfa: Dfa, *, pos: int | str = 0) -> Node:
    """The syntax-tree node of ``dfa``: :data:`EMPTY_LANGUAGE` or an :class:`Automaton`
    (DFA state ``s`` is automaton state ``s - 1``; edges cover maximal byte runs)."""
    if dfa.is_empty():
        return EMPTY_LANGUAGE
    edges = byte_run_edges(dfa.table[1:], dfa.class_of_byte)
    edges[:, 0] -= 1
    edges[:, 3] -= 1
    edges.flags.writeable = False
    accepting = tuple((np.nonzero(dfa.accepting[1:])[0]).tolist())
    return Automaton(dfa.n_states - 1, edges, dfa.start - 1, accepting, pos)


def byte_run_edges(rows: np.ndarray, class_of_byte: np.ndarray, *,
                   first_state: int = 1) -> np.ndarray:
    """Edges ``(src, lo, hi, dst)`` of the transition ``rows`` (state ``first_state + i``
    is row ``i``): one per maximal run of bytes going to the same live state, by state
    then byte."""
    return _byte_run_edges(rows, class_of_byte.astype(np.int64), first_state)


@njit(cache=True, nogil=True)
def _byte_run_edges(rows, class_of_byte, first_state):  # pragma: no cover - compiled
    n_edges = 0
    for pass_no in range(2):  # count, then fill
        if pass_no:
            edges = np.empty((n_edges, 4), dtype=np.int32)
            n_edges = 0
        for i in range(rows.shape[0]):
            lo = 0
            while lo < 256:
                dst = rows[i, class_of_byte[lo]]
                hi = lo
                while hi < 255 and rows[i, class_of_byte[hi + 1]] == dst:
                    hi += 1
                if dst != 0:
                    if pass_no:
                        edges[n_edges, 0] = first_state + i
                        edges[n_edges, 1] = lo
                        edges[n_edges, 2] = hi
                        edges[n_edges, 3] = dst
                    n_edges += 1
                lo = hi + 1
    return edges


def _product(a: Dfa, b: Dfa, *, difference: bool, location: str | int | None) -> Dfa:
    if a.is_empty() or (b.is_empty() and not difference):
        return empty_dfa()
    pair = a.class_of_byte * b.n_classes + b.class_of_byte
    uniq, class_of_byte = np.unique(pair, return_inverse=True)
    ta = a.table[:, uniq // b.n_classes].astype(np.int64)
    tb = b.table[:, uniq % b.n_classes].astype(np.int64)
    nb = b.n_states
    table, key_arr = _product_table(ta, tb, nb, a.start * nb + b.start, difference,
                                    MAX_PRODUCT_STATES)
    if len(key_arr) == 0:
        raise _too_large(f"an intersection needs more than {MAX_PRODUCT_STATES} states",
                         location)
    acc_a = a.accepting[key_arr // nb]
    acc_b = b.accepting[key_arr % nb]
    accepting = acc_a & (~acc_b if difference else acc_b)
    accepting[0] = False
    return trim(Dfa(table, class_of_byte.astype(np.int64), accepting, 1))


@njit(cache=True, nogil=True)
def _product_table(ta: np.ndarray, tb: np.ndarray, nb: int, start_key: int,
                   difference: bool, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The reachable pairs of a product, breadth first: (table, pair keys ``a * nb + b``;
    row 0 is dead, row 1 the start); empty arrays past ``limit`` states."""
    n_cls = ta.shape[1]
    ids = Dict.empty(key_type=types.int64, value_type=types.int64)
    ids[start_key] = 1
    keys = np.zeros(64, dtype=np.int64)
    keys[1] = start_key
    table = np.zeros((64, n_cls), dtype=np.int32)
    n = 2
    s = 1
    while s < n:
        ka = keys[s] // nb
        kb = keys[s] % nb
        for c in range(n_cls):
            x = ta[ka, c]
            y = tb[kb, c]
            if x == 0 or (y == 0 and not difference):
                continue
            key = x * nb + y
            t = ids.get(key, -1)
            if t < 0:
                if n >= limit:
                    return np.zeros((0, n_cls), dtype=np.int32), np.zeros(0, dtype=np.int64)
                if n == len(keys):
                    grown_keys = np.zeros(2 * n, dtype=np.int64)
                    grown_keys[:n] = keys
                    keys = grown_keys
                    grown = np.zeros((2 * n, n_cls), dtype=np.int32)
                    grown[:n] = table
                    table = grown
                t = n
                ids[key] = t
                keys[n] = key
                n += 1
            table[s, c] = t
        s += 1
    return table[:n].copy(), keys[:n].copy()


def trim(dfa: Dfa) -> Dfa:
    """Keep only the states reachable from ``start`` that can reach an accepting state."""
    if dfa.is_empty():
        return dfa
    table = dfa.table
    reach = _closure(table, np.array([dfa.start]), forward=True)
    alive = _closure(table, np.nonzero(dfa.accepting & reach)[0], forward=False) & reach
    alive[0] = False
    if not alive[dfa.start]:
        return empty_dfa()
    keep = np.concatenate([[0], np.nonzero(alive)[0]])
    new_id = np.zeros(dfa.n_states, dtype=np.int32)
    new_id[keep] = np.arange(len(keep), dtype=np.int32)
    new_table = new_id[table[keep]]
    return Dfa(new_table, dfa.class_of_byte, dfa.accepting[keep], int(new_id[dfa.start]))


def _closure(table: np.ndarray, seeds: np.ndarray, *, forward: bool) -> np.ndarray:
    """States reachable from (``forward``) or reaching (not ``forward``) ``seeds``."""
    n = table.shape[0]
    src = np.repeat(np.arange(n, dtype=np.int64), table.shape[1])
    dst = table.reshape(-1).astype(np.int64)
    seeds = np.asarray(seeds, dtype=np.int64)
    return coreachable(n, dst, src, seeds) if forward else coreachable(n, src, dst, seeds)


def _too_large(message: str, location: str | int | None) -> LimitExceeded:
    return LimitExceeded(message, location=location)


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first compile that needs them (see
    :func:`tether.engine.token_masks._warm_up`)."""
    _byte_run_edges(np.zeros((1, 1), dtype=np.int32), np.zeros(256, dtype=np.int64), 2)
    one_class = np.zeros((2, 1), dtype=np.int64)  # (C order: one column is both)
    two_classes = np.asfortranarray(np.zeros((2, 2), dtype=np.int64))  # (columns picked)
    for dead in (one_class, two_classes):
        _product_table(dead, dead, 2, 3, False, 8)


_warm_up()

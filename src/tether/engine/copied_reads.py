"""Reads of the token trie by a pre-built automaton's own moves, compiled.

A rule whose body is a pre-built automaton (a string with lengths, a pattern, a format,
the keys of an object) is copied into the pushdown automaton's NFA, and
:class:`~tether.automata.nfa.CopiedMoves` keeps its moves, by trie class. What a frame
standing on one of its states reads needs no item set: the automaton's moves say it.
Walked through the lazy item-set automaton instead, each new state of the walk (a
string's count, a position inside a character) cost a row built in Python: ~5 ms for
the first frame inside a string of at most 255 characters.

- :func:`walk_copied`: the tokens a state reads below trie nodes and the nodes where it
  may end — the frame of the state (below the root), what it reads below the nodes
  where the frame under it ended, its long tokens. Deterministic moves only
  (:func:`is_deterministic`; the caller walks the item sets of the others), on the byte
  trie (searching each state's moves costs little beside marking a byte trie's tokens;
  on a class trie the item-set rows, few and kept, are faster).
  An automaton read from the trie's root (a whole frame: ~1 ms of searched moves on
  SmolLM2's byte trie) gets a dense table of its moves over its own byte classes
  (:func:`move_table`, kept per automaton within a byte bound), by which that walk and
  every later one of it looks each move up instead of searching it (1.7x faster).
- :func:`read_in_step`: two states of one automaton read in step where they differ (an
  object's extra keys, which read like any string but for a few names).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from numba import njit

from tether.automata.nfa import CopiedMoves

MAX_STEP_SET = 16  # automaton states a set read in step may hold (read_in_step)
MAX_TABLE_BYTES = 4 << 20  # one automaton's dense table, at most
MAX_TABLES_BYTES = 64 << 20  # all of them, with the moves they hold (least recently
# used out first)

# Per copied automaton's moves (by id; the moves held with the table, so the id stays
# theirs): the class of each byte and the dense table (see move_table).
_tables: OrderedDict[int, tuple[CopiedMoves, np.ndarray, np.ndarray]] = OrderedDict()
_tables_bytes = 0
_tables_lock = threading.Lock()


def is_deterministic(moves: CopiedMoves) -> bool:
    """Whether no state of ``moves`` has two moves on one class."""
    return not _overlapping(moves.start, moves.lo, moves.hi)


@njit(cache=True, nogil=True)
def _overlapping(start, lo, hi):  # pragma: no cover - compiled
    """Whether some state has two moves on one class (its moves by ``lo``: two overlap
    only if two consecutive ones do)."""
    for s in range(start.size - 1):
        for e in range(start[s] + 1, start[s + 1]):
            if lo[e] <= hi[e - 1]:
                return True
    return False


@njit(cache=True, nogil=True)
def walk_copied(size, node_class, node_depth, tok_start, tok_ids, depth, roots, state,
                start, lo, hi, target, accepting, class_of_byte, table, words
                ):  # pragma: no cover - compiled
    """Read the trie below each of ``roots`` from automaton ``state`` (deterministic
    moves, :func:`is_deterministic`, as in :class:`~tether.automata.nfa.CopiedMoves`, by
    trie class; looked up in their dense ``table`` over ``class_of_byte`` if it has
    rows, :func:`move_table`, else searched): set in ``words`` the tokens at every node
    read (the roots' own excluded) and return the nodes at which the automaton is in an
    accepting state (sorted, distinct; roots may nest)."""
    dense = table.shape[0] > 0
    st = np.empty(depth + 2, np.int64)  # st[d]: the state after d bytes
    n_nodes = 0
    for k in range(roots.size):
        n_nodes += size[roots[k]]
    # (room for every node: growing the array inside the loop made the walk 1.7x slower)
    ends = np.empty(n_nodes, np.int64)
    n_ends = 0
    for k in range(roots.size):
        root = roots[k]
        node, stop = root + 1, root + size[root]
        st[node_depth[root]] = state
        while node < stop:
            d = node_depth[node]
            s, c = st[d - 1], node_class[node]
            nxt = -1
            if dense:
                nxt = table[s, class_of_byte[c]]
            else:
                for e in range(start[s], start[s + 1]):  # (disjoint moves, by lo)
                    if lo[e] > c:
                        break
                    if c <= hi[e]:
                        nxt = target[e]
                        break
            if nxt < 0:
                node += size[node]
                continue
            if accepting[nxt]:
                ends[n_ends] = node
                n_ends += 1
            for j in range(tok_start[node], tok_start[node + 1]):
                t = tok_ids[j]
                words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            st[d] = nxt
            node += 1
    if roots.size > 1:
        return np.unique(ends[:n_ends])
    return ends[:n_ends].copy()


def move_table(moves: CopiedMoves, *, build: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The deterministic ``moves`` as a dense table over the automaton's own byte classes
    (bytes no move tells apart): ``(class_of_byte, table)``, ``table[state, class]`` the
    target or -1. Built (and kept) only if ``build``, else None when not built yet; None
    too when the table would exceed :data:`MAX_TABLE_BYTES`."""
    global _tables_bytes
    key = id(moves)
    with _tables_lock:
        hit = _tables.get(key)
        if hit is not None and hit[0] is moves:
            _tables.move_to_end(key)
            return hit[1], hit[2]
    if not build:
        return None
    marks = np.zeros(257, dtype=np.int64)
    marks[moves.lo] = 1
    marks[moves.hi + 1] = 1
    class_of_byte = np.cumsum(marks[:256])
    n_classes = int(class_of_byte[-1]) + 1
    if moves.accepting.size * n_classes * 4 > MAX_TABLE_BYTES:
        return None
    table = _dense_moves(moves.start, moves.lo, moves.hi, moves.target, class_of_byte,
                         n_classes)
    with _tables_lock:
        old = _tables.pop(key, None)
        if old is not None:
            _tables_bytes -= _held_bytes(old)
        _tables[key] = entry = (moves, class_of_byte, table)
        _tables_bytes += _held_bytes(entry)
        while _tables_bytes > MAX_TABLES_BYTES and len(_tables) > 1:
            _tables_bytes -= _held_bytes(_tables.popitem(last=False)[1])
    return class_of_byte, table


def _held_bytes(entry: tuple[CopiedMoves, np.ndarray, np.ndarray]) -> int:
    """What an entry of the tables holds: the table, and the moves it keeps alive."""
    moves, class_of_byte, table = entry
    return table.nbytes + class_of_byte.nbytes + sum(array.nbytes for array in moves)


def move_table_bytes() -> int:
    """The bytes the dense move tables hold, with the moves they keep alive (within
    :data:`MAX_TABLES_BYTES`)."""
    with _tables_lock:
        return _tables_bytes


@njit(cache=True, nogil=True)
def _dense_moves(start, lo, hi, target, class_of_byte, n_classes
                 ):  # pragma: no cover - compiled
    table = np.full((start.size - 1, n_classes), -1, dtype=np.int32)
    for s in range(start.size - 1):
        for e in range(start[s], start[s + 1]):
            for k in range(class_of_byte[lo[e]], class_of_byte[hi[e]] + 1):
                table[s, k] = target[e]
    return table


@njit(cache=True, nogil=True)
def read_in_step(size, node_class, start, lo, hi, target, accepting, a, b, max_set
                  ):  # pragma: no cover - compiled
    """Read the trie with states ``a`` and ``b`` of one automaton (its moves as in
    :class:`~tether.automata.nfa.CopiedMoves`, by trie class) in step, below the nodes
    where they are in different sets of states (the automaton need not be
    deterministic: a key's escapes are not): whether every string ``a`` reads ``b``
    reads and ``a`` ends only where ``b`` does (False too if a set would hold more than
    ``max_set`` states); the nodes whose subtrees ``a`` cannot read (``b`` can); the
    nodes where ``b`` ends and ``a`` does not."""
    nothing = np.zeros(0, np.int64)
    lost = [0]
    lost.clear()
    not_ends = lost.copy()
    todo_nodes = lost.copy()
    todo_a = [np.array([a], np.int64)]
    todo_b = [np.array([b], np.int64)]
    todo_nodes.append(0)
    while len(todo_nodes):
        node, from_a, from_b = todo_nodes.pop(), todo_a.pop(), todo_b.pop()
        child, end = node + 1, node + size[node]
        single = from_a.size == 1 and from_b.size == 1
        while child < end:
            c = node_class[child]
            n_x = n_y = 0
            if single:  # (the usual case: one state each, one move at most)
                x_one, n_x = _move_of(from_a[0], c, start, lo, hi, target)
                y_one, n_y = _move_of(from_b[0], c, start, lo, hi, target)
            if single and n_x <= 1 and n_y <= 1:
                if n_x == 0 or n_y == 0:
                    if n_y == 0 < n_x:
                        return False, nothing, nothing
                    if n_x == 0 < n_y:
                        lost.append(child)
                elif x_one != y_one:
                    if accepting[x_one] != accepting[y_one]:
                        if accepting[x_one]:
                            return False, nothing, nothing
                        not_ends.append(child)
                    if size[child] > 1:
                        todo_nodes.append(child)
                        todo_a.append(np.array([x_one], np.int64))
                        todo_b.append(np.array([y_one], np.int64))
                child += size[child]
                continue
            x = _moved(from_a, c, start, lo, hi, target, max_set)
            y = _moved(from_b, c, start, lo, hi, target, max_set)
            if x.size > max_set or y.size > max_set:
                return False, nothing, nothing
            if x.size == 0 or y.size == 0:
                if y.size == 0 < x.size:
                    return False, nothing, nothing
                if x.size == 0 < y.size:
                    lost.append(child)
            elif x.size != y.size or np.any(x != y):
                x_ends, y_ends = np.any(accepting[x]), np.any(accepting[y])
                if x_ends != y_ends:
                    if x_ends:
                        return False, nothing, nothing
                    not_ends.append(child)
                if size[child] > 1:
                    todo_nodes.append(child)
                    todo_a.append(x)
                    todo_b.append(y)
            child += size[child]
    out_lost = np.empty(len(lost), np.int64)
    for k in range(len(lost)):
        out_lost[k] = lost[k]
    out_not = np.empty(len(not_ends), np.int64)
    for k in range(len(not_ends)):
        out_not[k] = not_ends[k]
    return True, out_lost, np.sort(out_not)


@njit(cache=True, nogil=True)
def _move_of(state, c, start, lo, hi, target):  # pragma: no cover - compiled
    """The state ``state`` moves to on class ``c`` (any, if several) and how many moves
    it has there (0, 1 or 2: several)."""
    found, n = -1, 0
    for e in range(start[state], start[state + 1]):
        if lo[e] <= c <= hi[e]:
            if n and target[e] != found:
                return found, 2
            if not n:
                found, n = target[e], 1
    return found, n


@njit(cache=True, nogil=True)
def _moved(states, c, start, lo, hi, target, max_set):  # pragma: no cover - compiled
    """The states (sorted, distinct) that ``states`` move to on class ``c``; more than
    ``max_set`` of them: any ``max_set + 1``."""
    out = np.empty(max_set + 1, np.int64)
    n = 0
    for i in range(states.size):
        s = states[i]
        for e in range(start[s], start[s + 1]):
            if lo[e] <= c <= hi[e]:
                t = target[e]
                seen = False
                for j in range(n):
                    if out[j] == t:
                        seen = True
                        break
                if not seen:
                    if n > max_set:
                        return out
                    out[n] = t
                    n += 1
    return np.sort(out[:n])


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first mask that needs them (see
    :func:`tether.engine.token_masks._warm_up`)."""
    one = np.zeros(1, dtype=np.int64)
    moves = (np.zeros(2, dtype=np.int64), one, one, one, np.zeros(1, dtype=np.bool_))
    read_in_step(np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int32), *moves, 0, 0,
                 MAX_STEP_SET)
    table = _dense_moves(moves[0], one, one, one, np.zeros(256, dtype=np.int64), 1)
    _overlapping(moves[0], one, one)
    walk_copied(np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int32),
                np.zeros(1, dtype=np.int32), np.zeros(2, dtype=np.int64), one, 1, one, 0,
                *moves, np.zeros(256, dtype=np.int64), table, np.zeros(1, dtype=np.uint32))


_warm_up()

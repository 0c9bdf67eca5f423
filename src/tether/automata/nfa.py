"""A byte-level NFA built from a regex syntax tree, trimmed, with a bound on its size.

States are integers. ``edges[s]`` lists ``(byte_lo, byte_hi, target)`` transitions,
``eps[s]`` the epsilon moves; there is one ``start`` and one ``accept`` state. After
:func:`build_nfa`, every state with an edge can still reach ``accept`` (edges into dead
states are removed), so any non-empty set of states reached by reading bytes is alive —
the invariant the DFA and the token masks rely on.
"""

from __future__ import annotations

import hashlib
import weakref
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

import numpy as np
from numba import njit

from tether.automata.regex_ast import (
    Alternate,
    Anchor,
    Automaton,
    CharSet,
    Concat,
    Node,
    Repeat,
)
from tether.automata.utf8 import utf8_sequences
from tether.cache_dir import json_cached
from tether.errors import CompileError, LimitExceeded

MAX_NFA_STATES = 250_000
_DISK_CACHED_RANGES = 32  # character sets with this many ranges are cached on disk


@dataclass
class Nfa:
    edges: list[list[tuple[int, int, int]]]
    eps: list[list[int]]
    start: int
    accept: int

    @property
    def n_states(self) -> int:
        return len(self.edges)


def build_nfa(node: Node, *, max_states: int = MAX_NFA_STATES, source: str | None = None) -> Nfa:
    """Thompson construction of ``node`` over UTF-8 bytes, then trimming."""
    builder = NfaBuilder(max_states, source)
    start, end = builder.build(node)
    nfa = Nfa(builder.edges, builder.eps, start, end)
    if not _trim(nfa):
        raise CompileError("the pattern matches no string at all", location=1, source=source)
    return nfa


class MoveLists(list):
    """The per-state move lists a :class:`NfaBuilder` fills. Marks a graph built fragment by
    fragment (Thompson's construction, embedded automata trimmed first): in it a state
    that cannot reach an end can reach a state with no move at all, so when no state
    but the ends is such a dead end, every state is alive and :func:`trim_moves` has
    nothing to remove. With ``copies`` (the pushdown engine's builder), a copied
    automaton's states have no list yet (see :class:`LazyCopies`)."""

    __slots__ = ("copies",)

    def __init__(self, copies: LazyCopies | None = None) -> None:
        super().__init__()
        self.copies = copies


class LazyCopies:
    """Automata copied into an NFA whose states get their moves only when asked for: in
    the move lists such a state's entry is None (it has moves: a state without any is
    ``()`` at once) until :meth:`moves` makes its tuple. Most states of a key automaton
    are only ever read by compiled walks of the template, so a compile need not spell
    out thousands of moves (nor the garbage collector visit them)."""

    def __init__(self) -> None:
        self._templates: dict[int, _CopyTemplate] = {}  # by the copy's first state
        self._firsts: list[int] = []  # the copies' first states, increasing
        self._digests: dict[int, bytes] = {}  # by the copy's first state: copies_in

    def add(self, edges: list, template: _CopyTemplate) -> None:
        """Append to ``edges`` the states of ``template``'s copy (numbered from the next
        free one), their moves not made."""
        first = len(edges)
        edges.extend(template.unmade)
        self._templates[first] = template
        self._firsts.append(first)

    def moves(self, s: int) -> tuple[tuple[int, int, int], ...]:
        """The moves of state ``s`` of a copy."""
        first = self._firsts[bisect_right(self._firsts, s) - 1]
        return _copied(self._templates[first], first, s - first, s - first + 1)[0]

    def spell_out(self, edges: list) -> None:
        """Make the moves of every state of ``edges`` that has none made yet."""
        for first in self._firsts:
            template = self._templates[first]
            n = len(template.bounds) - 1
            if None in edges[first:first + n]:
                edges[first:first + n] = _copied(template, first, 0, n)

    def n_moves(self, edges: Sequence) -> int:
        """How many moves the states of ``edges`` have (those not made yet included)."""
        n = sum(map(len, filter(None, edges)))
        for first, template in self._templates.items():
            bounds = template.bounds
            states = len(bounds) - 1
            if not any(edges[first:first + states]):  # (no move made yet: None or ())
                n += bounds[-1] - bounds[0]
            else:
                n += sum(bounds[k + 1] - bounds[k] for k in range(states)
                         if edges[first + k] is None)
        return n

    def copies_in(self, lo: int, hi: int) -> list[tuple[int, int, bytes]]:
        """The copies whose states lie in ``lo..hi - 1``: their first state, number of
        states and a digest of their moves (numbered from 0) — what digests a block of
        states without making the copied states' moves."""
        out: list[tuple[int, int, bytes]] = []
        at = bisect_right(self._firsts, lo - 1)
        if at == len(self._firsts) or self._firsts[at] >= hi:
            return out
        for first in self._firsts[at:]:
            if first >= hi:
                break
            template = self._templates[first]
            digest = self._digests.get(first)
            if digest is None:
                moves = template.moves
                digest = self._digests[first] = hashlib.blake2b(
                    b"".join(a.tobytes() for a in (moves.start, moves.lo, moves.hi,
                                                   moves.target)), digest_size=16).digest()
            out.append((first, len(template.bounds) - 1, digest))
        return out


def _copied(template: _CopyTemplate, first: int, a: int, b: int
            ) -> list[tuple[tuple[int, int, int], ...]]:
    """The moves of states ``a..b - 1`` of ``template`` copied from state ``first`` on."""
    bounds, arrays = template.bounds, template.moves
    lo, hi = bounds[a], bounds[b]
    moves = tuple(zip(arrays.lo[lo:hi].tolist(), arrays.hi[lo:hi].tolist(),
                      (arrays.target[lo:hi] + first).tolist(), strict=True))
    return [moves[x - lo:y - lo] for x, y in zip(bounds[a:b], bounds[a + 1:b + 1], strict=True)]


class CopiedMoves(NamedTuple):
    """The moves of an automaton copied into an NFA (:meth:`NfaBuilder.automaton`), its
    states numbered from 0 (its end, to which accepting states move without reading, is
    not among them): state ``s``'s moves are ``lo[k]..hi[k] -> target[k]`` for ``k`` in
    ``start[s]..start[s + 1] - 1``, by ``lo``. They may overlap: a pre-built automaton
    need not be deterministic (a key automaton's escapes are not)."""

    start: np.ndarray  # int64 [n + 1]
    lo: np.ndarray  # int64 [moves]
    hi: np.ndarray  # int64 [moves]
    target: np.ndarray  # int64 [moves]
    accepting: np.ndarray  # bool [n]


class NfaBuilder:
    """Builds one byte NFA fragment by fragment (Thompson's construction) within a
    bound on its states: :func:`build_nfa` for a regex's tree; the pushdown engine
    extends it with call edges for a grammar's rules (:mod:`tether.engine.pda`)."""

    def __init__(self, max_states: int, source: str | None) -> None:
        self.edges: list[list[tuple[int, int, int]]] = MoveLists()
        self.eps: list[list[int]] = []
        self.max_states = max_states
        self.source = source
        self.where = 1  # column of the node being built, for the size error
        self.repeats = 0  # counted repetitions around the node being built
        # Per copied automaton with exceptions, by its first NFA state: the automaton's
        # state each of its NFA states stands for.
        self.copied_states: dict[int, np.ndarray] = {}
        # Per copied automaton, by its first NFA state: its moves as arrays.
        self.copied_moves: dict[int, CopiedMoves] = {}

    def new(self) -> int:
        if len(self.edges) >= self.max_states:
            raise self.too_large(self.size_reason())
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: Node) -> tuple[int, int]:
        """Return (start, end) of a fragment; ``end`` has no outgoing moves yet."""
        if isinstance(node, CharSet):
            return self.charset(node)
        if isinstance(node, Concat):
            return self.concat(node)
        if isinstance(node, Alternate):
            start, end = self.new(), self.new()
            for branch in node.items:
                s, e = self.build(branch)
                self.eps[start].append(s)
                self.eps[e].append(end)
            return start, end
        if isinstance(node, Repeat):
            return self.repeat(node)
        if isinstance(node, Automaton):
            return self.automaton(node)
        if isinstance(node, Anchor):  # pragma: no cover - the parser resolves anchors
            raise CompileError("anchor left in the syntax tree", location=node.pos)
        raise TypeError(node)

    def concat(self, node: Concat) -> tuple[int, int]:
        start = end = self.new()
        edges, eps = self.edges, self.eps
        items = node.items
        i, n = 0, len(items)
        while i < n:
            # A run of sets of single bytes (a literal's): one state each, read on from
            # the end reached so far; made at once, their moves final (tuples), only the
            # last one an end to go on from.
            run = []
            while i < n and type(items[i]) is CharSet:
                n_local, rows = _charset_rows(items[i].ranges)  # type: ignore[union-attr]
                if n_local != 2:
                    break
                run.append(rows[0])
                i += 1
            if run:
                base = len(edges)
                if base + len(run) > self.max_states:
                    raise self.too_large(self.size_reason())
                edges[end].extend([(lo, hi, base) for lo, hi, _ in run[0]])
                edges.extend([tuple([(lo, hi, base + k) for lo, hi, _ in row])
                              for k, row in enumerate(run[1:], 1)])
                edges.append([])
                eps.extend(repeat((), len(run) - 1))
                eps.append([])
                end = base + len(run) - 1
                continue
            s, e = self.build(items[i])
            i += 1
            eps[end].append(s)
            end = e
        return start, end

    def repeat(self, node: Repeat) -> tuple[int, int]:
        outer = self.where
        self.where = node.pos
        self.repeats += 1
        start = end = self.new()
        for _ in range(node.min):
            s, e = self.build(node.item)
            self.eps[end].append(s)
            end = e
        if node.max is None:
            s, e = self.build(node.item)
            loop_end = self.new()
            self.eps[end] += [s, loop_end]
            self.eps[e] += [s, loop_end]
            end = loop_end
        elif node.max > node.min:
            final = self.new()
            for _ in range(node.max - node.min):
                s, e = self.build(node.item)
                self.eps[end] += [s, final]
                end = e
            self.eps[end].append(final)
            end = final
        self.where = outer
        self.repeats -= 1
        return start, end

    def size_reason(self) -> str:
        return "a counted repetition is too large" if self.repeats else "it is too long"

    def too_large(self, why: str) -> LimitExceeded:
        return LimitExceeded(f"the pattern needs more than {self.max_states} automaton states "
                             f"({why})", location=self.where, source=self.source)

    def automaton(self, node: Automaton) -> tuple[int, int]:
        """Copy a pre-built byte automaton, trimmed (see :func:`_copy_template`): its
        states numbered from the next free one, its accepting states moving to a fresh
        end."""
        base = len(self.edges)
        if base + node.n_states + 1 > self.max_states:
            self.where = node.pos or self.where
            raise self.too_large("a pre-built automaton is too large")
        template = _copy_template(node)
        n = template.moves.accepting.size
        copies = getattr(self.edges, "copies", None)
        if copies is not None:
            copies.add(self.edges, template)
        else:  # (as tuples: no move is added to a copied state)
            self.edges.extend(_copied(template, base, 0, n))
        self.edges.append([])
        self.eps.extend(repeat((), n))  # (a copied state gets no epsilon move later)
        self.eps.append([])
        end = base + n
        for s in template.accepted:
            self.eps[base + s] = [end]
        if node.exceptions is not None:
            self.copied_states[base] = template.alive
        self.copied_moves[base] = template.moves
        return base + template.start, end

    def charset(self, node: CharSet) -> tuple[int, int]:
        n_local, rows = _charset_rows(node.ranges)
        base = len(self.edges)
        if base + n_local > self.max_states:
            raise self.too_large(self.size_reason())
        self.edges.extend([[(lo, hi, base + dst) for lo, hi, dst in row] for row in rows])
        self.eps.extend([[] for _ in rows])
        return base, base + 1


class _CopyTemplate(NamedTuple):
    """What copying a pre-built automaton into an NFA takes, its states numbered from 0:
    the states that reach an accepting one (all of them when its start does not, which
    then reads nothing), by their old numbers (``alive``); their moves (``moves``,
    shared by every copy: read only; a state's made Python tuples only when asked for,
    :class:`LazyCopies`); where each state's moves begin in them (``bounds``); the start
    and the accepting states; each state's entry in the move lists of a copy whose moves
    are not made yet (``unmade``: None, or ``()`` for a state without any). The arrays
    are not marked read-only (numba compiles kernels apart for read-only arrays)."""

    alive: np.ndarray
    moves: CopiedMoves
    bounds: tuple[int, ...]
    start: int
    accepted: tuple[int, ...]
    unmade: tuple[tuple[()] | None, ...]


# Per pre-built automaton (compared by identity; the piece caches share them between
# schemas): what copying it takes, computed once.
_templates: weakref.WeakKeyDictionary[Automaton, _CopyTemplate] = weakref.WeakKeyDictionary()


def _copy_template(node: Automaton) -> _CopyTemplate:
    template = _templates.get(node)
    if template is None:
        template = _templates[node] = _build_copy_template(node)
    return template


def _build_copy_template(node: Automaton) -> _CopyTemplate:
    alive, start, lo, hi, target, accepted = _template_arrays(
        node.n_states, node.edges.astype(np.int64), node.start,
        np.asarray(node.accepting, dtype=np.int64))
    accepts = np.zeros(start.size - 1, dtype=np.bool_)
    accepts[accepted] = True
    moves = CopiedMoves(start, lo, hi, target, accepts)
    unmade: list[tuple[()] | None] = [None] * (start.size - 1)
    for s in np.flatnonzero(start[1:] == start[:-1]).tolist():  # (a dead end: few)
        unmade[s] = ()
    return _CopyTemplate(np.flatnonzero(alive), moves, tuple(start.tolist()),
                         int(np.cumsum(alive)[node.start] - 1), tuple(accepted.tolist()),
                         tuple(unmade))


@njit(cache=True, nogil=True)
def _template_arrays(n, edges, start, accepting):  # pragma: no cover - compiled
    """What :func:`_build_copy_template` takes, in one pass: the states that reach an
    accepting one (the start alone, reading nothing, when it does not), renumbered in
    order; their moves by state, then first byte (stably); where each state's moves
    begin; the accepting states kept, renumbered (in the order of ``accepting``)."""
    alive = coreachable(n, edges[:, 0], edges[:, 3], accepting)
    empty = not alive[start]
    if empty:  # the empty language: the start alone, a dead end (no move at all)
        alive[:] = False
        alive[start] = True
    new_id = np.cumsum(alive) - 1
    n_alive = new_id[n - 1] + 1
    first = np.zeros(n_alive + 1, dtype=np.int64)  # kept moves counted by state
    n_edges = edges.shape[0]
    if not empty:
        for i in range(n_edges):
            if alive[edges[i, 0]] and alive[edges[i, 3]]:
                first[new_id[edges[i, 0]] + 1] += 1
    for q in range(n_alive):
        first[q + 1] += first[q]
    lo = np.empty(first[n_alive], dtype=np.int64)
    hi = np.empty(first[n_alive], dtype=np.int64)
    target = np.empty(first[n_alive], dtype=np.int64)
    fill = first[:-1].copy()
    if not empty:
        for i in range(n_edges):  # by state, in their order, then by first byte (stably)
            if alive[edges[i, 0]] and alive[edges[i, 3]]:
                q = new_id[edges[i, 0]]
                k = fill[q]
                fill[q] += 1
                while k > first[q] and lo[k - 1] > edges[i, 1]:
                    lo[k], hi[k], target[k] = lo[k - 1], hi[k - 1], target[k - 1]
                    k -= 1
                lo[k], hi[k], target[k] = edges[i, 1], edges[i, 2], new_id[edges[i, 3]]
    n_accepted = 0
    for a in accepting:
        n_accepted += alive[a]
    accepted = np.empty(n_accepted, dtype=np.int64)
    k = 0
    for a in accepting:
        if alive[a]:
            accepted[k] = new_id[a]
            k += 1
    return alive, first, lo, hi, target, accepted


@lru_cache(maxsize=1024)
def _charset_rows(ranges: tuple[tuple[int, int], ...]
                  ) -> tuple[int, tuple[tuple[tuple[int, int, int], ...], ...]]:
    """:func:`_charset_template` as the moves of each local state: (number of local
    states, per state its (byte_lo, byte_hi, local target))."""
    n_local, template = _charset_template(ranges)
    rows: list[list[tuple[int, int, int]]] = [[] for _ in range(n_local)]
    for src, lo, hi, dst in template:
        rows[src].append((lo, hi, dst))
    return n_local, tuple(tuple(row) for row in rows)


@lru_cache(maxsize=256)
def _charset_template(ranges: tuple[tuple[int, int], ...]
                      ) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
    """The byte automaton of a character set: local state 0 is the start, 1 the end.

    ASCII ranges are single edges; the multi-byte part is built (and cached) separately,
    so sets that differ only in ASCII (``\\w``, ``[\\w.-]``, ``[\\w+]``…) share it.
    Returns (number of local states, edges as (src, byte_lo, byte_hi, dst)).
    """
    ascii_edges = tuple((0, lo, min(hi, 0x7F), 1) for lo, hi in ranges if lo <= 0x7F)
    wide = tuple((max(lo, 0x80), hi) for lo, hi in ranges if hi >= 0x80)
    n_states, wide_edges = _multibyte_template(wide) if wide else (2, ())
    return n_states, ascii_edges + wide_edges


@lru_cache(maxsize=256)
def _multibyte_template(ranges: tuple[tuple[int, int], ...]
                        ) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
    """The minimal byte automaton of a set of code points ≥ U+0080 (large sets, such as
    ``\\w``, are also kept in the on-disk cache)."""
    if len(ranges) < _DISK_CACHED_RANGES:
        return _build_multibyte_template(ranges)
    key = hashlib.sha256(repr(ranges).encode()).hexdigest()[:24]
    n_states, edges = json_cached(f"utf8-automaton-{key}",
                                  lambda: _build_multibyte_template(ranges))
    return n_states, tuple(tuple(e) for e in edges)


def _build_multibyte_template(ranges: tuple[tuple[int, int], ...]
                              ) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
    """Build the minimal byte automaton of a set of code points ≥ U+0080.

    The UTF-8 byte-range sequences of the set are put in a trie, whose states are then
    merged bottom-up when they accept the same suffixes (an acyclic automaton is
    minimised by hashing each state's outgoing edges).
    """
    trie: list[dict[tuple[int, int], int]] = [{}]
    for lo, hi in ranges:
        for seq in utf8_sequences(lo, hi):
            state = 0
            for byte_range in seq:
                nxt = trie[state].get(byte_range)
                if nxt is None:
                    nxt = trie[state][byte_range] = len(trie)
                    trie.append({})
                state = nxt
    # Children are created after their parents: merge in reverse creation order.
    canonical = [0] * len(trie)
    ids: dict[tuple[tuple[int, int, int], ...], int] = {(): 1}  # the leaf is the end
    edges: list[tuple[int, int, int, int]] = []
    n_states = 2
    for state in range(len(trie) - 1, 0, -1):
        signature = tuple(sorted((lo, hi, canonical[t]) for (lo, hi), t in trie[state].items()))
        local = ids.get(signature)
        if local is None:
            local = ids[signature] = n_states
            n_states += 1
            edges.extend((local, lo, hi, dst) for lo, hi, dst in signature)
        canonical[state] = local
    edges.extend((0, lo, hi, canonical[t]) for (lo, hi), t in trie[0].items())
    return n_states, tuple(edges)


def _trim(nfa: Nfa) -> bool:
    """Remove moves into states that cannot reach ``accept``; False if ``start`` cannot."""
    return trim_moves(nfa.edges, nfa.eps, [nfa.accept])[nfa.start]


def trim_moves(edges: list[list[tuple[int, int, int]]], eps: list[list[int]],
               ends: list[int], calls: dict[int, list[tuple[int, int]]] | None = None
               ) -> list[bool]:
    """Remove the moves (byte edges, epsilon moves and, for the pushdown engine, calls as
    ``calls[state] = [(rule, target)]``) into states that cannot reach one of ``ends``,
    in place; returns which states can. (For ``edges`` a :class:`MoveLists`, a scan for
    dead ends decides first whether there is anything to remove.)"""
    calls = {} if calls is None else calls
    n = len(edges)
    if isinstance(edges, MoveLists):  # (a lazy copy's state, None, has moves)
        end_set = set(ends)
        dead_ends = [s for s, e, p in zip(range(n), edges, eps, strict=True)
                     if e is not None and not e and not p and s not in calls
                     and s not in end_set]
        if not dead_ends:
            return [True] * n
        if edges.copies is not None:
            edges.copies.spell_out(edges)
    reverse: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for _, _, t in edges[s]:
            reverse[t].append(s)
        for t in eps[s]:
            reverse[t].append(s)
        for _, t in calls.get(s, ()):
            reverse[t].append(s)
    alive = [False] * n
    stack = list(ends)
    for s in stack:
        alive[s] = True
    while stack:
        for p in reverse[stack.pop()]:
            if not alive[p]:
                alive[p] = True
                stack.append(p)
    for s in range(n):
        edges[s] = [e for e in edges[s] if alive[e[2]]] if alive[s] else []
        eps[s] = [t for t in eps[s] if alive[t]] if alive[s] else []
        if s in calls:
            kept = [c for c in calls[s] if alive[c[1]]] if alive[s] else []
            if kept:
                calls[s] = kept
            else:
                del calls[s]
    return alive


@njit(cache=True, nogil=True)
def coreachable(n: int, src: np.ndarray, dst: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Which of states ``0..n-1`` reach one of ``seeds`` along the edges ``src -> dst``."""
    first = np.zeros(n + 1, dtype=np.int64)
    for i in range(len(dst)):
        first[dst[i] + 1] += 1
    for s in range(n):
        first[s + 1] += first[s]
    fill = first[:-1].copy()
    preds = np.empty(len(dst), dtype=np.int64)
    for i in range(len(dst)):
        preds[fill[dst[i]]] = src[i]
        fill[dst[i]] += 1
    alive = np.zeros(n, dtype=np.bool_)
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for s in seeds:
        if not alive[s]:
            alive[s] = True
            stack[top] = s
            top += 1
    while top:
        top -= 1
        t = stack[top]
        for j in range(first[t], first[t + 1]):
            p = preds[j]
            if not alive[p]:
                alive[p] = True
                stack[top] = p
                top += 1
    return alive


def _warm_up() -> None:
    """Load the compiled kernel now, not inside the first compile that needs it (see
    :func:`tether.engine.token_masks._warm_up`): for whole arrays and for columns of an
    edge table (another layout)."""
    none = np.zeros(0, dtype=np.int64)
    columns = np.zeros((2, 4), dtype=np.int64)
    coreachable(1, none, none, none)
    coreachable(1, columns[:, 0], columns[:, 3], none)
    _template_arrays(1, columns[:0], 0, none)


_warm_up()

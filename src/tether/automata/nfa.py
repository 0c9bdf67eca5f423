"""A byte-level NFA built from a regex syntax tree, trimmed, with a bound on its size.

States are integers. ``edges[s]`` lists ``(byte_lo, byte_hi, target)`` transitions,
``eps[s]`` the epsilon moves; there is one ``start`` and one ``accept`` state. After
:func:`build_nfa`, every state with an edge can still reach ``accept`` (edges into dead
states are removed), so any non-empty set of states reached by reading bytes is alive —
the invariant the DFA and the token masks rely on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tether.automata.regex_ast import Alternate, Anchor, CharSet, Concat, Node, Repeat
from tether.automata.utf8 import utf8_sequences
from tether.errors import CompileError, LimitExceeded

MAX_NFA_STATES = 250_000

_CONT = (0x80, 0xBF)  # the full range of a UTF-8 continuation byte


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
    builder = _Builder(max_states, source)
    start, end = builder.build(node)
    nfa = Nfa(builder.edges, builder.eps, start, end)
    if not _trim(nfa):
        raise CompileError("the pattern matches no string at all", location=1, source=source)
    return nfa


class _Builder:
    def __init__(self, max_states: int, source: str | None) -> None:
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.max_states = max_states
        self.source = source
        self.where = 1  # column of the node being built, for the size error

    def new(self) -> int:
        if len(self.edges) >= self.max_states:
            raise LimitExceeded(
                f"the pattern needs more than {self.max_states} automaton states "
                "(a counted repetition is too large)", location=self.where, source=self.source)
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
        if isinstance(node, Anchor):  # pragma: no cover - the parser resolves anchors
            raise CompileError("anchor left in the syntax tree", location=node.pos)
        raise TypeError(node)

    def concat(self, node: Concat) -> tuple[int, int]:
        start = end = self.new()
        for item in node.items:
            s, e = self.build(item)
            self.eps[end].append(s)
            end = e
        return start, end

    def repeat(self, node: Repeat) -> tuple[int, int]:
        outer = self.where
        self.where = node.pos
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
        return start, end

    def charset(self, node: CharSet) -> tuple[int, int]:
        start, end = self.new(), self.new()
        prefix: dict[tuple[int, int, int], int] = {}
        tails: dict[int, int] = {0: end}  # k -> state reading k full continuation bytes
        for seq in _charset_sequences(node.ranges):
            self.add_sequence(start, seq, prefix, tails)
        return start, end

    def add_sequence(self, start: int, seq: tuple[tuple[int, int], ...],
                     prefix: dict[tuple[int, int, int], int], tails: dict[int, int]) -> None:
        state = start
        for k, (lo, hi) in enumerate(seq):
            rest = len(seq) - k - 1
            if all(r == _CONT for r in seq[k + 1:]):
                self.edges[state].append((lo, hi, self.tail(rest, tails)))
                return
            key = (state, lo, hi)
            nxt = prefix.get(key)
            if nxt is None:
                nxt = prefix[key] = self.new()
                self.edges[state].append((lo, hi, nxt))
            state = nxt

    def tail(self, k: int, tails: dict[int, int]) -> int:
        if k not in tails:
            state = self.new()
            self.edges[state].append((*_CONT, self.tail(k - 1, tails)))
            tails[k] = state
        return tails[k]


@lru_cache(maxsize=256)
def _charset_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int], ...], ...]:
    return tuple(seq for lo, hi in ranges for seq in utf8_sequences(lo, hi))


def _trim(nfa: Nfa) -> bool:
    """Remove moves into states that cannot reach ``accept``; False if ``start`` cannot."""
    n = nfa.n_states
    reverse: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for _, _, t in nfa.edges[s]:
            reverse[t].append(s)
        for t in nfa.eps[s]:
            reverse[t].append(s)
    alive = [False] * n
    alive[nfa.accept] = True
    stack = [nfa.accept]
    while stack:
        for p in reverse[stack.pop()]:
            if not alive[p]:
                alive[p] = True
                stack.append(p)
    for s in range(n):
        nfa.edges[s] = [e for e in nfa.edges[s] if alive[e[2]]] if alive[s] else []
        nfa.eps[s] = [t for t in nfa.eps[s] if alive[t]] if alive[s] else []
    return alive[nfa.start]

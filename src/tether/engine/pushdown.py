"""Token masks of a pushdown automaton, composed from per-frame pieces.

A configuration of :class:`~tether.engine.pda.PushdownAutomaton` is a set of stacks, and
reading a token from a set of stacks reads it from each stack separately, so a
configuration's mask is the union of its stacks' masks. For one stack — a top frame
``S`` over a parent node ``P`` — a token either stays inside ``S`` (calls from ``S`` may
come and go, but ``S`` itself never ends), or ends ``S`` after some prefix and reads the
rest from ``P``. Hence::

    mask(S over P) = inner(S)  ∪  ⋃ over the trie nodes n where S may end:
                                   the tokens below n, read from P

``inner(S)`` and the nodes where ``S`` may end depend on ``S`` only: one full trie walk
per item set (from ``S`` standing on a wall), cached for the life of the compiled
constraint and shared by every stack that has ``S`` on top. When ``S`` may end before
reading anything, the tokens read from ``P`` are ``P``'s own (cached) mask. Otherwise
the rest is the same decomposition one level down: below the nodes ``N`` where ``S``
ended, ``P``'s top frame ``T`` reads by itself (a walk of those subtrees from ``T`` on a
wall, cached per (``T``, ``N``)), and below the nodes where ``T`` ends in turn, ``P``'s
parent reads — until no node is left (tokens are short) or the bottom is reached.

The nodes where a frame may end are kept without the trie's leaves: below a leaf no
token goes on, and a token that ends where the frame ends is the frame's own (in its
inner mask). So below a key's closing quote, most often a leaf, nothing is composed.

So every walk runs from a frame standing on a wall, never from a whole parser stack:
the automaton states walks create depend on the grammar, not on the text read so far,
and are shared by every position of every text. A configuration never seen before costs
a few cached lookups and small walks.

A frame of a rule that calls no other rule (a JSON string, a number, an enum) reads the
same in every grammar that has the same rule, so its walk is also shared across compiled
constraints of one vocabulary, keyed by a digest of the rule's automaton
(:meth:`~tether.engine.pda.PushdownAutomaton.leaf_frame_key`; bounded, LRU): the schemas
a server compiles share their plain strings and numbers. So is what such a frame reads
below a few trie nodes (a string value below the nodes where ``"name": "`` ends is the
same in every schema with that key): :mod:`tether.engine.shared_frames`. And the frame
of an automaton state that reads like another state of its rule but for a few strings
(:class:`~tether.automata.regex_ast.Exceptions`: an object's extra keys while they spell
the start of a declared name) is derived from that state's frame: the two are read in
step over the trie only where they differ (:meth:`PushdownCompiled._frame_except`). A
frame that must first read a literal (a key, an enum value, a keyword: each item set on
the way has one move, calls nothing and may not end) is not walked either: it is the
tokens along that path of the trie, plus what the item set after the literal reads below
the path's end (:meth:`PushdownCompiled._frame_of_chain`; walked, the literal cost a row
and a walk round per byte). And a frame of a rule that calls rules (a value's
alternatives, the state of an object whose members come in any order, a Python
expression after an operator) is composed from its parts
(:meth:`PushdownCompiled._compose_parts`): what it reads itself — from the root, the
tokens of one step down the trie and below them what the item sets it moves to read —
and its callees' frames with, below the nodes where a callee ends, what the continuation
reads. Those pieces are cached per item set and per (item set, nodes), so the states of
one object share their members' frames, and every context that reads a blank and then an
expression shares the walk of the expression's frame below the blank. Walked whole, each
such frame read the pieces again (Python's cold masks: p99 13 ms walked, 3.5 ms
composed). The (item set, nodes) cache is bounded by the bytes it holds; its large node
sets (an expression may end after nearly any prefix of a token) are the ends of a few
frames, held once each.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from functools import reduce

import numpy as np
from numba import njit

from tether.automata.shortest import INF
from tether.engine import shared_frames
from tether.engine.copied_reads import (
    MAX_STEP_SET,
    is_deterministic,
    move_table,
    read_in_step,
    walk_copied,
)
from tether.engine.pda import BOTTOM, MAX_STACK_NODES, FrameParts, PushdownAutomaton
from tether.engine.regular import (
    PRECOMPUTE_STATES,
    STATE_OVERHEAD_BYTES,
    RegularCompiled,
)
from tether.engine.shallow_frames import DeepTrie, deep_trie, shallow_key
from tether.engine.token_masks import ClassTrie, TrieWalker, mark_node, mark_tokens, read_only
from tether.errors import LimitExceeded
from tether.vocab import Vocabulary

MAX_CACHED_FRAMES = 8192
# Share of the stack-node bound past which compile() rebuilds: one generation may create
# many (the budget's exact search near its end, over 160 nested brackets: ~800k).
STACK_SATURATION = 0.5
MAX_SUBFRAME_BYTES = 96 << 20  # masks and node sets held by the (frame, trie nodes) cache
MAX_SUBFRAME_KEY = 1024  # trie nodes beyond which a subtree walk is keyed by a fingerprint
MAX_COMPOSING = 200  # compositions nested at most; deeper frames are walked
MAX_COMPOSED_PER_MASK = 1_000  # parser states one mask may compose (ambiguity's bound)
MAX_FIRST_CHECK = 64  # trie nodes below which _may_read_below looks at the first bytes
MAX_CHILD_CLASSES = 1 << 15  # nodes a trie keeps the edge classes of (ClassTrie.child_classes)

Frame = tuple[np.ndarray, np.ndarray, bool]  # inner mask, trie nodes where it ends, at once
_ROOT = np.zeros(1, dtype=np.int64)  # the trie's root, where a frame's walk starts
_NO_NODES = np.zeros(0, dtype=np.int64)
# No dense move table (walk_copied searches the moves)
_NO_TABLE = (np.zeros(256, dtype=np.int64), np.zeros((0, 0), dtype=np.int32))


class PushdownCompiled(RegularCompiled):
    """A grammar compiled for a vocabulary, run by a pushdown automaton."""

    def __init__(self, constraint: object, vocab: Vocabulary, pda: PushdownAutomaton, *,
                 compile_seconds: float = 0.0) -> None:
        super().__init__(constraint, vocab, pda, compile_seconds=compile_seconds)
        self.pda = pda
        self._not_eos = ~self._eos_words
        self._n_words = self._empty.size
        # Per item set: (its inner mask, the trie nodes where it may end, may it end at once)
        self._frames: OrderedDict[int, Frame] = OrderedDict()
        # Per (item set, trie nodes): what it reads below the nodes, where it ends there;
        # the nodes if they are a large set (to compare), the node sets it holds in
        # _node_sets, the bytes it holds besides
        self._subframes: OrderedDict[Hashable, tuple] = OrderedDict()
        self._subframe_bytes = 0  # held by _subframes besides _node_sets
        self._node_sets = _NodeSets()  # the large node sets _subframes holds, once each
        self._rows: dict[int, np.ndarray] = {}  # per item set of moves: its class row
        self._composing: set[Hashable] = set()  # frames, (item set, nodes) being composed
        self._frame_rests: dict[int, tuple[bytes | None, int]] = {}  # per item set
        self._stack_completions: dict[int, int] = {}  # per stack node: _stack_tokens
        self._witnesses = pda.witnesses(self._spelling)  # per NFA state: _frame_rest
        self._long: tuple[DeepTrie, TrieWalker] | None = None  # see _with_long_tokens
        self._deterministic: dict[int, bool] = {}  # per copied automaton's moves (by id)

    def precompute(self, deadline: float, max_states: int = PRECOMPUTE_STATES) -> int:
        """Compute the start state's mask (what the user waits for); later masks are
        composed when first needed, from frame masks cached as they are met. A grammar's
        ``warm_up`` text is walked first: the frames it meets stay cached, the masks of
        its own parser configurations (rarely met again) are dropped."""
        with self._lock:
            if self._walk_warm_up():
                self._masks.clear()
            if self.pda.start not in self._masks:
                self.state_mask(self.pda.start)
        return 1

    @property
    def saturated(self) -> bool:
        return super().saturated or self.pda.n_stack_nodes > STACK_SATURATION * MAX_STACK_NODES

    @property
    def held_bytes(self) -> int:
        frames = len(self._frames) * 2 * self._empty.nbytes  # a mask and trie nodes each
        return (super().held_bytes + frames + self._subframe_bytes + self._node_sets.bytes
                + self.pda.n_stack_nodes * STATE_OVERHEAD_BYTES + self._witnesses.held_bytes
                + self.pda.structure_bytes)

    # -- budgets: a configuration's completion, frame by frame --------------------------
    def _witness(self, state: int) -> bytes | None:
        """A shortest string that takes ``state`` to acceptance by the distances: the
        stack whose frames' shortest rests (each to its rule's end; token counts cached
        per item set and per stack node) add up to the fewest tokens is chosen, and its
        rests, one after another (a token may close several frames: ``}]}``)."""
        if self.pda.accepting[state]:
            return b""
        best = min(self.pda.kernel(state), default=None,
                   key=lambda frame: self._frame_tokens(frame[0]) + self._stack_tokens(frame[1]))
        if best is None or self._frame_tokens(best[0]) + self._stack_tokens(best[1]) >= INF:
            return None
        item, node = best
        rests = [self._frame_rest(item)[0]]
        while node >= 0:
            item, node = self.pda.frame_of(node)
            rests.append(self._frame_rest(item)[0])
        return b"".join(rests)  # type: ignore[arg-type]

    def _stack_tokens(self, node: int) -> int:
        chain = []
        while node >= 0 and node not in self._stack_completions:
            chain.append(node)
            node = self.pda.frame_of(node)[1]
        total = self._stack_completions[node] if node >= 0 else 0
        for n in reversed(chain):
            total += self._frame_tokens(self.pda.frame_of(n)[0])
            self._stack_completions[n] = total
        return total

    def _frame_tokens(self, item: int) -> int:
        return self._frame_rest(item)[1]

    def _frame_rest(self, item: int) -> tuple[bytes | None, int]:
        """A shortest string from a frame of ``item`` to its rule's end and its fewest
        tokens (``None, INF``: none)."""
        hit = self._frame_rests.get(item)
        if hit is None:
            origin = self.pda.item_origin(item)
            data = b"" if origin < 0 else self._witnesses.of(origin)
            ids = None if data is None else self.vocab.segment_fewest(data)
            hit = self._frame_rests[item] = (None, INF) if ids is None else (data, len(ids))
        return hit

    def _context(self, state: int) -> tuple[str, ...]:
        where = self.pda.grammar.where
        return tuple(f"{name} ({where[name]})" if where.get(name) not in (None, "") else name
                     for name in self.pda.rules_at(state))

    def _compute_mask(self, state: int) -> np.ndarray:
        started = time.perf_counter()
        # Masks of parent states a composition needs are computed first, deepest first,
        # without recursion (stacks can be deep).
        pending = [state]
        composed = 0
        while pending:
            top = pending[-1]
            if top in self._masks:
                pending.pop()
                continue
            words, needed = self._compose(top)
            if needed:
                pending.extend(needed)
                continue
            pending.pop()
            composed += 1
            if composed > MAX_COMPOSED_PER_MASK:
                raise LimitExceeded(
                    f"the grammar is too ambiguous here: one mask needs more than "
                    f"{MAX_COMPOSED_PER_MASK} parser states (after "
                    f"{self.pda.rules_at(state)[:3]})")
            self._store(top, words, started)
            started = time.perf_counter()
        return self.state_mask(state)

    def _compose(self, state: int) -> tuple[np.ndarray, list[int]]:
        """The mask of ``state`` from its stacks' frames and no parent states; or the
        empty mask and the parent states whose masks it needs first (a frame that may
        end before reading a byte reads on as its parent, whole: its mask)."""
        pda = self.pda
        kernel = pda.kernel(state)
        parents = [pda.stack_state(pda.popped_to(item, parent))
                   if parent != BOTTOM and pda.ends_at_once(item) else -1
                   for item, parent in kernel]
        needed = [p for p in parents if p >= 0 and p not in self._masks]
        if needed:  # (their masks first: this state's frames are built when composed)
            return self._empty, needed
        words = np.zeros(self._n_words, dtype=np.uint32)  # (zeros_like: 3x slower)
        for (item, parent), parent_state in zip(kernel, parents, strict=True):
            inner, ends, _ = self._frame(item)
            words |= inner
            if parent_state >= 0:
                words |= self.state_mask(parent_state) & self._not_eos
            if ends.size and parent != BOTTOM:
                self._read_below({pda.rule_guard(item): ends}, parent, words)
        return words, []

    def _read_below(self, nodes: dict[int, np.ndarray], node: int, words: np.ndarray
                    ) -> None:
        """Add to ``words`` the tokens that continue below trie nodes with the rest read
        from stack ``node``: frame by frame down the stack (module docstring). ``nodes``
        maps a guard (see :meth:`~tether.engine.pda.PushdownAutomaton.rule_guard`) to the
        nodes below which the next frame reads with that guard."""
        pda = self.pda
        while nodes and node != BOTTOM:
            item, parent = pda.frame_of(node)
            below_nodes: dict[int, list[np.ndarray]] = {}
            for guard, here in nodes.items():
                guarded = pda.guarded(item, guard)
                below, ends = self._subframe(guarded, here)
                if below is not self._empty:  # (most are: deep stacks read little)
                    words |= below
                if ends.size:
                    below_nodes.setdefault(pda.rule_guard(guarded), []).append(ends)
                if pda.ends_at_once(guarded):  # ends before reading a byte
                    below_nodes.setdefault(pda.pop_guard(guarded), []).append(here)
            # (a node met twice would be walked twice below, and again at every level)
            nodes = {g: reduce(_union, parts) for g, parts in below_nodes.items()}
            node = parent

    def _frame(self, item: int) -> tuple[np.ndarray, np.ndarray, bool]:
        hit = self._frames.get(item)
        if hit is None:
            like = self.pda.frame_exception(item)
            if like is not None:
                hit = self._frame_except(item, like)
            if hit is None:
                shared_key = self.pda.leaf_frame_key(item)
                hit, form_key = self._shared_leaf_frame(item, shared_key)
                if hit is None:
                    if item in self._composing:  # a cycle of calls that read nothing
                        raise _Cycle
                    chain = self.pda.forced_chain(item)
                    parts = (None if chain or len(self._composing) >= MAX_COMPOSING
                             else self.pda.frame_parts(item))
                    hit = (self._frame_of_chain(*chain) if chain else
                           self._frame_of_parts(item, parts) if parts else None)
                    if hit is None:
                        hit = self._walk_frame(item)
                    if shared_key is not None:
                        shared_frames.FRAMES.put(self.vocab, shared_key, hit)
                    if form_key is not None:
                        shared_frames.FRAMES.put(self.vocab, form_key, hit)
            self._frames[item] = hit
            if len(self._frames) > MAX_CACHED_FRAMES:
                self._frames.popitem(last=False)
        return hit

    def _shared_leaf_frame(self, item: int, key: Hashable | None
                           ) -> tuple[Frame | None, Hashable | None]:
        """The frame of ``item`` from those shared across grammars: under its own
        ``key`` (:meth:`~tether.engine.pda.PushdownAutomaton.leaf_frame_key`, None for
        none); else, for a state of a pre-built automaton (however large), made from the
        frame of a state of the same shallow form, its long tokens read again. Else None,
        and the key of its shallow form (if it has one) to share the frame under once
        computed."""
        hit = None if key is None else shared_frames.FRAMES.get(self.vocab, key)
        if hit is not None:
            return hit, None
        form_key = self._shallow_key(item)
        like = None if form_key is None else shared_frames.FRAMES.get(self.vocab, form_key)
        if like is None:
            return None, form_key
        return self._with_long_tokens(item, like), None

    def _shallow_key(self, item: int) -> Hashable | None:
        """The key of the frames of item sets that read like ``item`` on every string
        of up to the vocabulary's shallow depth (:mod:`tether.engine.shallow_frames`),
        for a state of a pre-built automaton; else None."""
        copied = self.pda.copied_state(item)
        if copied is None:
            return None
        digest = shallow_key(*copied, self._long_tokens()[0].shallow)
        return None if digest is None else (b"shallow", digest, self.pda.class_key)

    def _long_tokens(self) -> tuple[DeepTrie, TrieWalker]:
        if self._long is None:
            deep = deep_trie(self._walker.trie, self.vocab.size)
            self._long = deep, TrieWalker(self.pda, self.vocab, deep.trie)
        return self._long

    def _with_long_tokens(self, item: int, like: Frame) -> Frame:
        """The frame of ``item`` from the frame ``like`` of an item set that reads alike
        up to the shallow depth: its tokens and ends up to that depth, and those deeper
        read from ``item`` over the paths to the long tokens."""
        deep, walker = self._long_tokens()
        walked = self._walk_copied(item, deep.trie, _ROOT)
        inner, ends = walked if walked is not None else walker.mask_and_events(
            self.pda.walled_state(item), lambda: self.pda.pops)
        words = (like[0] & ~deep.tokens) | (inner & deep.tokens)
        words.flags.writeable = False
        depth = self._walker.trie.node_depth
        ends = deep.main_node[ends]
        ends = self._continuing(np.sort(ends[depth[ends] > deep.shallow]))
        return words, _union(like[1][depth[like[1]] <= deep.shallow], ends), like[2]

    def _walk_frame(self, item: int) -> Frame:
        """The frame of ``item`` by a walk of the whole trie from it, on a wall (by its
        automaton's moves, for a state of a pre-built automaton)."""
        walked = self._walk_copied(item, self._walker.trie, _ROOT)
        if walked is not None:
            inner, ends = walked
        else:
            walled = self.pda.walled_state(item)
            inner, ends = self._walker.mask_and_events(walled, lambda: self.pda.pops)
            ends = np.sort(ends)  # (what _subframe expects of the nodes below)
        inner.flags.writeable = False
        return inner, self._continuing(ends), self.pda.ends_at_once(item)

    def _walk_copied(self, item: int, trie: ClassTrie, roots: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray] | None:
        """For an item set that is one state of a pre-built automaton whose moves are
        deterministic, on the byte trie: what it reads below ``roots`` of ``trie`` and the
        nodes (sorted) where it may end there, read by the automaton's moves
        (:func:`~tether.engine.copied_reads.walk_copied`). Else None: the item sets are
        walked. On a class trie (a grammar with byte classes, compiled once and used long)
        the item-set rows a walk needs are few and kept, and a walk by them is faster than
        one that searches each state's moves (the Python grammar's names: ~0.3 ms, not
        1.6; its cold masks' p99 1.6-1.7 ms, not 1.7-1.8); on the byte trie (a JSON
        Schema, compiled per request) each count of a string is a new row built in
        Python."""
        if self.pda.n_classes < 256:  # a class trie
            return None
        copied = self.pda.copied_state(item)
        if copied is None:
            return None
        moves, state = copied
        deterministic = self._deterministic.get(id(moves))
        if deterministic is None:
            deterministic = self._deterministic[id(moves)] = is_deterministic(moves)
        if not deterministic:
            return None
        words = np.zeros(self._n_words, dtype=np.uint32)
        table = move_table(moves, build=roots is _ROOT)  # (a whole frame: worth a table)
        ends = walk_copied(trie.size, trie.node_class, trie.node_depth, trie.tok_start,
                           trie.tok_ids, trie.depth, roots, state, *moves,
                           *(table if table is not None else _NO_TABLE), words)
        return words, ends

    def _continuing(self, nodes: np.ndarray) -> np.ndarray:
        """Those of trie ``nodes`` a token goes on below: where a frame ends matters only
        for what its parent reads below (a frame ending at a leaf of the trie has read
        the whole token itself), so the nodes a frame ends at are kept without the
        leaves — smaller keys, and no composition below a set of leaves."""
        return nodes[self._walker.trie.size[nodes] > 1]

    def _frame_of_chain(self, classes: tuple[int, ...], after: int) -> Frame:
        """The frame of an item set that must read ``classes`` (a literal) and then
        reads as ``after`` (see :meth:`_read_chain`)."""
        inner, ends = self._read_chain(classes, after, np.zeros(1, dtype=np.int64))
        return inner, ends, False

    def _read_chain(self, classes: tuple[int, ...], after: int, nodes: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """What a frame that must read ``classes`` and then reads as ``after`` reads
        below trie ``nodes`` (sorted): the tokens along the path of ``classes`` below
        each, and what ``after`` reads below the paths' ends; where it ends there (not on
        the way: a literal's item sets may not end)."""
        walker = self._walker
        trie = walker.trie
        words = np.zeros(self._n_words, dtype=np.uint32)  # (zeros_like: 3x slower)
        path = np.array(classes, dtype=np.int64)
        if walker.by_class_pays(nodes, path[:1]):
            nodes = walker.children_in_classes(nodes, path[:1])  # the first step
            mark_tokens(trie.tok_start, trie.tok_ids, nodes, words)
            path = path[1:]
        path_ends = _follow(trie.node_class, trie.size, trie.tok_start, trie.tok_ids, nodes,
                            path, words)
        ends = path_ends
        if path_ends.size:
            below, ends = self._subframe(after, path_ends)
            if below is not self._empty:
                words |= below
            if self.pda.ends_at_once(after):  # it may end at the paths' ends
                ends = _union(path_ends, ends)
        words.flags.writeable = False
        return words, ends

    def _frame_of_parts(self, item: int, parts: FrameParts) -> Frame | None:
        """The frame of an item set of a rule that calls rules (see
        :meth:`~tether.engine.pda.PushdownAutomaton.frame_parts`), composed (see
        :meth:`_compose_parts`). None if that comes back to a frame being composed (a
        cycle of calls that read nothing): then it is walked."""
        self._composing.add(item)
        try:
            inner, ends = self._compose_parts(item, parts, None)
        except _Cycle:
            return None
        finally:
            self._composing.discard(item)
        inner.flags.writeable = False
        return inner, ends, self.pda.ends_at_once(item)

    def _compose_parts(self, item: int, parts: FrameParts, nodes: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """What a frame of ``item``, made of ``parts``, reads from the root (``nodes``
        None) or below trie ``nodes``, and where it ends there (not at ``nodes``
        themselves: an end before reading is its caller's to see, from the frame's
        flags). Its own moves: from the root, one step down the trie and what the item
        sets it moves to read below (:meth:`_read_moves`); below nodes, what its item
        set of moves (:meth:`~tether.engine.pda.PushdownAutomaton.moves_alone`) reads
        there (one walk: stepping down level by level below many nodes made many small
        pieces, measured slower). Each call: the callee's frame, below the nodes where
        the callee ends what the continuation reads, and the continuation's frame from
        the same place if the callee may be empty."""
        pda = self.pda
        pieces: list[np.ndarray] = []  # token masks, ORed once at the end
        parts_ends: list[np.ndarray] = []
        if parts.reads and nodes is None:
            own = np.zeros(self._n_words, dtype=np.uint32)  # (zeros_like: 3x slower)
            self._read_moves(pda.moves_alone(item), own, parts_ends)
            pieces.append(own)
        elif parts.reads:
            inner, ends = self._subframe(pda.moves_alone(item), nodes)
            pieces.append(inner)
            parts_ends.append(ends)
        for callee, after, final, empty in parts.calls:
            if empty != -1:  # what follows the callee reads from here too
                inner, ends = (self._frame(empty)[:2] if nodes is None else
                               self._subframe(empty, nodes))
                pieces.append(inner)
                parts_ends.append(ends)
            inner, ends = (self._frame(callee)[:2] if nodes is None else
                           self._subframe(callee, nodes))
            pieces.append(inner)
            if not ends.size:
                continue
            if final:  # a tail call: where the callee ends, the frame ends
                parts_ends.append(ends)
                continue
            below, below_ends = self._subframe(after, ends)
            pieces.append(below)
            parts_ends.append(below_ends)
            if pda.ends_at_once(after):  # what follows may end at once
                parts_ends.append(ends)
        ends = (reduce(_union, parts_ends) if parts_ends else np.zeros(0, dtype=np.int64))
        return self._union_of(pieces), ends

    def _union_of(self, pieces: list[np.ndarray]) -> np.ndarray:
        """The union of token masks (read-only): the shared empty mask if every one is
        empty, the one that is not if only one is, else a new array — most pieces below
        a few nodes are empty: no allocation, no pass over the vocabulary's words."""
        pieces = [piece for piece in pieces if piece is not self._empty]
        if len(pieces) <= 1:
            return pieces[0] if pieces else self._empty
        words = pieces[0] | pieces[1]
        for piece in pieces[2:]:
            words |= piece
        return words

    def _read_moves(self, moves: int, words: np.ndarray, ends: list[np.ndarray]) -> None:
        """Add to ``words`` what the frame of ``moves`` (an item set that reads bytes and
        calls nothing) reads from the root, and to ``ends`` the nodes where it ends: the
        tokens at the children of the root it reads, and below them what the item sets
        it moves to read (pieces shared by every item set that moves to them, where a
        walk of the frame would read them all again)."""
        trie, pda = self._walker.trie, self.pda
        row = self._rows.get(moves)
        if row is None:
            row = self._rows[moves] = np.array(pda.item_row(moves), dtype=np.int64)
        children, targets = _step(trie.node_class, trie.size, trie.tok_start, trie.tok_ids,
                                  0, row, words)
        order = np.lexsort((children, targets))  # by target, then in preorder
        children, targets = children[order], targets[order]
        bounds = np.flatnonzero(np.diff(targets)) + 1
        firsts = [0, *bounds.tolist()] if children.size else []
        for first, moved in zip(firsts, np.split(children, bounds), strict=False):
            moved = self._continuing(moved)
            if not moved.size:
                continue
            target = int(targets[first])
            below, below_ends = self._subframe(target, moved)
            words |= below
            ends.append(below_ends)
            if pda.ends_at_once(target):
                ends.append(moved)

    def _frame_except(self, item: int, like: int) -> Frame | None:
        """The frame of ``item`` from that of ``like``, which reads what ``item`` reads
        but for a few strings: both read in step over the trie where they differ; the
        subtrees ``item`` cannot read are taken out of ``like``'s frame (their tokens
        and ends), and so are the ends where only ``like`` may end. None if ``item``
        reads a string ``like`` does not, or ends where it does not (or if the two are
        not states of one pre-built automaton, whose moves they are read in step by:
        :func:`~tether.engine.copied_reads.read_in_step`)."""
        trie = self._walker.trie
        copied, copied_like = self.pda.copied_state(item), self.pda.copied_state(like)
        if copied is None or copied_like is None or copied[0] is not copied_like[0]:
            return None
        moves = copied[0]
        if moves.accepting[copied[1]] != moves.accepting[copied_like[1]]:
            return None
        found, lost, not_ends = read_in_step(trie.size, trie.node_class, *moves,
                                             copied[1], copied_like[1], MAX_STEP_SET)
        if not found:
            return None
        inner, ends, at_once = self._frame(like)
        if lost.size or not_ends.size:
            first = np.sort(lost)
            stop = first + trie.size[first]
            if lost.size:
                taken = np.zeros(self._n_words, dtype=np.uint32)
                _mark_subtrees(trie.tok_start, trie.tok_ids, first, stop, taken)
                inner = inner & ~taken
                inner.flags.writeable = False
            ends = _kept_ends(ends, first, stop, not_ends)
        return inner, ends, at_once

    def _subframe(self, item: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What frame ``item`` reads below trie ``nodes`` (sorted, unique): the tokens that
        continue below them and the nodes (sorted) where it ends there. Cached per (item
        set, nodes): small sets keyed by their bytes, large ones (an expression may end
        after nearly any prefix of a token: 96k of the Python grammar's 98k nodes) by a
        fingerprint, compared on a hit. The cache is bounded by the bytes it holds; few of
        its masks and node sets differ (most masks are empty, and the large sets are the
        ends of a few frames), so equal ones are held once."""
        large = nodes.size > MAX_SUBFRAME_KEY
        if not large:
            key: Hashable = (item, nodes.tobytes())
            entry = self._subframes.get(key)
            if entry is not None:
                return entry[0], entry[1]
        else:
            key = (item, *_fingerprint(nodes))
            entry = self._subframes.get(key)
            if entry is not None and (entry[2] is nodes or np.array_equal(entry[2], nodes)):
                self._subframes.move_to_end(key)  # (kept the longest: they cost the most)
                return entry[0], entry[1]
            self._forget(key)  # (another set of nodes with the same fingerprint)
        below, ends = self._walk_below(item, nodes)
        if not np.count_nonzero(below):
            below = self._empty
        size = 0 if below is self._empty else below.nbytes
        pooled: list[np.ndarray] = []
        if large:
            nodes, size = self._pool(nodes, pooled, size)
        if ends.size > MAX_SUBFRAME_KEY:
            ends, size = self._pool(ends, pooled, size)
        else:
            size += ends.nbytes
        self._subframes[key] = (below, ends, nodes if large else None, tuple(pooled), size)
        self._subframe_bytes += size
        while (self._subframe_bytes + self._node_sets.bytes > MAX_SUBFRAME_BYTES
               and len(self._subframes) > 1):
            self._forget(next(iter(self._subframes)))
        return below, ends

    def _pool(self, nodes: np.ndarray, pooled: list[np.ndarray], size: int
              ) -> tuple[np.ndarray, int]:
        """The node set held for ``nodes`` (noted in ``pooled``), or ``nodes`` with its
        bytes added to ``size``."""
        held, shared = self._node_sets.hold(nodes)
        if shared:
            pooled.append(held)
            return held, size
        return nodes, size + nodes.nbytes

    def _forget(self, key: Hashable) -> None:
        entry = self._subframes.pop(key, None)
        if entry is not None:
            _, _, _, pooled, size = entry
            self._subframe_bytes -= size
            for nodes in pooled:
                self._node_sets.release(nodes)

    def _walk_below(self, item: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What :meth:`_subframe` caches: read along a literal's path, composed from the
        parts of an item set that calls rules (its item set of moves, its callees), or
        walked (an item set that calls nothing — what one of a leaf rule reads below
        a few nodes is shared across grammars, :data:`shared_frames.BELOW` —; a
        composition that comes back to itself, a cycle of calls that read nothing;
        compositions nested too deep)."""
        chain = self.pda.forced_chain(item)  # (first: a literal's first class is its own)
        if not self._may_read_below(item, nodes):
            return self._empty, _NO_NODES
        if chain:
            return self._read_chain(*chain, nodes)
        parts = self.pda.frame_parts(item)
        if parts and parts.calls and len(self._composing) < MAX_COMPOSING:
            key = (item, id(nodes))  # (a cycle passes the same array along, alive)
            if key in self._composing:  # a cycle of calls that read nothing
                raise _Cycle
            self._composing.add(key)
            try:
                below, ends = self._compose_parts(item, parts, nodes)
                below.flags.writeable = False
                return below, ends
            except _Cycle:
                pass
            finally:
                self._composing.discard(key)
        leaf_key = (self.pda.leaf_frame_key(item) if nodes.size <= MAX_SUBFRAME_KEY
                    else None)
        if leaf_key is not None:  # what a leaf rule reads below these nodes: shared
            leaf_key = (leaf_key, nodes.tobytes())
            shared = shared_frames.BELOW.get(self.vocab, leaf_key)
            if shared is not None:
                return (self._empty if shared[0] is None else shared[0]), shared[1]
        walked = (self._walk_copied(item, self._walker.trie, nodes)
                  if nodes.size <= MAX_SUBFRAME_KEY else None)
        if walked is not None:
            below, ends = walked
        else:
            below, ends = self._walker.subtrees_mask_and_events(
                nodes, self.pda.walled_state(item), lambda: self.pda.pops)
            ends = np.sort(ends)
        ends = self._continuing(ends)
        below.flags.writeable = False
        if leaf_key is not None:
            ends.flags.writeable = False
            shared_frames.BELOW.put(self.vocab, leaf_key,
                                    (below if np.count_nonzero(below) else None, ends))
        return below, ends

    def _may_read_below(self, item: int, nodes: np.ndarray) -> bool:
        """False if no token goes on below trie ``nodes`` with a byte a frame of
        ``item`` may read first (:meth:`~tether.engine.pda.PushdownAutomaton.first_classes`):
        then it reads nothing there and ends nowhere, known without composing or walking
        it (a fifth of the (item set, nodes) pairs MaskBench's masks meet; masks -2 %,
        first masks -3 %). True for a large node set (not looked at)."""
        if nodes.size > MAX_FIRST_CHECK:
            return True
        trie = self._walker.trie
        known = trie.child_classes
        below = 0
        for node in nodes.tolist():
            bits = known.get(node)
            if bits is None:
                if len(known) >= MAX_CHILD_CLASSES:  # (bounded: a few MB at most)
                    known.clear()
                bits = known[node] = int.from_bytes(
                    _class_bits(trie.node_class, trie.size, node).tobytes(), "little")
            below |= bits
        return bool(below & self.pda.first_classes(item))


class _NodeSets:
    """Large sorted sets of trie nodes held once each, however many cache entries refer
    to them (counted), keyed by a fingerprint and compared."""

    def __init__(self) -> None:
        self._held: dict[tuple[int, ...], list] = {}  # fingerprint -> [nodes, count]
        self.bytes = 0

    def hold(self, nodes: np.ndarray) -> tuple[np.ndarray, bool]:
        """The held set equal to ``nodes`` (``nodes`` itself, held from now on, if there
        is none), and True; or ``nodes`` and False if another set has its fingerprint."""
        fingerprint = _fingerprint(nodes)
        held = self._held.get(fingerprint)
        if held is None:
            self._held[fingerprint] = [nodes, 1]
            self.bytes += nodes.nbytes
            return nodes, True
        if held[0] is nodes or np.array_equal(held[0], nodes):
            held[1] += 1
            return held[0], True
        return nodes, False

    def release(self, nodes: np.ndarray) -> None:
        """One reference to a set :meth:`hold` gave is gone."""
        fingerprint = _fingerprint(nodes)
        held = self._held[fingerprint]
        held[1] -= 1
        if not held[1]:
            del self._held[fingerprint]
            self.bytes -= nodes.nbytes


def _fingerprint(nodes: np.ndarray) -> tuple[int, ...]:
    """A key for a large sorted set of trie nodes, read in constant time (sets that share
    it are told apart by comparing them)."""
    size = nodes.size
    return size, int(nodes[0]), int(nodes[size // 3]), int(nodes[2 * size // 3]), int(nodes[-1])


class _Cycle(Exception):  # noqa: N818 - a signal, not an error
    """A frame's composition came back to a frame being composed."""


@njit(cache=True, nogil=True)
def _follow(node_class, size, tok_start, tok_ids, nodes, classes, words
            ):  # pragma: no cover - compiled
    """Set in ``words`` the tokens along the path of ``classes`` below each of ``nodes``
    (as far as the trie goes); return the nodes where a whole path ends that a token goes
    on below (see ``PushdownCompiled._continuing``), sorted (nodes may nest: their paths'
    ends interleave)."""
    ends = np.empty(nodes.size, dtype=np.int64)
    n_ends = 0
    for k in range(nodes.size):
        node = nodes[k]
        for j in range(classes.size):
            child, end = node + 1, node + size[node]
            while child < end and node_class[child] != classes[j]:
                child += size[child]
            if child >= end:
                node = -1
                break
            node = child
            mark_node(tok_start, tok_ids, node, words)
        if node >= 0 and size[node] > 1:
            ends[n_ends] = node
            n_ends += 1
    return np.sort(ends[:n_ends])


@njit(cache=True, nogil=True)
def _class_bits(node_class, size, node):  # pragma: no cover - compiled
    """The classes of the edges out of trie ``node``, as bits of four 64-bit words."""
    bits = np.zeros(4, dtype=np.uint64)
    child = node + 1
    while child < node + size[node]:
        c = node_class[child]
        bits[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
        child += size[child]
    return bits


@njit(cache=True, nogil=True)
def _mark_subtrees(tok_start, tok_ids, first, stop, words):  # pragma: no cover - compiled
    """Set in ``words`` the tokens of the subtrees ``first[k] .. stop[k] - 1``."""
    for k in range(first.size):
        for j in range(tok_start[first[k]], tok_start[stop[k]]):
            t = tok_ids[j]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@njit(cache=True, nogil=True)
def _step(node_class, size, tok_start, tok_ids, node, row, words
          ):  # pragma: no cover - compiled
    """Set in ``words`` the tokens at the children of ``node`` whose class ``row`` maps
    to a target (>= 0); return those children and their targets."""
    children = np.empty(size[node], dtype=np.int64)
    targets = np.empty(size[node], dtype=np.int64)
    n = 0
    child, end = node + 1, node + size[node]
    while child < end:
        target = row[node_class[child]]
        if target >= 0:
            children[n] = child
            targets[n] = target
            n += 1
            mark_node(tok_start, tok_ids, child, words)
        child += size[child]
    return children[:n], targets[:n]


@njit(cache=True, nogil=True)
def _union(a, b):  # pragma: no cover - compiled
    """The union of two sorted arrays of unique nodes, sorted (a merge)."""
    out = np.empty(a.size + b.size, dtype=np.int64)
    i = j = n = 0
    while i < a.size and j < b.size:
        if a[i] < b[j]:
            out[n] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[n] = b[j]
            j += 1
        else:
            out[n] = a[i]
            i += 1
            j += 1
        n += 1
    while i < a.size:
        out[n] = a[i]
        i += 1
        n += 1
    while j < b.size:
        out[n] = b[j]
        j += 1
        n += 1
    return out[:n]


@njit(cache=True, nogil=True)
def _kept_ends(ends, first, stop, gone):  # pragma: no cover - compiled
    """The nodes of ``ends`` (sorted) outside the subtrees ``first[k] .. stop[k] - 1``
    (sorted, disjoint) and not in ``gone`` (sorted): one merge."""
    out = np.empty(ends.size, dtype=np.int64)
    n = k = j = 0
    for i in range(ends.size):
        node = ends[i]
        while k < first.size and stop[k] <= node:
            k += 1
        if k < first.size and first[k] <= node:
            continue
        while j < gone.size and gone[j] < node:
            j += 1
        if j < gone.size and gone[j] == node:
            continue
        out[n] = node
        n += 1
    return out[:n]


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first mask that needs them (see
    :func:`tether.engine.token_masks._warm_up`)."""
    one = np.zeros(1, dtype=np.int64)
    fixed = read_only(one)  # (frames' node sets are read-only: variants of the kernels)
    for a, b in ((one, one), (one, fixed), (fixed, one), (fixed, fixed)):
        _union(a, b)
        _kept_ends(a, one, one, one)
    _step(np.zeros(1, dtype=np.int32), np.ones(1, dtype=np.int64), np.zeros(2, dtype=np.int64),
          one, 0, one, np.zeros(1, dtype=np.uint32))
    for nodes in (one, fixed):
        _follow(np.zeros(1, dtype=np.int32), np.ones(1, dtype=np.int64),
                np.zeros(2, dtype=np.int64), one, nodes, one, np.zeros(1, dtype=np.uint32))
    _mark_subtrees(np.zeros(2, dtype=np.int64), one, one, one, np.zeros(1, dtype=np.uint32))
    classes = np.zeros(1, dtype=np.int32)
    for node_class, size in ((classes, one), (read_only(classes), fixed)):
        _class_bits(node_class, size, 0)


_warm_up()

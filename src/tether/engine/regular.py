"""The engine for regular constraints (regexes, choices): a lazy DFA plus per-state masks.

``RegularCompiled`` owns the DFA and the trie walker and caches, per DFA state, the
mask (end-of-generation bits included when the state accepts) and the forced
continuation. All matchers of the constraint share those caches, so a state's mask is
computed once per compiled constraint, whatever the number of requests. The caches are
bounded and guarded by a lock (the DFA grows as it is explored).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from tether.automata.dfa import DEAD, LazyDFA
from tether.automata.shortest import INF, shortest_witness
from tether.engine import bitmask
from tether.engine.compiled import CheckResult, Compiled
from tether.engine.matcher import REJECT, Forced, StateStackMatcher
from tether.engine.token_masks import TrieWalker
from tether.vocab import Vocabulary

MAX_CACHED_MASKS = 4096
# Token moves walked at most to decide exactly whether a state completes within a few
# tokens when the segmented shortest completion does not fit (beyond: "no").
BUDGET_SEARCH_WALKS = 4096
MAX_FORCED_TOKENS = 64
PRECOMPUTE_STATES = 512
SATURATION = 0.8  # share of the automaton's state bound past which compile() rebuilds


class RegularCompiled(Compiled):
    """A regular constraint compiled for a vocabulary."""

    def __init__(self, constraint: Any, vocab: Vocabulary, dfa: LazyDFA, *,
                 compile_seconds: float = 0.0) -> None:
        self.constraint = constraint
        self.vocab = vocab
        self.dfa = dfa
        self._walker = TrieWalker(dfa, vocab)
        self._eos_words = bitmask.from_ids(sorted(vocab.eos_ids), vocab.size)
        self._empty = np.zeros(bitmask.n_words(vocab.size), dtype=np.uint32)
        self._empty.flags.writeable = False
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()  # insertion order: FIFO
        self._forced: dict[int, Forced] = {}
        self._finished: dict[int, bool] = {}
        self._completion_tokens: dict[int, int] = {}
        self._lock = threading.RLock()
        self.compile_seconds = compile_seconds
        self._mask_seconds = 0.0

    def precompute(self, deadline: float, max_states: int = PRECOMPUTE_STATES) -> int:
        """Compute masks ahead, breadth first over the states that tokens lead to from the
        start: always the start state's, then more until ``deadline`` (a
        ``time.perf_counter()`` value) or ``max_states``. Returns the masks computed.

        Generation then mostly looks masks up; states the budget did not reach are
        computed when first needed.
        """
        frontier = [self.dfa.start]
        seen = {self.dfa.start}
        done = 0
        with self._lock:
            while frontier and done < max_states and (
                    done == 0 or time.perf_counter() < deadline):
                state = frontier.pop(0)
                if state in self._masks:
                    continue
                started = time.perf_counter()
                words, successors = self._walker.mask_and_successors(state)
                self._store(state, words, started)
                done += 1
                for nxt in successors.tolist():
                    if nxt not in seen:
                        seen.add(nxt)
                        frontier.append(nxt)
        return done

    def matcher(self) -> RegularMatcher:
        return RegularMatcher(self)

    def check(self, text: str | bytes) -> CheckResult:
        data = text.encode() if isinstance(text, str) else bytes(text)
        state = self.dfa.start
        with self._lock:
            for i, b in enumerate(data):
                nxt = self.dfa.step(state, b)
                if nxt == DEAD:
                    return CheckResult(False, i, self._next_bytes(state), self._context(state))
                state = nxt
            if self.dfa.accepting[state]:
                return CheckResult(True, len(data))
            return CheckResult(False, len(data), self._next_bytes(state), self._context(state))

    def _next_bytes(self, state: int) -> bytes:
        self.dfa.ensure_rows([state])
        live = self.dfa.table[state][self.dfa.class_of_byte] != DEAD
        return bytes(np.flatnonzero(live).tolist())

    def _context(self, state: int) -> tuple[str, ...]:
        """Where in the constraint ``state`` is (the engine's own notion; none here)."""
        return ()

    @property
    def saturated(self) -> bool:
        return self.dfa.n_states > SATURATION * self.dfa.max_states

    @property
    def stats(self) -> dict[str, Any]:
        return {
            "states": self.dfa.n_states - 1,
            "byte_classes": self.dfa.n_classes,
            "cached_masks": len(self._masks),
            "compile_seconds": self.compile_seconds,
            "mask_seconds": self._mask_seconds,
        }

    # -- per-state data, shared by all matchers ------------------------------------------
    def state_mask(self, state: int) -> np.ndarray:
        """The mask of ``state`` (read-only; EOS bits set iff the state accepts)."""
        words = self._masks.get(state)
        if words is None:
            with self._lock:
                words = self._masks.get(state)
                if words is None:
                    words = self._compute_mask(state)
        return words

    def _compute_mask(self, state: int) -> np.ndarray:
        started = time.perf_counter()
        return self._store(state, self._walker.mask(state), started)

    def _store(self, state: int, words: np.ndarray, started: float) -> np.ndarray:
        if self.dfa.accepting[state]:
            words |= self._eos_words
        words.flags.writeable = False
        self._masks[state] = words
        if len(self._masks) > MAX_CACHED_MASKS:
            self._masks.popitem(last=False)
        self._mask_seconds += time.perf_counter() - started
        return words

    def state_forced(self, state: int) -> Forced:
        """The forced continuation from ``state``."""
        forced = self._forced.get(state)
        if forced is None:
            with self._lock:
                forced = Forced(self._forced_bytes(state), self._forced_tokens(state))
                self._forced[state] = forced
        return forced

    def state_finished(self, state: int) -> bool:
        """Accepting with no way to add a byte (computed once per state)."""
        finished = self._finished.get(state)
        if finished is None:
            with self._lock:
                self.dfa.ensure_rows([state])
                finished = bool(self.dfa.accepting[state]) and not self.dfa.table[state].any()
                self._finished[state] = finished
        return finished

    # -- budgets (docs/generation.md, "Budget") ------------------------------------------
    def completion_tokens(self, state: int) -> int:
        """A number of tokens that surely completes ``state``: the tokens of a shortest
        completion segmented longest-token-first (masks allow any tokenization of a valid
        string)."""
        hit = self._completion_tokens.get(state)
        if hit is None:
            with self._lock:
                hit = self._completion_tokens[state] = self._count_completion(state)
        return hit

    def _count_completion(self, state: int) -> int:
        if state == DEAD:
            return INF
        if self.dfa.accepting[state]:
            return 0
        nbytes = self.dfa.completion_bytes(state)
        witness = shortest_witness(self.dfa, state, self.dfa.completion_bytes,
                                   limit=2 * nbytes + 64)
        if witness is None:
            return INF
        ids = self.vocab.segment(witness)
        return INF if ids is None else len(ids)

    def completes_within(self, state: int, k: int) -> bool:
        """Whether some sequence of at most ``k`` tokens takes ``state`` to acceptance.

        Yes when the segmented shortest completion fits; no when even tokens of the
        longest length could not spell its bytes; in between, an exact search over the
        tokens the masks allow, ``BUDGET_SEARCH_WALKS`` token moves at most (past that
        the answer is "no": the budget never lets a run into a dead end)."""
        walks = [BUDGET_SEARCH_WALKS]
        return self._completes(state, k, walks, {})

    def _completes(self, state: int, k: int, walks: list[int],
                   seen: dict[tuple[int, int], bool]) -> bool:
        if self.completion_tokens(state) <= k:
            return True
        longest = self.vocab.max_token_bytes
        if k <= 0 or self.dfa.completion_bytes(state) > k * longest:
            return False
        key = (state, k)
        hit = seen.get(key)
        if hit is not None:
            return hit
        seen[key] = False
        ids = bitmask.to_ids(self.state_mask(state) & ~self._eos_words, self.vocab.size)
        if ids.size > walks[0]:
            return False
        tokens = self.vocab.tokens
        for token in sorted(ids.tolist(), key=lambda t: -len(tokens[t])):
            walks[0] -= 1
            if walks[0] < 0:
                return False
            with self._lock:
                nxt = self.dfa.walk(state, tokens[token])
            if nxt != DEAD and self._completes(nxt, k - 1, walks, seen):
                seen[key] = True
                return True
        return False

    def _forced_bytes(self, state: int) -> bytes:
        out = bytearray()
        dfa = self.dfa
        class_size = np.bincount(dfa.class_of_byte, minlength=dfa.n_classes)
        while not dfa.accepting[state] and len(out) < 4096:
            dfa.ensure_rows([state])
            live = np.flatnonzero(dfa.table[state] != DEAD)
            if live.size != 1 or class_size[live[0]] != 1:
                break
            out.append(int(np.flatnonzero(dfa.class_of_byte == live[0])[0]))
            state = int(dfa.table[state, live[0]])
        return bytes(out)

    def _forced_tokens(self, state: int) -> tuple[int, ...]:
        tokens: list[int] = []
        while len(tokens) < MAX_FORCED_TOKENS:
            words = self.state_mask(state)
            if bitmask.popcount(words) != 1 or self.dfa.accepting[state]:
                break
            token = int(bitmask.to_ids(words, self.vocab.size)[0])
            tokens.append(token)
            state = self.dfa.walk(state, self.vocab.token_bytes(token))
        return tuple(tokens)


class RegularMatcher(StateStackMatcher):
    """A position in a :class:`RegularCompiled` constraint (the state is a DFA state)."""

    def __init__(self, compiled: RegularCompiled) -> None:
        super().__init__(compiled.vocab, compiled.dfa.start)
        self.compiled = compiled

    def mask(self) -> np.ndarray:
        if self._stopped:
            return self.compiled._empty
        return self.compiled.state_mask(self._states[-1])

    def is_accepting(self) -> bool:
        return bool(self.compiled.dfa.accepting[self._states[-1]])

    def is_finished(self) -> bool:
        return self._stopped or self.compiled.state_finished(self._states[-1])

    def forced(self) -> Forced:
        if self._stopped:
            return Forced(b"", ())
        return self.compiled.state_forced(self._states[-1])

    def completes_within(self, k: int) -> bool:
        return self._stopped or self.compiled.completes_within(self._states[-1], k)

    def completion_tokens(self) -> int:
        return 0 if self._stopped else self.compiled.completion_tokens(self._states[-1])

    def _blank(self) -> RegularMatcher:
        return RegularMatcher(self.compiled)

    def _next_state(self, state: object, token_id: int, data: bytes) -> object:
        with self.compiled._lock:
            nxt = self.compiled.dfa.walk(state, data)
        return REJECT if nxt == DEAD else nxt

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
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from tether.automata.dfa import DEAD, LazyDFA
from tether.automata.shortest import INF, Spelling
from tether.engine import bitmask
from tether.engine.compiled import CheckResult, Compiled
from tether.engine.matcher import REJECT, Forced, StateStackMatcher
from tether.engine.token_masks import TrieWalker
from tether.vocab import Vocabulary

MAX_CACHED_MASKS = 4096
MAX_CACHED_STEPS = 65_536  # (state, token) -> next state, for walks that come again
STEP_BYTES = 120  # what one cached step holds (dict entry, key tuple, ints)
# Python objects per automaton state besides its table row (its key, dictionary entries):
# an estimate for held_bytes.
STATE_OVERHEAD_BYTES = 256
# States expanded at most (all their tokens walked) to decide exactly whether a state
# completes within a few tokens when its segmented shortest completion does not fit.
BUDGET_SEARCH_STATES = 64
BUDGET_SEARCH_SLACK = 1  # tokens beyond k a shortest completion may need to be searched
BUDGET_SEARCH_TOKENS = 8  # searched only for the last tokens of a budget
WITNESS_SEARCH_STATES = 4096  # stack sets a search for a completion that accepts expands
MAX_CACHED_BUDGET_ANSWERS = 100_000
MAX_CACHED_SUCCESSORS = 4096  # budget masks: the states the tokens of recent states end in
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
        self._checked: dict[int, bytes | None] = {}  # see _completion_data
        # States whose token path's next state is not credited yet: the path
        self._completion_rests: dict[int, tuple[int, ...]] = {}
        self._within: dict[tuple[int, int], bool] = {}  # see completes_within
        self._successors_of: OrderedDict[int, list[int]] = OrderedDict()  # LRU
        self._successor_count = 0  # the states _successors_of holds, all lists together
        self._steps: dict[tuple[int, int], int] = {}  # see token_step; FIFO
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
        self._walk_warm_up()
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

    def _walk_warm_up(self) -> bool:
        """Walk the constraint's ``warm_up`` text, if it has one (a
        :class:`~tether.constraints.Grammar`'s); whether it had."""
        warm_up = getattr(self.constraint, "warm_up", None)
        if warm_up:
            self.walk_sample(warm_up.encode())
        return bool(warm_up)

    def walk_sample(self, data: bytes) -> int:
        """Compute the masks along ``data`` read from the start state token by token (the
        vocabulary's longest-first tokens), as far as the constraint allows; the tokens
        walked. What a sample of the language meets is then cached (see
        :class:`~tether.constraints.Grammar`'s ``warm_up``)."""
        tokens = self.vocab.segment(data) or []
        state = self.dfa.start
        with self._lock:
            for walked, token in enumerate(tokens):
                self.state_mask(state)
                state = self.token_step(state, token)
                if state == DEAD:
                    return walked
            self.state_mask(state)
        return len(tokens)

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
    def held_bytes(self) -> int:
        return (len(self._masks) * self._empty.nbytes + self.dfa.table.nbytes
                + self.dfa.n_states * STATE_OVERHEAD_BYTES
                + 32 * len(self._successors_of) + 8 * self._successor_count
                + STEP_BYTES * len(self._steps))

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

    def token_step(self, state: int, token_id: int) -> int:
        """The state after reading token ``token_id`` from ``state`` (``DEAD``: not
        allowed), read without computing rows where the automaton can
        (:meth:`~tether.automata.dfa.LazyAutomaton.walk_lightly`: a pushdown automaton's
        row interns a configuration per byte class, a token needs one per byte). Cached:
        a decision checks the token it then takes, and texts that share a prefix (the
        tests of a schema, a server's requests) take the same steps."""
        key = (state, token_id)
        nxt = self._steps.get(key)
        if nxt is None:
            with self._lock:
                nxt = self.dfa.walk_lightly(state, self.vocab.token_bytes(token_id))
                self._steps[key] = nxt
                if len(self._steps) > MAX_CACHED_STEPS:
                    del self._steps[next(iter(self._steps))]
        return nxt

    # -- budgets (docs/generation.md, "Budget") ------------------------------------------
    def completion_tokens(self, state: int) -> int:
        """A number of tokens that surely completes ``state``: the length of a token path
        to acceptance — a shortest completion segmented into the fewest tokens (masks allow
        any tokenization of a valid string). The next state along that path is credited
        with the rest of it (if less than its own), lazily, one step per lookup, so the
        budget's answers agree with one another: a state judged to fit in ``k`` tokens
        has a next token judged to fit in ``k - 1``."""
        hit = self._completion_tokens.get(state)
        if hit is not None and state not in self._completion_rests:
            return hit
        with self._lock:
            if hit is None:
                path = self._completion_path(state) if state != DEAD else None
                hit = self._completion_tokens[state] = INF if path is None else len(path)
                if path:
                    self._completion_rests[state] = tuple(path)
            rest = self._completion_rests.pop(state, None)
            if rest:
                nxt = self.dfa.walk_lightly(state, self.vocab.token_bytes(rest[0]))
                if nxt != DEAD and self._completion_tokens.get(nxt, INF) > len(rest) - 1:
                    self._completion_tokens[nxt] = len(rest) - 1
                    if len(rest) > 1:
                        self._completion_rests[nxt] = rest[1:]
        return hit

    def completion_witness(self, state: int) -> bytes | None:
        """The bytes of a completion of ``state`` that accepts — the one
        :meth:`completion_tokens` spells — (``None``: none)."""
        with self._lock:
            return self._completion_data(state) if state != DEAD else None

    @cached_property
    def _spelling(self) -> Spelling:
        """How shortest completions spell byte classes: with bytes that are tokens."""
        return _spelling(self.dfa.class_of_byte.astype(np.int64).tobytes(), self.dfa.n_classes,
                         self.vocab.single_byte_tokens)

    @cached_property
    def _bytes_are_tokens(self) -> bool:
        """Whether every byte a shortest completion may spell is a token by itself."""
        return self.dfa.spelled_bytes(self._spelling) <= self.vocab.single_byte_tokens

    def _completion_path(self, state: int) -> list[int] | None:
        """Tokens that take ``state`` to acceptance (``None``: none found)."""
        data = self._completion_data(state)
        return None if data is None else self.vocab.segment_fewest(data)

    def _witness(self, state: int) -> bytes | None:
        """A shortest string that takes ``state`` to acceptance by the automaton's
        distances (``None``: none)."""
        return self.dfa.completion_witness(state, self._spelling)

    def _completion_data(self, state: int) -> bytes | None:
        """A string that takes ``state`` to acceptance: the automaton's shortest
        completion, checked first when its distances are lower bounds only (a rule
        matched longest: ``else`` then ``A`` spells one name, not two); when it does not
        accept, a shortest one the automaton searches for (kept per state: the budget
        asks for its length and its tokens)."""
        dfa = self.dfa
        if dfa.completion_exact:
            return self._witness(state)
        if state in self._checked:
            return self._checked[state]
        data = self._witness(state)
        if data is not None and not dfa.witness_holds(data) and \
                not dfa.accepts_after(state, data):
            data = dfa.search_completion(state, self._spelling, WITNESS_SEARCH_STATES)
        self._checked[state] = data
        return data

    def _completion_fits_bytes(self, state: int, k: int) -> bool:
        """Whether a completion of ``state`` has at most ``k`` bytes (the automaton's
        distance where it is exact, else the length of a completion that accepts)."""
        if self.dfa.completion_bytes(state) > k:
            return False
        if self.dfa.completion_exact:
            return True
        with self._lock:
            data = self._completion_data(state)
        return data is not None and len(data) <= k

    def completes_within(self, state: int, k: int, search: BudgetSearch | None = None
                         ) -> bool:
        """Whether some sequence of at most ``k`` tokens takes ``state`` to acceptance.

        Yes when a shortest completion fits spelled a byte a token (when the byte the
        witness spells each class with is a token) or as its token path
        (:meth:`completion_tokens`). Otherwise, for the last ``BUDGET_SEARCH_TOKENS`` of
        a budget, when the path is at most ``BUDGET_SEARCH_SLACK`` tokens too long and
        tokens of the longest length could spell its bytes, an exact search over the
        states the allowed tokens lead to, ``search.states`` of them expanded at most;
        else (or past that) "no": the budget never lets a run into a dead end. Answers
        the search found without running out are kept for every later question."""
        if k < 0:
            return False
        if self._bytes_are_tokens and self._completion_fits_bytes(state, k):
            return True  # spelled a byte a token
        needed = self.completion_tokens(state)
        if needed <= k:
            return True
        if not 0 < k <= BUDGET_SEARCH_TOKENS or needed - k > BUDGET_SEARCH_SLACK or \
                self.dfa.completion_bytes(state) > k * self.vocab.max_token_bytes:
            return False
        key = (state, k)
        hit = self._within.get(key)
        if hit is not None:
            return hit
        search = search or BudgetSearch()
        hit = search.seen.get(key)
        if hit is not None:
            return hit
        search.seen[key] = hit = False
        if search.states <= 0:
            search.cut = True
            return False
        search.states -= 1
        for nxt in sorted(self._successors(state), key=self.dfa.completion_bytes):
            if self.completes_within(nxt, k - 1, search):
                search.seen[key] = hit = True
                break
        if hit or not search.cut:
            if len(self._within) >= MAX_CACHED_BUDGET_ANSWERS:
                self._within.clear()
            self._within[key] = hit
        return hit

    def budget_mask(self, state: int, k: int) -> np.ndarray:
        """The tokens of ``state``'s mask after which the text can be completed within
        ``k`` more tokens (end of generation kept: it completes). One walk of the class
        trie finds the states the allowed tokens end in; when one of them does not fit,
        a second walk finds the tokens that end in such a state, taken out."""
        plain = self.state_mask(state)
        unfit = [nxt for nxt in self._successors(state)
                 if not self.completes_within(nxt, k)]
        if not unfit:
            return plain
        with self._lock:
            flags = np.zeros(self.dfa.table.shape[0], dtype=np.bool_)
            flags[unfit] = True

            def flagged() -> np.ndarray:  # (covering every state, should the walk add any)
                extra = self.dfa.table.shape[0] - flags.size
                return np.concatenate([flags, np.zeros(extra, np.bool_)]) if extra else flags

            taken = self._walker.tokens_entering(state, flagged)
        return plain & ~taken

    def _successors(self, state: int) -> list[int]:
        """The states the tokens of ``state``'s mask end in (end of generation left out;
        kept for the last states asked: a budget asks again at every token of a string)."""
        with self._lock:
            hit = self._successors_of.get(state)
            if hit is not None:
                self._successors_of.move_to_end(state)
                return hit
            _, reached = self._walker.mask_and_successors(state)
            hit = self._successors_of[state] = [s for s in reached.tolist() if s != DEAD]
            self._successor_count += len(hit)
            if len(self._successors_of) > MAX_CACHED_SUCCESSORS:
                self._successor_count -= len(self._successors_of.popitem(last=False)[1])
        return hit

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


class BudgetSearch:
    """The work left to one budget question (or one budget mask), and what it found."""

    def __init__(self, states: int = BUDGET_SEARCH_STATES) -> None:
        self.states = states
        self.cut = False  # an expansion was refused: a "no" may be wrong
        self.seen: dict[tuple[int, int], bool] = {}


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

    def completes_after(self, token_id: int, k: int) -> bool:
        if self.vocab.is_eos(token_id):
            return True
        nxt = self.compiled.token_step(self._states[-1], token_id)
        return nxt != DEAD and self.compiled.completes_within(nxt, k)

    def budget_mask(self, k: int) -> np.ndarray:
        if self._stopped:
            return self.compiled._empty
        return self.compiled.budget_mask(self._states[-1], k)

    def completion_tokens(self) -> int:
        return 0 if self._stopped else self.compiled.completion_tokens(self._states[-1])

    def completion_witness(self) -> bytes | None:
        return b"" if self._stopped else self.compiled.completion_witness(self._states[-1])

    def _blank(self) -> RegularMatcher:
        return RegularMatcher(self.compiled)

    def _next_state(self, state: object, token_id: int, data: bytes) -> object:
        nxt = self.compiled.token_step(state, token_id)  # type: ignore[arg-type]
        return REJECT if nxt == DEAD else nxt


@lru_cache(maxsize=64)
def _spelling(class_of_byte: bytes, n_classes: int, usable: frozenset[int]) -> Spelling:
    """The spelling of byte classes, shared by every automaton with the same classes and
    vocabulary (every JSON Schema's: one class per byte)."""
    return Spelling(np.frombuffer(class_of_byte, dtype=np.int64), n_classes, usable)

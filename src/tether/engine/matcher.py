"""`Matcher`: the per-sequence state of one compiled constraint (SPEC §4).

A matcher answers, at each step, which tokens may come next (``mask``), advances on the
token the sampler picked (``consume``), and can go back (``rollback``) or branch
(``fork``). Masks are exact: token ``t`` is allowed iff some string of the language starts
with ``generated_bytes + bytes(t)``; end-of-generation tokens are allowed iff
``generated_bytes`` is in the language.

Concrete matchers (one per kind of automaton) subclass :class:`Matcher`; everything here
is expressed in terms of the few abstract methods they implement.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from tether.engine import bitmask
from tether.errors import ConstraintViolation, TetherError
from tether.vocab import Vocabulary
from tether.vocab.vocabulary import token_index

# Room (tokens beyond the shortest completion) past which mask_within() need not check
# tokens one by one: a heuristic, no single token opens that much more structure in
# practice (docs/generation.md, "Budget").
BUDGET_SLACK = 32


@dataclass(frozen=True)
class Forced:
    """What must come next whatever the model does.

    ``bytes`` is the longest byte string every continuation starts with (empty when the
    constraint is complete or several bytes are possible). ``tokens`` are the tokens that
    are, one after another, the only allowed token (end of generation excluded).
    """

    bytes: bytes
    tokens: tuple[int, ...]


class Matcher(ABC):
    """The state of one constraint over one generated sequence."""

    vocab: Vocabulary

    # -- what a concrete matcher implements --------------------------------------------
    @abstractmethod
    def mask(self) -> np.ndarray:
        """The Bitmask words of the tokens allowed next (treat as read-only)."""

    @abstractmethod
    def is_accepting(self) -> bool:
        """Whether the bytes generated so far are a complete string of the language."""

    @abstractmethod
    def is_finished(self) -> bool:
        """Accepting, and no non-empty continuation exists: only end of generation is left."""

    @abstractmethod
    def forced(self) -> Forced:
        """The forced continuation (jump-forward), see :class:`Forced`."""

    @abstractmethod
    def fork(self) -> Matcher:
        """An independent copy of this matcher (same state, separate future)."""

    @abstractmethod
    def _advance(self, token_id: int) -> bool:
        """Consume a non-special token; return False (state unchanged) if not allowed."""

    @abstractmethod
    def _retreat(self, n: int) -> None:
        """Undo the last ``n`` consumed tokens (``n`` already checked)."""

    @property
    @abstractmethod
    def generated_bytes(self) -> bytes:
        """The bytes of the tokens consumed so far (end of generation excluded)."""

    @property
    @abstractmethod
    def n_consumed(self) -> int:
        """Number of tokens consumed (and not rolled back)."""

    # -- the shared API -------------------------------------------------------------
    def eos_allowed(self) -> bool:
        """Whether an end-of-generation token may come next."""
        return self.is_accepting() and not self._stopped

    def allowed(self, token_id: int) -> bool:
        """Whether ``token_id`` may come next."""
        self.vocab.token_bytes(token_id)  # raises TokenIdError for a bad id
        return bitmask.is_allowed(self.mask(), token_id)

    def consume(self, token_id: int) -> None:
        """Advance on ``token_id``; raise :class:`ConstraintViolation` (state unchanged)
        if it is not allowed. An end-of-generation token stops the matcher."""
        token_id = token_index(token_id)
        if self._stopped:
            raise ConstraintViolation("the matcher has already consumed end of generation",
                                      token=token_id)
        if self.vocab.is_eos(token_id):
            if not self.is_accepting():
                raise ConstraintViolation(
                    f"end of generation (token {token_id}) is not allowed after "
                    f"{self.generated_bytes!r}", token=token_id)
            self._stopped = True
            return
        if self.vocab.is_special(token_id) or not self._advance(token_id):
            raise ConstraintViolation(
                f"token {token_id} ({self.vocab.token_bytes(token_id)!r}) is not allowed "
                f"after {self.generated_bytes!r}", token=token_id)

    def consume_many(self, token_ids: list[int]) -> None:
        """Consume several tokens; on a violation, those before it stay consumed."""
        for t in token_ids:
            self.consume(t)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` consumed tokens (an end of generation counts as one)."""
        if n < 0:
            raise TetherError(f"cannot roll back a negative number of tokens ({n})")
        if n == 0:
            return
        if self._stopped:
            self._stopped = False
            n -= 1
        if n > self.n_consumed:
            raise TetherError(f"cannot roll back {n} tokens: only {self.n_consumed} consumed")
        if n:
            self._retreat(n)

    def completes_within(self, k: int) -> bool:
        """Whether at most ``k`` more tokens can complete the text (end of generation not
        counted). Matchers that cannot tell say yes."""
        return True

    def completion_tokens(self) -> int:
        """A number of tokens that surely completes the text from here (0 if unknown)."""
        return 0

    def completion_witness(self) -> bytes | None:
        """The bytes of a completion :meth:`completion_tokens` counts (``None``: not
        known)."""
        return None

    def completes_after(self, token_id: int, k: int) -> bool:
        """Whether, after ``token_id``, at most ``k`` more tokens can complete the text
        (the token must be allowed; end of generation always completes)."""
        if self.vocab.is_eos(token_id):
            return True
        self.consume(token_id)
        try:
            return self.completes_within(k)
        finally:
            self.rollback(1)

    def budget_mask(self, k: int) -> np.ndarray:
        """The tokens of :meth:`mask` after which at most ``k`` more tokens can complete
        the text (end of generation included when allowed)."""
        words = self.mask().copy()
        for token in bitmask.to_ids(words, self.vocab.size).tolist():
            if not self.completes_after(token, k):
                words[token >> 5] &= ~np.uint32(1 << (token & 31))
        return words

    def mask_within(self, left: int) -> np.ndarray:
        """:meth:`mask` for a text that must be complete within ``left`` more tokens (end
        of generation not counted): :meth:`budget_mask` near the end of the budget, the
        plain mask while the shortest completion is more than ``BUDGET_SLACK`` tokens
        away from it; at ``left <= 0`` end of generation alone, if allowed."""
        if left <= 0:
            return self.mask() & bitmask.from_bool(self.vocab.end_of_generation)
        if self.completes_within(left - 1 - BUDGET_SLACK):
            return self.mask()
        return self.budget_mask(left - 1)

    def fill(self, out: np.ndarray, row: int = 0) -> None:
        """Write the mask into row ``row`` of a ``(batch, words)`` uint32 array."""
        out[row, :] = self.mask()

    @property
    def is_stopped(self) -> bool:
        """Whether an end-of-generation token was consumed."""
        return self._stopped

    _stopped: bool = False


REJECT = object()  # what StateStackMatcher._next_state returns for a disallowed token


class StateStackMatcher(Matcher):
    """A matcher whose position is one hashable automaton state per consumed token.

    Keeps the stack of states (the start state first) and the consumed tokens' bytes,
    which gives ``fork``, ``rollback`` and ``generated_bytes`` for free; a subclass
    implements the masks and :meth:`_next_state`.
    """

    def __init__(self, vocab: Vocabulary, start: object) -> None:
        self.vocab = vocab
        self._states: list = [start]
        self._pieces: list[bytes] = []

    @abstractmethod
    def _next_state(self, state: object, token_id: int, data: bytes) -> object:
        """The state after token ``token_id`` (whose bytes are ``data``), or
        :data:`REJECT` if it is not allowed."""

    @abstractmethod
    def _blank(self) -> StateStackMatcher:
        """A new matcher over the same compiled data (its stacks are then copied)."""

    @property
    def state(self) -> object:
        """The current automaton state."""
        return self._states[-1]

    def fork(self) -> StateStackMatcher:
        twin = self._blank()
        twin._states = list(self._states)
        twin._pieces = list(self._pieces)
        twin._stopped = self._stopped
        return twin

    @property
    def generated_bytes(self) -> bytes:
        return b"".join(self._pieces)

    @property
    def n_consumed(self) -> int:
        return len(self._pieces)

    def _advance(self, token_id: int) -> bool:
        data = self.vocab.token_bytes(token_id)
        state = self._next_state(self._states[-1], token_id, data)
        if state is REJECT:
            return False
        self._states.append(state)
        self._pieces.append(data)
        return True

    def _retreat(self, n: int) -> None:
        del self._states[-n:]
        del self._pieces[-n:]

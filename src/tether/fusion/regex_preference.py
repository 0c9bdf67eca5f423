"""`RegexPreference`: a soft domain that prefers text in a regular language — tokens a
compiled constraint's matcher allows get ``+score`` (or a penalty, if negative), the
others no opinion.

The scorer follows the text with its own matcher. Once the text leaves the language
(a preference, unlike a hard domain, does not stop it) the scorer has nothing left to
say and gives no opinion until a rollback returns to where it could follow.
"""

from __future__ import annotations

from tether.engine.compiled import Compiled
from tether.engine.matcher import Matcher
from tether.errors import ConstraintViolation
from tether.fusion.soft import SoftScore


class RegexPreference:
    """``+score`` for the tokens ``compiled`` allows next, 0 for the others."""

    def __init__(self, compiled: Compiled, score: float = 1.0, weight: float = 1.0) -> None:
        self._matcher: Matcher = compiled.matcher()
        self._score = score
        self._weight = weight
        self._consumed = 0  # tokens seen
        self._left_at: int | None = None  # how many tokens were seen when the text left

    def scores(self, generated: bytes) -> SoftScore | None:
        """The preference for the next token (``None`` once the text has left)."""
        if self._left_at is not None:
            return None
        return SoftScore.from_mask(self._matcher.mask(), self._score, self._weight)

    def consume(self, token_id: int) -> None:
        """Follow the token, or note that the text left the language."""
        if self._left_at is None:
            try:
                self._matcher.consume(token_id)
            except ConstraintViolation:
                self._left_at = self._consumed
        self._consumed += 1

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens."""
        if not 0 <= n <= self._consumed:
            raise ValueError(f"cannot roll back {n} tokens: {self._consumed} consumed")
        followed = self._consumed if self._left_at is None else self._left_at
        self._consumed -= n
        if self._left_at is not None and self._left_at >= self._consumed:
            self._left_at = None
        self._matcher.rollback(followed - min(followed, self._consumed))

    def fork(self) -> RegexPreference:
        """An independent copy."""
        twin = object.__new__(RegexPreference)
        twin.__dict__.update(self.__dict__)
        twin._matcher = self._matcher.fork()
        return twin

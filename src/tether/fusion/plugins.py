"""What a domain plug-in is: the two interfaces :class:`~tether.fusion.DomainSet` drives.

A hard domain is anything with the Matcher interface (every compiled constraint's
``matcher()`` is one); a soft domain is anything with the Scorer interface. Either may
also offer an ``exhaustive_mask()`` / ``exhaustive_scores(generated)`` variant with its
slow checks, which the ``EXHAUSTIVE`` intensity uses instead.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from tether.fusion.soft import SoftScore


@runtime_checkable
class HardDomain(Protocol):
    """A Bitmask per step; follows the generated tokens (the Matcher interface)."""

    def mask(self) -> np.ndarray:
        """The Bitmask words of the tokens allowed next."""

    def consume(self, token_id: int) -> None:
        """Advance on a token (raise ``ConstraintViolation``, state unchanged, if it is
        not allowed)."""

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` consumed tokens."""

    def fork(self) -> HardDomain:
        """An independent copy."""


@runtime_checkable
class Scorer(Protocol):
    """Scores in [-1, 1] by token id per step (``None``: no opinion this step)."""

    def scores(self, generated: bytes) -> SoftScore | None:
        """The scores of the next token, given the bytes generated so far."""

    def consume(self, token_id: int) -> None:
        """Advance on a token (a scorer never rejects one)."""

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` consumed tokens."""

    def fork(self) -> Scorer:
        """An independent copy."""

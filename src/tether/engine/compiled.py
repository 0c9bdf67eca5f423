"""`Compiled`: a constraint compiled for one vocabulary — immutable to its users, shared
across matchers and requests (SPEC §1).

Concrete engines subclass it; :func:`tether.compile` builds and caches them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from tether.engine.matcher import Matcher
from tether.vocab import Vocabulary


@dataclass(frozen=True)
class CheckResult:
    """Whether a text satisfies a constraint; if not, how far it stays viable.

    ``valid_prefix`` is the length in bytes of the longest prefix of the text that some
    string of the language starts with (the whole text when ``matches`` is True).
    On a mismatch, ``expected`` holds the bytes that could come next at that point and
    ``context`` says where in the constraint the text was (grammar rules with their
    ``line:column``, or a schema's JSON pointers), when the engine knows.
    """

    matches: bool
    valid_prefix: int
    expected: bytes = b""
    context: tuple[str, ...] = ()


class Compiled(ABC):
    """A constraint compiled for a vocabulary."""

    vocab: Vocabulary
    constraint: Any

    @abstractmethod
    def matcher(self) -> Matcher:
        """A fresh matcher at the start of the constraint."""

    @abstractmethod
    def check(self, text: str | bytes) -> CheckResult:
        """Check a complete text against the constraint (independent of tokenization)."""

    @property
    def saturated(self) -> bool:
        """Whether the compiled form has grown close to its bounds (an automaton built on
        demand); :func:`tether.compile` then builds a fresh one for new requests while
        the matchers already running keep this one."""
        return False

    @property
    def held_bytes(self) -> int:
        """About how much memory the per-state data cached so far holds (masks, automaton
        tables); :func:`tether.compile`'s cache is bounded by the sum of these."""
        return 0

    @property
    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Figures about the compiled form (states, compile time, cached masks…)."""

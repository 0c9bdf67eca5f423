"""The typed errors of fusion: a bad configuration (naming the field and its JSON
pointer) and a step where no token survives (carrying every domain's state)."""

from __future__ import annotations

from tether.errors import CompileError, NoLegalContinuation
from tether.fusion.domains import Domain, Phase


class FusionConfigError(CompileError):
    """A fusion configuration or ``constraint_spec`` is malformed.

    ``field`` is the offending key; ``location`` its JSON pointer (``/soft_temperature``,
    ``/delimiters/fence_open``).
    """

    def __init__(self, message: str, *, pointer: str) -> None:
        self.field = pointer.rsplit("/", 1)[-1]
        super().__init__(message, location=pointer)


class FusionInfeasible(NoLegalContinuation):
    """No token satisfies the hard domains, even after relaxation (or relaxation is off).

    ``allowed`` holds, for every hard domain consulted, how many tokens its own mask
    allows; ``dropped`` the domains the cascade dropped before giving up; ``soft`` the
    soft domains that were active. An empty Syntax mask means a grammar dead end or a
    bug upstream.
    """

    def __init__(self, allowed: dict[Domain, int], dropped: list[Domain],
                 soft: list[Domain], phase: Phase) -> None:
        self.allowed = dict(allowed)
        self.dropped = list(dropped)
        self.soft = list(soft)
        self.phase = phase
        counts = ", ".join(f"{d.value} allows {n}" for d, n in self.allowed.items())
        relaxed = (f"; dropped {', '.join(d.value for d in self.dropped)} first"
                   if self.dropped else "")
        super().__init__(f"no token satisfies every hard domain ({counts}){relaxed}")

"""The vocabulary of fusion (SPEC §7): the five domains, the generation phases, the
intensity levels, and which domains a level and a phase switch on.

Three domains are hard (a Bitmask per step: Syntax, Types, Imports), two are soft (a
score per token: ControlFlow, Semantics). An intensity level names a set of domains and a
per-token time budget; a phase (after CRANE) switches the expensive domains off while
the model reasons in prose.
"""

from __future__ import annotations

from enum import Enum


class Domain(Enum):
    """One constraint domain. Hard domains mask tokens; soft ones score them."""

    SYNTAX = "syntax"
    TYPES = "types"
    IMPORTS = "imports"
    CONTROL_FLOW = "control_flow"
    SEMANTICS = "semantics"

    # Members are singletons: identity hashing keeps per-token dict lookups cheap.
    __hash__ = object.__hash__

    @property
    def is_hard(self) -> bool:
        """True for Syntax, Types and Imports (Bitmask domains)."""
        return self in HARD_DOMAINS


HARD_DOMAINS: tuple[Domain, ...] = (Domain.SYNTAX, Domain.TYPES, Domain.IMPORTS)
SOFT_DOMAINS: tuple[Domain, ...] = (Domain.CONTROL_FLOW, Domain.SEMANTICS)
ALL_DOMAINS: tuple[Domain, ...] = HARD_DOMAINS + SOFT_DOMAINS

# The relaxation cascade drops these, in this order, when the intersection is empty.
RELAXATION_ORDER: tuple[Domain, ...] = (Domain.IMPORTS, Domain.TYPES)
# ``on_budget="relax"`` skips these, in this order, when a step would run over budget.
BUDGET_SKIP_ORDER: tuple[Domain, ...] = (
    Domain.SEMANTICS, Domain.CONTROL_FLOW, Domain.IMPORTS, Domain.TYPES)


class Phase(Enum):
    """Where the generation is: reasoning in prose, emitting the structured part, or at
    the delimiter between them (which behaves as structured output)."""

    REASONING = "reasoning"
    STRUCTURED_OUTPUT = "structured_output"
    TRANSITION = "transition"

    __hash__ = object.__hash__


class IntensityLevel(Enum):
    """How much checking a step gets: a set of domains and a time budget per token.

    ``NONE`` means *unconstrained* (no domain at all). ``FULL`` and ``EXHAUSTIVE``
    switch on the same domains; ``EXHAUSTIVE`` has a larger budget and also runs the
    slow checks a domain offers.
    """

    NONE = "none"
    SYNTAX_ONLY = "syntax_only"
    STANDARD = "standard"
    FULL_HARD = "full_hard"
    FULL = "full"
    EXHAUSTIVE = "exhaustive"

    @property
    def domains(self) -> frozenset[Domain]:
        """The domains this level switches on."""
        return _LEVELS[self][0]

    @property
    def budget_us(self) -> int:
        """The time budget per token, in microseconds, for all domains together."""
        return _LEVELS[self][1]


_LEVELS: dict[IntensityLevel, tuple[frozenset[Domain], int]] = {
    IntensityLevel.NONE: (frozenset(), 0),
    IntensityLevel.SYNTAX_ONLY: (frozenset({Domain.SYNTAX}), 50),
    IntensityLevel.STANDARD: (frozenset({Domain.SYNTAX, Domain.TYPES}), 200),
    IntensityLevel.FULL_HARD: (frozenset(HARD_DOMAINS), 500),
    IntensityLevel.FULL: (frozenset(ALL_DOMAINS), 2_000),
    IntensityLevel.EXHAUSTIVE: (frozenset(ALL_DOMAINS), 5_000),
}


def effective_phase(phase: Phase, adaptive_switching: bool) -> Phase:
    """The phase fusion acts on: with adaptive switching off it is always
    ``STRUCTURED_OUTPUT``; ``TRANSITION`` acts as ``STRUCTURED_OUTPUT``."""
    if adaptive_switching and phase is Phase.REASONING:
        return Phase.REASONING
    return Phase.STRUCTURED_OUTPUT


def select_domains(intensity: IntensityLevel, phase: Phase = Phase.STRUCTURED_OUTPUT,
                   adaptive_switching: bool = True) -> frozenset[Domain]:
    """The domains a step consults (SPEC §7): none at ``NONE``; only Syntax (the
    reasoning-phase language) while reasoning; otherwise the level's domains."""
    if intensity is IntensityLevel.NONE:
        return frozenset()
    if effective_phase(phase, adaptive_switching) is Phase.REASONING:
        return frozenset({Domain.SYNTAX})
    return intensity.domains

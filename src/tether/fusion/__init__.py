"""Domain fusion (SPEC §7): several constraint domains, one decision per token.

Hard domains (Syntax, Types, Imports) give Bitmasks, soft ones (ControlFlow, Semantics)
give scores by token id; :func:`fuse` intersects the masks in one pass (with the
relaxation cascade) and adds the scores in one step. :class:`DomainSet` drives plug-in
domains step by step, timed against the intensity's budget; :class:`PhaseDetector`
tells reasoning from structured output. Domains ready to plug in: any compiled
constraint's matcher, :func:`forbid_words`, :class:`LexiconScorer`,
:class:`RegexPreference`; :func:`parse_constraint_spec` reads a server's
``constraint_spec``.
"""

from tether.fusion.config import Delimiters, FusionConfig
from tether.fusion.constraint_spec import ConstraintSpec, parse_constraint_spec
from tether.fusion.domain_set import DomainSet, StepReport
from tether.fusion.domains import Domain, IntensityLevel, Phase, select_domains
from tether.fusion.errors import FusionConfigError, FusionInfeasible
from tether.fusion.forbid import ForbiddenWordsMatcher, forbid_words
from tether.fusion.fuse import fuse
from tether.fusion.lexicon import LexiconScorer
from tether.fusion.phase import PhaseDetector
from tether.fusion.plugins import HardDomain, Scorer
from tether.fusion.regex_preference import RegexPreference
from tether.fusion.result import FusionResult
from tether.fusion.soft import SoftScore

__all__ = [
    "ConstraintSpec",
    "Delimiters",
    "Domain",
    "DomainSet",
    "ForbiddenWordsMatcher",
    "FusionConfig",
    "FusionConfigError",
    "FusionInfeasible",
    "FusionResult",
    "HardDomain",
    "IntensityLevel",
    "LexiconScorer",
    "Phase",
    "PhaseDetector",
    "RegexPreference",
    "Scorer",
    "SoftScore",
    "StepReport",
    "forbid_words",
    "fuse",
    "parse_constraint_spec",
    "select_domains",
]

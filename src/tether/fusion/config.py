"""`FusionConfig`: what a step of fusion does (SPEC §7), validated, and its JSON form —
the ``constraint_spec`` a server accepts.

Every malformed value is a :class:`FusionConfigError` naming the field and its JSON
pointer; so is an unknown key when reading JSON. Domain and level names in JSON are the
enum values (``"standard"``, ``"control_flow"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from numbers import Real
from typing import Any

from tether.automata.regex_parser import parse_regex
from tether.errors import CompileError
from tether.fusion.domains import Domain, IntensityLevel, Phase, select_domains
from tether.fusion.errors import FusionConfigError

ON_BUDGET = ("report", "relax")
DEFAULT_FENCE = r"```[A-Za-z0-9_+.-]*[ \t]*\r?\n"
_DOMAIN_ALIASES = {"controlflow": Domain.CONTROL_FLOW, "control-flow": Domain.CONTROL_FLOW}


@dataclass(frozen=True)
class Delimiters:
    """The delimiters the phase detector looks for (regexes, tether's regex syntax;
    ``None`` switches one off).

    ``fence_open`` opens the structured part from prose (a code fence line);
    ``think_open``/``think_close`` bracket reasoning, and ``think_close`` opens the
    structured part; ``reasoning_prefix``, when set, is what the output must start with
    to count as reasoning (``None``: the output starts as reasoning).
    """

    fence_open: str | None = DEFAULT_FENCE
    think_open: str | None = "<think>"
    think_close: str | None = "</think>"
    reasoning_prefix: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            check_pattern(getattr(self, f.name), f"/{f.name}")


@dataclass(frozen=True)
class FusionConfig:
    """The knobs of fusion. ``intensity`` and the domain lists may be given as names."""

    intensity: IntensityLevel = IntensityLevel.STANDARD
    control_flow_weight: float = 1.0
    semantics_weight: float = 1.0
    adaptive_switching: bool = True
    soft_temperature: float = 1.0
    allow_relaxation: bool = True
    on_budget: str = "report"
    enabled_domains: frozenset[Domain] | None = None
    disabled_domains: frozenset[Domain] = frozenset()
    delimiters: Delimiters = field(default_factory=Delimiters)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "intensity", _intensity(self.intensity, "/intensity"))
        for name in ("control_flow_weight", "semantics_weight", "soft_temperature"):
            set_(self, name, _real(getattr(self, name), f"/{name}"))
        if self.soft_temperature <= 0:
            raise FusionConfigError(
                f"soft_temperature must be > 0, not {self.soft_temperature}",
                pointer="/soft_temperature")
        for name in ("adaptive_switching", "allow_relaxation"):
            if not isinstance(getattr(self, name), bool):
                raise FusionConfigError(f"{name} must be true or false", pointer=f"/{name}")
        if self.on_budget not in ON_BUDGET:
            raise FusionConfigError(f"on_budget must be one of {ON_BUDGET}, not "
                                    f"{self.on_budget!r}", pointer="/on_budget")
        if self.enabled_domains is not None:
            set_(self, "enabled_domains", _domains(self.enabled_domains, "/enabled_domains"))
            if Domain.SYNTAX not in self.enabled_domains:
                raise FusionConfigError("enabled_domains must include syntax (intensity "
                                        "none is how to switch everything off)",
                                        pointer="/enabled_domains")
        set_(self, "disabled_domains", _domains(self.disabled_domains, "/disabled_domains"))
        if Domain.SYNTAX in self.disabled_domains:
            raise FusionConfigError("syntax cannot be disabled (intensity none is how to "
                                    "switch everything off)", pointer="/disabled_domains")
        if not isinstance(self.delimiters, Delimiters):
            raise FusionConfigError("delimiters must be a Delimiters", pointer="/delimiters")
        set_(self, "_by_phase", {p: self._domains_for(p) for p in Phase})
        set_(self, "_soft_factor", {
            Domain.CONTROL_FLOW: self.control_flow_weight / self.soft_temperature,
            Domain.SEMANTICS: self.semantics_weight / self.soft_temperature})

    # -- what a step uses ----------------------------------------------------------------
    def domains_for(self, phase: Phase) -> frozenset[Domain]:
        """The domains a step in ``phase`` consults: the intensity's (or the reasoning
        phase's), narrowed by ``enabled_domains`` and ``disabled_domains``."""
        return self._by_phase[phase]

    def _domains_for(self, phase: Phase) -> frozenset[Domain]:
        chosen = select_domains(self.intensity, phase, self.adaptive_switching)
        if self.enabled_domains is not None:
            chosen &= self.enabled_domains
        return chosen - self.disabled_domains

    def soft_factor(self, domain: Domain) -> float:
        """``config_weight_d / soft_temperature`` for a soft domain."""
        return self._soft_factor[domain]

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (names for enums, lists for sets)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["intensity"] = self.intensity.value
        out["enabled_domains"] = (None if self.enabled_domains is None
                                  else _domain_names(self.enabled_domains))
        out["disabled_domains"] = _domain_names(self.disabled_domains)
        out["delimiters"] = asdict(self.delimiters)
        return out

    def to_json(self) -> str:
        """The configuration as a JSON object (see :meth:`from_json`)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FusionConfig:
        """Build from a dict; unknown keys and bad values are errors naming their pointer."""
        if not isinstance(data, Mapping):
            raise FusionConfigError("a fusion config must be a JSON object", pointer="/")
        _reject_unknown(data, cls, "")
        values = dict(data)
        if "delimiters" in values:
            values["delimiters"] = _delimiters(values["delimiters"], "/delimiters")
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> FusionConfig:
        """Parse :meth:`to_json`'s output (or any subset of its keys)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise FusionConfigError(f"invalid JSON at line {e.lineno}, column {e.colno}: "
                                    f"{e.msg}", pointer="/") from None
        except RecursionError:
            raise FusionConfigError("the JSON nests too deeply", pointer="/") from None
        return cls.from_dict(data)


# -- validation helpers ------------------------------------------------------------------
def _reject_unknown(data: Mapping[str, Any], cls: type, pointer: str) -> None:
    known = {f.name for f in fields(cls)}
    for key in data:
        if key not in known:
            raise FusionConfigError(f"unknown key {key!r} (known: {', '.join(sorted(known))})",
                                    pointer=f"{pointer}/{key}")


def _delimiters(value: Any, pointer: str) -> Delimiters:
    if isinstance(value, Delimiters):
        return value
    if not isinstance(value, Mapping):
        raise FusionConfigError("delimiters must be a JSON object", pointer=pointer)
    _reject_unknown(value, Delimiters, pointer)
    try:
        return Delimiters(**value)
    except FusionConfigError as e:
        raise FusionConfigError(e.message, pointer=pointer + str(e.location)) from None


def _intensity(value: Any, pointer: str) -> IntensityLevel:
    if isinstance(value, IntensityLevel):
        return value
    if isinstance(value, str):
        for level in IntensityLevel:
            if value.lower() == level.value:
                return level
    names = ", ".join(level.value for level in IntensityLevel)
    raise FusionConfigError(f"unknown intensity {value!r} (one of {names})", pointer=pointer)


def _real(value: Any, pointer: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise FusionConfigError(f"{pointer[1:]} must be a finite number, not {value!r}",
                                pointer=pointer)
    return float(value)


def parse_domain(value: Any, pointer: str) -> Domain:
    """A :class:`Domain` from itself or its name (``"control_flow"``, ``"controlflow"``)."""
    if isinstance(value, Domain):
        return value
    if isinstance(value, str):
        name = value.lower()
        for d in Domain:
            if name == d.value:
                return d
        if name in _DOMAIN_ALIASES:
            return _DOMAIN_ALIASES[name]
    names = ", ".join(d.value for d in Domain)
    raise FusionConfigError(f"unknown domain {value!r} (one of {names})", pointer=pointer)


def _domains(values: Any, pointer: str) -> frozenset[Domain]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise FusionConfigError(f"{pointer[1:]} must be a list of domain names",
                                pointer=pointer)
    return frozenset(parse_domain(v, f"{pointer}/{i}") for i, v in enumerate(values))


def _domain_names(domains: frozenset[Domain]) -> list[str]:
    return [d.value for d in Domain if d in domains]


def check_pattern(pattern: Any, pointer: str) -> None:
    """Raise unless ``pattern`` is ``None`` or a regex tether can parse."""
    if pattern is None:
        return
    if not isinstance(pattern, str):
        raise FusionConfigError(f"{pointer[1:]} must be a regex string or null",
                                pointer=pointer)
    try:
        parse_regex(pattern)
    except CompileError as e:
        raise FusionConfigError(f"bad regex {pattern!r}: {e}", pointer=pointer) from None

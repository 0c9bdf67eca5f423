"""`parse_constraint_spec`: read a server's ``constraint_spec`` — the JSON of a
:class:`~tether.fusion.FusionConfig`, plus the keys of the public Ananke
``ConstraintSpec`` that map onto tether.

Mapped now: ``regex`` (the Syntax domain), ``intensity``, ``enabled_domains``,
``disabled_domains``, ``allow_relaxation``. The other Ananke keys are rejected, by name,
as not supported yet (a ``null`` value counts as absent); any other key is an unknown
key. Errors are :class:`~tether.fusion.FusionConfigError` with the key's JSON pointer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tether.constraints import Regex
from tether.fusion.config import FusionConfig, check_pattern
from tether.fusion.errors import FusionConfigError

NOT_SUPPORTED_YET = ("json_schema", "ebnf", "language", "imports", "available_modules",
                     "forbidden_imports", "type_bindings", "function_signatures",
                     "expected_type")
_SHARED = ("intensity", "enabled_domains", "disabled_domains", "allow_relaxation")


@dataclass(frozen=True)
class ConstraintSpec:
    """A parsed ``constraint_spec``: the fusion config and the Syntax constraint it
    names (``None`` if it names none)."""

    config: FusionConfig
    syntax: Regex | None = None


def parse_constraint_spec(spec: str | Mapping[str, Any]) -> ConstraintSpec:
    """Parse a ``constraint_spec`` given as JSON text or as a dict."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise FusionConfigError(f"invalid JSON at line {e.lineno}, column {e.colno}: "
                                    f"{e.msg}", pointer="/") from None
        except RecursionError:
            raise FusionConfigError("the JSON nests too deeply", pointer="/") from None
    if not isinstance(spec, Mapping):
        raise FusionConfigError("a constraint_spec must be a JSON object", pointer="/")
    for key in NOT_SUPPORTED_YET:
        if spec.get(key) is not None:
            raise FusionConfigError(f"{key!r} is an Ananke ConstraintSpec key tether does "
                                    "not support yet", pointer=f"/{key}")
    values = {k: v for k, v in spec.items()
              if k not in NOT_SUPPORTED_YET and k != "regex" and
              not (k in _SHARED and v is None)}
    return ConstraintSpec(FusionConfig.from_dict(values), _regex(spec.get("regex")))


def _regex(pattern: Any) -> Regex | None:
    if pattern is None:
        return None
    check_pattern(pattern, "/regex")
    return Regex(pattern)

"""`parse_constraint_spec`: read a server's ``constraint_spec`` — the JSON of a
:class:`~tether.fusion.FusionConfig`, plus the keys of the public Ananke
``ConstraintSpec`` that map onto tether.

Mapped now: ``regex`` (the Syntax domain), ``language`` (``"python"`` or
``"python-fenced"``: the Syntax domain is :func:`tether.grammars.python`, and the code
domains join in, docs/code-domains.md), ``imports`` (import statements or module names
already in effect: their names are in reach), ``available_modules`` (the only modules
``import`` may name), ``forbidden_imports`` (modules never to import), ``intensity``,
``enabled_domains``, ``disabled_domains``, ``allow_relaxation``. The other Ananke keys are
rejected, by name, as not supported yet (a ``null`` value counts as absent); any other key
is an unknown key. Errors are :class:`~tether.fusion.FusionConfigError` with the key's
JSON pointer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tether.constraints import Regex
from tether.fusion.config import FusionConfig, check_pattern
from tether.fusion.errors import FusionConfigError

NOT_SUPPORTED_YET = ("json_schema", "ebnf", "type_bindings", "function_signatures",
                     "expected_type")
LANGUAGES = ("python", "python-fenced")
_CODE_KEYS = ("language", "imports", "available_modules", "forbidden_imports")
_SHARED = ("intensity", "enabled_domains", "disabled_domains", "allow_relaxation")


@dataclass(frozen=True)
class ConstraintSpec:
    """A parsed ``constraint_spec``: the fusion config, the Syntax constraint it names
    (``None`` if it names none) and, for code, the language and what is in reach."""

    config: FusionConfig
    syntax: Regex | None = None
    language: str | None = None
    imports: tuple[str, ...] = ()  # import statements in effect
    available_modules: tuple[str, ...] | None = None
    forbidden_imports: tuple[str, ...] = ()

    @property
    def import_source(self) -> str:
        """``imports`` as Python source."""
        return "".join(line + "\n" for line in self.imports)


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
              if k not in NOT_SUPPORTED_YET and k not in _CODE_KEYS and k != "regex" and
              not (k in _SHARED and v is None)}
    language = spec.get("language")
    if language is not None and language not in LANGUAGES:
        raise FusionConfigError(f"language must be one of {', '.join(LANGUAGES)}, not "
                                f"{language!r}", pointer="/language")
    syntax = _regex(spec.get("regex"))
    if language is not None and syntax is not None:
        raise FusionConfigError("give a regex or a language, not both", pointer="/language")
    available = spec.get("available_modules")
    return ConstraintSpec(
        FusionConfig.from_dict(values), syntax, language,
        tuple(_import_line(v, f"/imports/{i}")
              for i, v in enumerate(_strings(spec.get("imports"), "/imports"))),
        None if available is None else tuple(_modules(available, "/available_modules")),
        tuple(_modules(spec.get("forbidden_imports"), "/forbidden_imports")))


def _regex(pattern: Any) -> Regex | None:
    if pattern is None:
        return None
    check_pattern(pattern, "/regex")
    return Regex(pattern)


def _strings(value: Any, pointer: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FusionConfigError(f"{pointer[1:]} must be a list of strings", pointer=pointer)
    return value


def _modules(value: Any, pointer: str) -> list[str]:
    names = _strings(value, pointer)
    for i, name in enumerate(names):
        if not all(part.isidentifier() for part in name.split(".")):
            raise FusionConfigError(f"{name!r} is not a module name",
                                    pointer=f"{pointer}/{i}")
    return names


def _import_line(value: str, pointer: str) -> str:
    """An import statement (``import m``, ``from m import a``), or a module name made
    one."""
    text = value.strip()
    if text.startswith(("import ", "from ")) and "\n" not in text:
        return text
    if all(part.isidentifier() for part in text.split(".")) and text:
        return f"import {text}"
    raise FusionConfigError(f"{value!r} is neither an import statement nor a module name",
                            pointer=pointer)

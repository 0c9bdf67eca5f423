"""The constraint sources a user can compile (SPEC §3).

These are plain, hashable descriptions; :func:`tether.compile` turns one into a
:class:`~tether.engine.compiled.Compiled` for a given vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tether import json_input
from tether.errors import CompileError


@dataclass(frozen=True)
class Regex:
    """Text that fully matches ``pattern`` (Python ``re`` syntax, over UTF-8 bytes).

    ``dotall=True`` lets ``.`` match a newline too, as ``re.DOTALL`` does.
    ``\\d \\w \\s`` are ASCII unless ``unicode=True`` (or ``(?u)`` in the pattern);
    docs/regex.md.
    """

    pattern: str
    dotall: bool = False
    unicode: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise CompileError(f"a regex pattern must be a str, not {type(self.pattern).__name__}")


@dataclass(frozen=True)
class Choices:
    """Exactly one of the given strings."""

    options: tuple[str, ...]

    def __init__(self, options: Iterable[str]) -> None:
        if isinstance(options, str | bytes):
            raise CompileError("Choices takes a list of options, not one string "
                               f"(Choices([{options!r}]) for that one option)")
        opts = tuple(options)
        if not opts:
            raise CompileError("Choices needs at least one option")
        for i, o in enumerate(opts):
            if not isinstance(o, str):
                raise CompileError(f"choice {i} must be a str, not {type(o).__name__}",
                                   location=f"/{i}")
            if not o:
                raise CompileError(f"choice {i} is empty", location=f"/{i}")
        object.__setattr__(self, "options", opts)


WHITESPACE_DEFAULT_MAX = 16  # longest run of blanks between JSON elements, by default


@dataclass(frozen=True)
class JsonSchema:
    """JSON text that validates against a JSON Schema (draft-07 or 2020-12, SPEC §5).

    ``schema`` is a dict (or its JSON text). Options:

    - ``whitespace``: ``"default"`` allows JSON whitespace between elements in runs of at
      most ``max_whitespace`` characters (so a model cannot loop on blanks); ``"compact"``
      allows none.
    - ``property_order``: ``"any"`` (the default): an object's properties in any order,
      each at most once — JSON gives member order no meaning, and real data (MaskBench
      instances) lists keys in neither the schema's nor ``required``'s order; ``"schema"``:
      in the order the schema lists them, or required ones first in the order
      ``required`` lists them. Generation still writes schema order by preference
      (:func:`tether.generate`).
    - ``strict``: an unsupported keyword is a :class:`CompileError` naming it and its JSON
      pointer (default); ``strict=False`` ignores it with a warning.
    - ``registry``: schemas for external ``$ref`` URIs (nothing is fetched).
    - ``formats``: ``"assert"`` (the default) enforces ``format`` on strings (a generated
      ``date`` is a date); ``"annotate"`` ignores it, as JSON Schema 2020-12 does by
      default (and its test suite expects).
    - ``distinct_keys``: no object has the same key twice (JSON allows it; most
      consumers do not). Declared properties come once anyway; this also keeps keys that
      patterns or ``additionalProperties`` allow apart. Off by default (the schema's
      meaning); the generation policy turns it on (docs/json-schema.md).

    The schema is kept as JSON text so the constraint is hashable (compile cache key).
    """

    schema_json: str
    whitespace: Literal["default", "compact"] = "default"
    max_whitespace: int = WHITESPACE_DEFAULT_MAX
    property_order: Literal["schema", "any"] = "any"
    strict: bool = True
    registry_json: str = "{}"
    formats: Literal["assert", "annotate"] = "assert"
    distinct_keys: bool = False

    def __init__(self, schema: Any, *, whitespace: Literal["default", "compact"] = "default",
                 max_whitespace: int = WHITESPACE_DEFAULT_MAX,
                 property_order: Literal["schema", "any"] = "any", strict: bool = True,
                 registry: Mapping[str, Any] | None = None,
                 formats: Literal["assert", "annotate"] = "assert",
                 distinct_keys: bool = False) -> None:
        if isinstance(schema, str):
            schema = json_input.parse(schema, "the schema")
        if not isinstance(schema, dict | bool):
            raise CompileError(f"a schema must be an object or a boolean, not "
                               f"{type(schema).__name__}", location="")
        if whitespace not in ("default", "compact"):
            raise CompileError(f"whitespace must be 'default' or 'compact', not {whitespace!r}")
        if property_order not in ("schema", "any"):
            raise CompileError(
                f"property_order must be 'schema' or 'any', not {property_order!r}")
        if formats not in ("assert", "annotate"):
            raise CompileError(f"formats must be 'assert' or 'annotate', not {formats!r}")
        if not isinstance(max_whitespace, int) or max_whitespace < 0:
            raise CompileError(f"max_whitespace must be an int >= 0, not {max_whitespace!r}")
        object.__setattr__(self, "schema_json", json_input.dump(schema, "the schema"))
        object.__setattr__(self, "whitespace", whitespace)
        object.__setattr__(self, "max_whitespace", max_whitespace)
        object.__setattr__(self, "property_order", property_order)
        object.__setattr__(self, "strict", bool(strict))
        object.__setattr__(self, "formats", formats)
        object.__setattr__(self, "distinct_keys", bool(distinct_keys))
        object.__setattr__(self, "registry_json",
                           json_input.dump(dict(registry or {}), "the registry"))

    @property
    def schema(self) -> Any:
        """The schema, as a fresh Python object."""
        return json.loads(self.schema_json)

    @property
    def registry(self) -> dict[str, Any]:
        """The external schemas by URI."""
        return json.loads(self.registry_json)

    @classmethod
    def from_pydantic(cls, model: Any, **options: Any) -> JsonSchema:
        """The constraint of a pydantic model class (its ``model_json_schema()``)."""
        to_schema = getattr(model, "model_json_schema", None)
        if to_schema is None:
            raise CompileError(f"{model!r} is not a pydantic model class "
                               "(it has no model_json_schema())")
        return cls(to_schema(), **options)


@dataclass(frozen=True)
class Grammar:
    """Text derived by a context-free grammar written in GBNF or Lark (SPEC §6).

    ``start`` names the start rule (default: ``root`` for GBNF, ``start`` for Lark).
    ``indent`` (Lark only) turns on the layout markers of
    :mod:`tether.grammar.layout` (``_line``, ``_indent``/``_dedent``,
    ``_open``/``_close``) with this indentation unit, blocks at most ``max_depth`` deep.
    ``longest`` names rules (in Lark, terminals) matched longest, as a lexer would: such a
    rule never ends right before a byte it could go on with, so ``NAME NAME`` cannot read
    ``ab`` as ``a`` then ``b`` — what keeps a grammar without a lexer from splitting
    identifiers everywhere. ``language`` names the programming language the grammar
    derives (``"python"`` for :func:`tether.grammars.python`): fusion then adds that
    language's code domains (docs/code-domains.md). ``warm_up`` is a text of the
    language that compiling walks token by token, as far as the grammar takes it: the
    pieces masks are composed from, shared by every text, are then ready before the first
    request (docs/grammars.md, "Warm-up"); it changes no mask.
    """

    text: str
    syntax: Literal["gbnf", "lark"] = "gbnf"
    start: str | None = None
    indent: str | None = None
    max_depth: int = 16
    longest: tuple[str, ...] = ()
    language: str | None = None
    warm_up: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise CompileError(f"a grammar must be a str, not {type(self.text).__name__}")
        if self.warm_up is not None and not isinstance(self.warm_up, str):
            raise CompileError(f"warm_up must be a str, not {type(self.warm_up).__name__}")
        if self.syntax not in ("gbnf", "lark"):
            raise CompileError(f"grammar syntax must be 'gbnf' or 'lark', not {self.syntax!r}")
        if self.indent is not None and (self.syntax != "lark" or not self.indent
                                        or self.indent.strip(" \t")):
            raise CompileError("indent needs a Lark grammar and a unit of blanks or tabs")
        if isinstance(self.longest, str) or not all(isinstance(n, str) for n in self.longest):
            raise CompileError("longest must be a tuple of rule names")
        object.__setattr__(self, "longest", tuple(self.longest))




Constraint = Regex | Choices | JsonSchema | Grammar

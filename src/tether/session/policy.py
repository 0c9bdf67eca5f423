"""The generation policy for JSON Schema (SPEC §5; docs/json-schema.md, "Generation").

Masks follow the spec: an object whose schema does not forbid other properties accepts
them, in any order. Generation should not ramble, though: a small model left that
freedom invents keys (the same one forty times) and never gets to the required ones.
So by default (``extra_properties="forbid"``) a run compiles the schema *closed* —
objects that declare properties get no others (:func:`~tether.schema.closed.closed_schema`)
— with properties in schema order, each key at most once — in every object, keys that
patterns or ``additionalProperties`` allow included (``JsonSchema(distinct_keys=True)``:
the matcher refuses a key an object already has). The output still validates
against the caller's schema: it is a subset of it. Integers the schema does not bound are
kept to the ones every JSON consumer reads exactly, ±(2^53 − 1) (``SAFE_INTEGER``): a
small model otherwise writes sixty digits. Where closing leaves a schema tether
cannot compile (a ``not`` or ``oneOf`` over a closed object may need a complement it cannot
build), the run falls back to the caller's schema in schema order.
``extra_properties="spec"`` gives the model the spec's freedom (the caller's constraint
as it is).
"""

from __future__ import annotations

from typing import Any

from tether.compiler import compile as compile_constraint
from tether.constraints import JsonSchema
from tether.engine.compiled import Compiled
from tether.errors import CompileError, TetherError
from tether.schema.closed import closed_schema, narrowed
from tether.vocab import Vocabulary

EXTRA_PROPERTIES = ("forbid", "spec")
SAFE_INTEGER = 2**53 - 1


def generation_constraint(constraint: Any, extra_properties: str = "forbid") -> Any:
    """The constraint a run compiles for ``constraint`` (JSON Schema only; others are
    returned as they are)."""
    return _candidates(constraint, extra_properties)[0]


def compile_for_generation(constraint: Any, vocab: Vocabulary,
                           extra_properties: str = "forbid") -> Compiled:
    """Compile the constraint a run generates under (module docstring), falling back to
    the caller's schema in schema order if the closed one does not compile."""
    candidates = _candidates(constraint, extra_properties)
    for candidate in candidates[:-1]:
        try:
            return compile_constraint(candidate, vocab)
        except CompileError:
            continue
    return compile_constraint(candidates[-1], vocab)


def _candidates(constraint: Any, extra_properties: str) -> list[Any]:
    if extra_properties not in EXTRA_PROPERTIES:
        raise TetherError(f"extra_properties must be one of {EXTRA_PROPERTIES}, "
                          f"not {extra_properties!r}")
    if extra_properties == "spec" or not isinstance(constraint, JsonSchema):
        return [constraint]
    options = {"registry": constraint.registry, "whitespace": constraint.whitespace,
               "max_whitespace": constraint.max_whitespace, "property_order": "schema",
               "strict": constraint.strict, "formats": constraint.formats,
               "distinct_keys": True}
    in_order = JsonSchema(constraint.schema, **options)
    policy = narrowed(closed_schema(constraint.schema), _bound_integers)
    if policy == constraint.schema:
        return [in_order]
    return [JsonSchema(policy, **options), in_order]


def _bound_integers(node: dict[str, Any], enclosed: bool) -> bool:
    """Give an integer schema with no bound on a side ±``SAFE_INTEGER`` there."""
    if node.get("type") == "integer":
        if "minimum" not in node and "exclusiveMinimum" not in node:
            node["minimum"] = -SAFE_INTEGER
        if "maximum" not in node and "exclusiveMaximum" not in node:
            node["maximum"] = SAFE_INTEGER
    return False

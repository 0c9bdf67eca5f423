"""`compile_schema`: a :class:`tether.JsonSchema` → the grammar IR.

The pipeline: :mod:`~tether.schema.resolve` (documents and ``$ref``), then
:mod:`~tether.schema.normalize` (each schema position as a union of per-kind shapes, with
``allOf``/``anyOf``/``oneOf``/``not``/``if`` folded in), then :mod:`~tether.schema.emit`
(one grammar rule per subschema). An unsatisfiable schema is a :class:`CompileError`
saying why and where, never an empty language at run time.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from tether.constraints import JsonSchema
from tether.errors import CompileError
from tether.grammar.ir import Expr, Grammar, refs_in
from tether.schema.emit import Emitter
from tether.schema.json_text import Layout
from tether.schema.normalize import Normalizer
from tether.schema.pointers import scope_of
from tether.schema.resolve import Resolver
from tether.schema.runtime_checks import RuntimeChecks, checked_paths

START = "json"


def compile_schema(constraint: JsonSchema) -> Grammar:
    """The grammar of the JSON texts that ``constraint``'s schema accepts."""
    try:
        return _compile(constraint)
    except CompileError as e:
        number, plain = scope_of(e.location) if isinstance(e.location, str) else (0, "")
        if not number:
            raise
        error = copy.copy(e)  # the location without its dynamic scope
        CompileError.__init__(error, e.message, location=plain, source=e.source)
        raise error from None


def _compile(constraint: JsonSchema) -> Grammar:
    resolver = Resolver(constraint.schema, constraint.registry)
    norm = Normalizer(resolver, strict=constraint.strict,
                      formats=constraint.formats == "assert")
    layout = Layout(constraint.whitespace, constraint.max_whitespace)
    emitter = Emitter(norm, layout,
                      strict=constraint.strict, any_order=constraint.property_order == "any")
    try:
        root = emitter.ref(frozenset({("", False)}))
    except RecursionError:
        raise CompileError("the schema nests too deeply to compile", location="") from None
    if root is None:
        message, where = (emitter.reasons[0] if emitter.reasons
                          else ("no value satisfies it", ""))
        raise CompileError(f"the schema is unsatisfiable: {message}", location=where)
    rules = _reachable({**layout.rules, **emitter.rules, START: root})
    checks = checked_paths(norm, frozenset({("", False)}), emitter.unique_checked,
                           emitter.length_checked) \
        if emitter.unique_checked or emitter.length_checked else None
    if constraint.distinct_keys and emitter.extra_keys:
        checks = replace(checks or RuntimeChecks(), distinct_keys=True)
    return Grammar(rules, START, {**emitter.where, START: ""}, constraint.schema_json,
                   runtime_checks=checks)


def _reachable(rules: dict[str, Expr]) -> dict[str, Expr]:
    """The rules the start rule uses (the layout's pieces may go unused)."""
    seen = {START}
    stack = [START]
    while stack:
        for ref in refs_in(rules[stack.pop()]):
            if ref.name not in seen:
                seen.add(ref.name)
                stack.append(ref.name)
    return {name: body for name, body in rules.items() if name in seen}

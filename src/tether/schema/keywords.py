"""Which JSON Schema keywords the compiler enforces, which it ignores, which it refuses.

A keyword is in one of three groups:

- *enforced* (:data:`ENFORCED`): compiled into the language;
- everything else that is not unsupported — annotations (``title``, ``description``,
  ``default``, ``examples``, ``readOnly``, ``deprecated``…), structure (``$schema``,
  ``$id``, ``$defs``, ``definitions``, ``$anchor``, ``$dynamicAnchor``) and keywords
  that belong to no JSON Schema vocabulary (``x-…``, ``javaType``, typos such as
  ``additonalProperties``…): they never change what validates (JSON Schema treats
  unknown keywords as annotations), so they are ignored silently;
- *unsupported* (:data:`UNSUPPORTED`): vocabulary keywords with a meaning the compiler
  cannot enforce while generating. ``strict`` schemas get a :class:`CompileError` naming
  the keyword and its JSON pointer; lenient ones a warning, and the keyword is ignored.
"""

from __future__ import annotations

import warnings

from tether.errors import CompileError
from tether.schema.pointers import join

ENFORCED = frozenset({
    "type", "enum", "const", "nullable",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "contains", "minContains", "maxContains", "uniqueItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef",
})

UNSUPPORTED = frozenset({
    "$recursiveRef", "$recursiveAnchor",
    "divisibleBy", "disallow", "extends",  # draft-03
})


def check_keywords(schema: dict, pointer: str, *, strict: bool) -> None:
    """Refuse (strict) or warn about (lenient) the unsupported keywords of ``schema``."""
    for key in schema:
        if key in UNSUPPORTED:
            report(f"unsupported keyword {key!r}", join(pointer, key), strict=strict)


def is_trivial(schema: object) -> bool:
    """Whether ``schema`` allows every value (``true``, or only ignored keywords)."""
    return schema is True or (isinstance(schema, dict)
                              and not any(k in ENFORCED or k in UNSUPPORTED for k in schema))


def report(message: str, pointer: str, *, strict: bool) -> None:
    """A constraint the compiler cannot enforce: an error when strict, else a warning."""
    if strict:
        raise CompileError(message, location=pointer)
    warnings.warn(f"{message} at {pointer or '/'} (ignored: strict=False)", stacklevel=4)


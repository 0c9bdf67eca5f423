"""Which JSON Schema keyword a compile error is about, for MaskBench's per-keyword counts.

tether raises :class:`tether.CompileError` whose ``location`` is a JSON pointer into the
schema and whose message names the keyword; llguidance returns an error text. Both are
reduced to one keyword name (``"other"`` when none can be found) so the two engines'
refusals can be counted side by side.

The rule for tether: a message of the form ``keyword 'X'`` names X; otherwise the last
segment of the pointer that stands in *keyword position* (not a property name under
``properties``, not an index under ``anyOf``, not a part of a keyword's value) is the
keyword, unless the pointer ends at a whole subschema (``/properties/a``) or goes inside
an unknown keyword; otherwise the first quoted JSON Schema keyword in the message, or a
keyword the message starts with; otherwise the kind of error (a bound exceeded, an
unsatisfiable schema).
"""

from __future__ import annotations

import re

# Keywords whose value maps names to subschemas: the next pointer segment is a name.
_NAMED = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
          "dependencies"}
# Keywords whose value is a list of subschemas: the next segment is an index.
_INDEXED = {"allOf", "anyOf", "oneOf", "prefixItems"}
# Keywords whose value is one subschema (``items`` / ``additionalItems`` may also be a
# list in draft-07: a numeric next segment is then an index).
_SUBSCHEMA = {"not", "if", "then", "else", "additionalProperties", "additionalItems", "items",
              "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
              "contentSchema"}
KEYWORDS = _NAMED | _INDEXED | _SUBSCHEMA | {
    "$schema", "$id", "id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
    "$recursiveAnchor", "$comment", "$vocabulary", "type", "enum", "const", "multipleOf",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired", "format",
    "contentEncoding", "contentMediaType", "title", "description", "default", "deprecated",
    "readOnly", "writeOnly", "examples", "nullable", "discriminator"}

_NAMED_IN_MESSAGE = re.compile(r"keyword[s]?\s*[:=]?\s*['\"`]([^'\"`]+)['\"`]", re.IGNORECASE)
_QUOTED = re.compile(r"['\"`](\$?[A-Za-z]+)['\"`]")
_FIRST_WORD = re.compile(r"\$?[A-Za-z]+")
_UNSATISFIABLE = re.compile(r"unsatisfiable|no (string|value|instance) (satisfies|validates)",
                            re.IGNORECASE)


def pointer_keyword(pointer: str) -> str | None:
    """The last keyword-position segment of a JSON pointer; ``None`` for the root, a
    whole subschema (``/properties/a``), a place inside an unknown keyword's value or a
    string that is not a pointer."""
    if not pointer.startswith("/"):
        return None
    keyword = None
    expect = "keyword"  # or "member" (a name or an index), or "schema_or_index"
    segments = pointer[1:].split("/")
    for index, raw in enumerate(segments):
        segment = raw.replace("~1", "/").replace("~0", "~")
        if expect == "member" or (expect == "schema_or_index" and segment.isdigit()):
            expect, keyword = "keyword", None  # a whole subschema, not one keyword of it
            continue
        keyword = segment
        if segment in _NAMED or segment in _INDEXED:
            expect = "member"
        elif segment in _SUBSCHEMA:
            expect = "schema_or_index"
        elif segment in KEYWORDS or index == len(segments) - 1:
            return keyword  # any further segment is inside the keyword's value
        else:
            return None  # inside an unknown keyword's value (a $ref target, say)
    return keyword


def tether_keyword(message: str, location: object, *, limit: bool = False) -> str:
    """The keyword a tether :class:`~tether.CompileError` names; an error that names none
    is ``"(limit exceeded)"`` (``limit``: a :class:`~tether.LimitExceeded`),
    ``"(unsatisfiable)"`` or ``"other"``."""
    named = _NAMED_IN_MESSAGE.search(message)
    if named:
        return named.group(1)
    found = pointer_keyword(location) if isinstance(location, str) else None
    if found:
        return found
    found = _quoted_keyword(message)
    first = _FIRST_WORD.match(message)
    if found == "other" and first and first.group() in KEYWORDS:
        return first.group()
    if found == "other" and limit:
        return "(limit exceeded)"
    if found == "other" and _UNSATISFIABLE.search(message):
        return "(unsatisfiable)"
    return found


_LLGUIDANCE_PATTERNS = [
    (re.compile(r"Unimplemented keys: \[([^\]]*)\]"), None),
    (re.compile(r"oneOf constraints are not supported"), "oneOf"),
    (re.compile(r"Unknown format"), "format"),
    (re.compile(r"min/maxProperties"), "min/maxProperties"),
    (re.compile(r"regex|lookaround", re.IGNORECASE), "pattern"),
    (re.compile(r"circular references|\$ref|reference|registry", re.IGNORECASE), "$ref"),
    (re.compile(r"intersection", re.IGNORECASE), "allOf"),
    (re.compile(r"incompatible types"), "type"),
    (re.compile(r"Unsatisfiable", re.IGNORECASE), "unsatisfiable"),
]


def llguidance_keyword(message: str) -> str:
    """The keyword an llguidance error text is about (several unimplemented keys are
    joined with commas, sorted)."""
    for pattern, keyword in _LLGUIDANCE_PATTERNS:
        found = pattern.search(message)
        if found and keyword is None:
            return ",".join(sorted(k.strip().strip('"') for k in found.group(1).split(",")))
        if found:
            return keyword
    return _quoted_keyword(message)


def _quoted_keyword(message: str) -> str:
    for candidate in _QUOTED.findall(message):
        if candidate in KEYWORDS:
            return candidate
    return "other"

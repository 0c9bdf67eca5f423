"""Unions of shapes → grammar rules (:mod:`tether.grammar.ir`).

Every distinct subschema (a :data:`~tether.schema.shapes.Sub`) becomes one rule, built
once and referred to by name, so a recursive schema is a recursive grammar (run by the
pushdown engine) and a repeated one is built once. Scalars go to the value automata of
:mod:`tether.schema.strings` and :mod:`tether.schema.numbers`; arrays and objects to
:mod:`tether.schema.arrays` and :mod:`tether.schema.objects`. A subschema that allows no
value yields ``None``, and the reason is kept for the error message.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

from tether.automata.regex_ast import CharSet, literal
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import Expr, Ref
from tether.schema import formats, numbers, strings
from tether.schema.algebra import least_common_multiple
from tether.schema.arrays import emit_array
from tether.schema.json_text import Layout, alternate
from tether.schema.keywords import report
from tether.schema.normalize import Normalizer
from tether.schema.objects import emit_object
from tether.schema.pointers import join
from tether.schema.runtime_checks import counted, length_key
from tether.schema.shapes import (
    ANY,
    Arr,
    Bool,
    Lit,
    Null,
    Num,
    Obj,
    Refused,
    Shape,
    Str,
    Sub,
    Union,
)

ANY_RULE = "any"
# Formats JSON Schema defines: one the value automata lack is refused (an assertion that
# cannot be kept); any other name has no defined meaning and is an annotation.
MAX_NESTING = 48  # subschemas nested inside one another while emitting
_UNSET = object()
_LONG_STRING = "the length bound needs"  # … and that a maxLength is too large for it


class Emitter:
    """Builds the rules of one schema (see the module docstring)."""

    def __init__(self, norm: Normalizer, layout: Layout, *, strict: bool,
                 any_order: bool) -> None:
        self.norm = norm
        self.layout = layout
        self.strict = strict
        self.any_order = any_order
        self.rules: dict[str, Expr] = {}
        self.where: dict[str, str] = {}
        self.reasons: list[tuple[str, str]] = []
        self._names: dict[Sub, str | None] = {}
        self._depth = 0
        self._strings: dict[Str, Ref | None] = {}
        self._no_string: dict[Str, tuple[str, str]] = {}  # why a string shape has no value
        # What the matcher checks (schema/runtime_checks.py): uniqueItems (pointers) whose
        # arrays allow any items here, strings (by length_key) whose maxLength it counts
        self.unique_checked: set[str] = set()
        self.length_checked: dict[Str, tuple[int, str]] = {}
        self.extra_keys = False  # some object may have keys no property declares

    def ref(self, sub: Sub) -> Expr | None:
        """The rule of ``sub`` (built on first use); None if no value fits it."""
        if sub == ANY:
            return self.any_value()
        name = self._names.get(sub, _UNSET)
        if name is _UNSET:
            name = self._names[sub] = f"s{len(self._names)}"
            where = _pointer(sub)
            self.where[name] = where
            if self._depth >= MAX_NESTING:
                raise LimitExceeded(f"the schema nests more than {MAX_NESTING} levels deep",
                                    location=where)
            self._depth += 1
            try:
                expr = self.union(self.norm.of_sub(sub))
            finally:
                self._depth -= 1
            if expr is None:
                self._names[sub] = None
                self.rules[name] = CharSet(())  # only reached if it referred to itself
                return None
            self.rules[name] = expr
        if name is None:
            return None
        return Ref(name, self.where[name])

    def any_value(self) -> Ref:
        """The rule of an unconstrained JSON value."""
        if ANY_RULE not in self.rules:
            self.extra_keys = True  # (its objects take any keys)
            self.rules[ANY_RULE] = CharSet(())  # placeholder while it refers to itself
            self.rules[ANY_RULE] = self.layout.any_value(Ref(ANY_RULE))
            self.where[ANY_RULE] = ""
        return Ref(ANY_RULE)

    def named(self, prefix: str, expr: Expr, where: str) -> Ref:
        """``expr`` as a rule of its own (built once however often it is used)."""
        name = f"{prefix}{len(self.rules)}"
        self.rules[name] = expr
        self.where[name] = where
        return Ref(name, where)

    def union(self, u: Union) -> Expr | None:
        """One of the shapes of ``u``."""
        if not u.shapes and u.why is not None:
            self.reasons.append(u.why)
        forms = [e for e in (self.shape(s) for s in u.shapes) if e is not None]
        return alternate(forms) if forms else None

    def shape(self, s: Shape) -> Expr | None:
        """The JSON text of one shape."""
        if isinstance(s, Refused):
            raise CompileError(s.message, location=s.where)
        if isinstance(s, Null):
            return literal("null")
        if isinstance(s, Bool):
            return alternate([literal("true" if v else "false") for v in sorted(s.values)])
        if isinstance(s, Lit):
            return alternate([self.layout.literal_value(v) for v in s.values])
        if isinstance(s, Num):
            return self.number(s)
        if isinstance(s, Str):
            # A string shape with no value is left out like any other (where it is
            # optional; the schema is unsatisfiable only if it is needed)
            out = self.string(s)
            if out is None:
                self.empty(*self._no_string[replace(s, where="")])
            return out
        if isinstance(s, Arr):
            return emit_array(s, self)
        assert isinstance(s, Obj)
        return emit_object(s, self)

    def reserve(self, prefix: str, where: str) -> Ref:
        """A new rule, defined later by :meth:`define` (for rules that refer to each
        other)."""
        return self.named(prefix, CharSet(()), where)

    def define(self, rule: Ref, expr: Expr) -> None:
        """Give a rule from :meth:`reserve` its expression."""
        self.rules[rule.name] = expr

    def empty(self, reason: str, where: str) -> None:
        """Record why a shape allows no value; returns None (the empty result)."""
        self.reasons.append((reason, where))

    def string(self, s: Str) -> Ref | None:
        """The rule of the JSON strings of ``s`` (one per distinct constraint set); None
        when no string fits (its pattern, format, length and exclusions contradict each
        other)."""
        key = replace(s, where="")
        if key not in self._strings:
            try:
                expr = self._string(s)
            except LimitExceeded as e:
                uncounted = counted(s)
                if uncounted is None or not e.message.startswith(_LONG_STRING):
                    raise
                expr = self._string(uncounted)  # the matcher counts the code points
                self.length_checked[length_key(s)] = (s.max_len, join(s.where, "maxLength"))
            except CompileError as e:
                if not e.message.startswith(strings.NO_STRING):
                    raise
                self._no_string[key] = (e.message, e.location or s.where)
                self._strings[key] = None
                return None
            self._strings[key] = self.named("str", expr, s.where)
        return self._strings[key]

    def _string(self, s: Str) -> Expr:
        if len(s.formats) > 1:
            names = ", ".join(sorted(s.formats))
            raise CompileError(f"a string cannot have several formats ({names})",
                               location=s.where)
        for name in s.formats:
            if name in formats.SPEC_FORMATS and formats.format_expr(name, s.where) is None:
                report(f"unsupported format {name!r}", join(s.where, "format"),
                       strict=self.strict)
        return strings.json_string(
            min_length=s.min_len, max_length=s.max_len, patterns=tuple(sorted(s.patterns)),
            excluded_patterns=tuple(sorted(s.excluded_patterns)),
            excluded_values=tuple(sorted(s.excluded_values)),
            format=next(iter(s.formats), None),
            excluded_formats=tuple(sorted(s.excluded_formats)), location=s.where)

    def number(self, n: Num) -> Expr | None:
        """The number texts of ``n``; None when no number fits (every one left is a
        multiple of a ``non_multiples`` step)."""
        node = self._number(n)
        if n.non_multiples:
            node = numbers.without_multiples(node, sorted(n.non_multiples), n.where)
            if node is None:
                return self.empty("every number allowed is a multiple of "
                                  f"{min(n.non_multiples)}", n.where)
        return node

    def _number(self, n: Num) -> Expr:
        multiples = [Fraction(m) for m in n.multiples]
        if n.integer:
            step = math.lcm(*(m.numerator for m in multiples)) if multiples else 1
            lo = None if n.lo is None else _ceil(n.lo, n.lo_excl)
            hi = None if n.hi is None else _floor(n.hi, n.hi_excl)
            return numbers.json_integer(minimum=lo, maximum=hi,
                                        multiple_of=step if step > 1 else None,
                                        location=n.where)
        multiple = None
        if multiples:
            m = least_common_multiple(multiples)
            multiple = Decimal(m.numerator) / Decimal(m.denominator)
        return numbers.json_number(minimum=n.lo, maximum=n.hi, exclusive_minimum=n.lo_excl,
                                   exclusive_maximum=n.hi_excl, multiple_of=multiple,
                                   fractional=n.fractional, location=n.where)


def _ceil(x: Decimal, exclusive: bool) -> int:
    c = math.ceil(x)
    return c + 1 if exclusive and c == x else c


def _floor(x: Decimal, exclusive: bool) -> int:
    f = math.floor(x)
    return f - 1 if exclusive and f == x else f


def _pointer(sub: Sub) -> str:
    parts = sorted(p for p, _ in sub if isinstance(p, str))
    return parts[0] if parts else ""

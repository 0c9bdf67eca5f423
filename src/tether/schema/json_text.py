"""JSON text pieces: bounded whitespace, punctuation, literal values, unconstrained values.

:class:`Layout` holds the whitespace policy (``default``: runs of at most
``max_whitespace`` blanks from ``[ \\t\\n\\r]`` between tokens; ``compact``: none) and
builds the punctuation, containers and literals every emitter shares. Literal values
(``enum``/``const``, property names) are spelled as ``json.dumps(..., ensure_ascii=False)``
spells them, with the whitespace policy inside objects and arrays, except numbers, which
may take any spelling of their value (``1``, ``1.0``, ``1e0``), and objects, whose members
may come in any order (the same object); a string written with
other escapes (``"\\u0041"`` for ``"A"``) is not accepted. The whitespace and
punctuation are rules of their own (:attr:`Layout.rules`), built once. An unconstrained
value (:meth:`Layout.any_value`) is recursive: any depth, as JSON allows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from tether.automata.regex_ast import EMPTY, Alternate, CharSet, Concat, Node, Repeat, literal
from tether.grammar.ir import AnyOrder, Expr, Ref
from tether.schema import numbers, strings

_BLANKS = CharSet(((9, 10), (13, 13), (32, 32)))


def alternate(items: Sequence[Expr]) -> Expr:
    """One of ``items`` (the item itself when there is one)."""
    return items[0] if len(items) == 1 else Alternate(tuple(items))


def concat(*items: Expr) -> Expr:
    """``items`` in sequence, flattened."""
    out: list[Expr] = []
    for item in items:
        out.extend(item.items if isinstance(item, Concat) else (item,))
    return out[0] if len(out) == 1 else Concat(tuple(out))


class Layout:
    """The JSON punctuation under one whitespace policy."""

    def __init__(self, whitespace: str, max_whitespace: int) -> None:
        compact = whitespace == "compact" or max_whitespace == 0
        # The pieces used everywhere are rules of their own, built once.
        self.rules: dict[str, Expr] = {}
        self.ws: Expr = EMPTY if compact else self._rule(
            "ws", Repeat(_BLANKS, 0, max_whitespace))
        self.comma = self._rule("comma", concat(self.ws, literal(","), self.ws))
        self.colon = self._rule("colon", concat(self.ws, literal(":"), self.ws))

    def _rule(self, name: str, body: Expr) -> Ref:
        self.rules[name] = body
        return Ref(name)

    def container(self, open_: str, body: Expr | None, close: str, *,
                  empty_ok: bool) -> Expr | None:
        """``open body close`` (and ``open close`` when ``empty_ok``)."""
        forms = []
        if empty_ok:
            forms.append(concat(literal(open_), self.ws, literal(close)))
        if body is not None:
            forms.append(concat(literal(open_), self.ws, body, self.ws, literal(close)))
        return alternate(forms) if forms else None

    def joined(self, first: Expr, rest: Expr, lo: int, hi: int | None) -> Expr:
        """``first`` then ``lo..hi`` times ``, rest``."""
        if hi == 0:
            return first
        return concat(first, Repeat(concat(self.comma, rest), lo, hi))

    def literal_value(self, value: Any) -> Expr:
        """The JSON text of ``value`` (see the module docstring)."""
        if isinstance(value, dict):
            members = [concat(literal(json.dumps(k, ensure_ascii=False)), self.colon,
                              self.literal_value(v)) for k, v in value.items()]
            if len(members) < 2:
                return self._literal_container("{", members, "}")
            n = len(members)  # the same object in any key order
            return concat(literal("{"), self.ws, AnyOrder(tuple(members), (True,) * n, None,
                                                          self.comma, n, n), self.ws,
                          literal("}"))
        if isinstance(value, list):
            return self._literal_container("[", [self.literal_value(v) for v in value], "]")
        if isinstance(value, int | float) and not isinstance(value, bool):
            exact = Decimal(str(value))  # every spelling of the number: 1, 1.0, 1e0…
            return numbers.json_number(minimum=exact, maximum=exact)
        return literal(json.dumps(value, ensure_ascii=False))

    def _literal_container(self, open_: str, items: list[Expr], close: str) -> Node:
        if not items:
            return concat(literal(open_), self.ws, literal(close))
        body: list[Expr] = [items[0]]
        for item in items[1:]:
            body += [self.comma, item]
        return concat(literal(open_), self.ws, *body, self.ws, literal(close))

    def any_value(self, inner: Expr | None) -> Expr:
        """Any JSON value whose arrays/objects hold ``inner`` values (scalars only when
        ``inner`` is None)."""
        # Its strings and numbers are rules of their own that call no rule: what they
        # read is shared by every grammar (docs/architecture.md), not walked again in
        # each schema's recursive value rule.
        string = self._rule("any_string", strings.json_string())
        forms: list[Expr] = [literal("null"), literal("true"), literal("false"),
                             self._rule("any_number", numbers.json_number()), string]
        if inner is not None:
            member = concat(string, self.colon, inner)
            forms.append(self.container("[", self.joined(inner, inner, 0, None), "]",
                                        empty_ok=True))
            forms.append(self.container("{", self.joined(member, member, 0, None), "}",
                                        empty_ok=True))
        return alternate(forms)

"""The GBNF front end: llama.cpp's grammar format → the grammar IR.

Syntax (as llama.cpp defines it): rules ``name ::= body``; a body is alternatives
separated by ``|`` of sequences of literals ``"..."``, character classes ``[a-z]`` /
``[^...]``, ``.`` (any character), rule names and groups ``( ... )``, each optionally
followed by ``*``, ``+``, ``?``, ``{m}``, ``{m,}`` or ``{m,n}``; ``#`` starts a comment.
Escapes in literals and classes: ``\\n \\t \\r \\\\ \\" \\[ \\]`` and ``\\xHH``,
``\\uHHHH``, ``\\UHHHHHHHH`` (code points). The default start rule is ``root``.

A rule may span several lines: it ends where the next ``name ::=`` starts (llama.cpp
only allows line breaks inside parentheses and after ``|``; every grammar it accepts
means the same here). Two deliberate differences, both stricter or wider without
changing any grammar llama.cpp accepts: names may also contain ``_``, and a rule defined
twice is an error (llama.cpp silently keeps the last definition). Token references
(``<...>``) are refused. Every error is a :class:`~tether.errors.CompileError` located
at ``"line:column"``.
"""

from __future__ import annotations

from tether.automata.regex_ast import EMPTY, CharSet, complement, normalize
from tether.automata.regex_parser import MAX_GROUP_DEPTH
from tether.errors import CompileError
from tether.grammar.ir import Expr, Grammar, Ref
from tether.grammar.lower import check_grammar
from tether.grammar.source_text import Cursor, alternate, concat, repeat

_ESCAPES = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "[": 91, "]": 93}
_COMMENT = ("#",)


def parse_gbnf(text: str, start: str | None = None) -> Grammar:
    """Parse GBNF ``text`` into a checked grammar whose start rule is ``start``
    (default ``root``); see the module docstring."""
    if not isinstance(text, str):
        raise CompileError(f"a grammar must be a str, not {type(text).__name__}")
    rules, where = _Parser(text).parse()
    return check_grammar(Grammar(rules, start or "root", where, text))


def _is_name_char(c: str) -> bool:
    return len(c) == 1 and c.isascii() and (c.isalnum() or c in "-_")


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = Cursor(text)
        self.depth = 0  # groups open at the cursor

    def skip(self) -> None:
        self.s.skip_blanks(newlines=True, comments=_COMMENT)

    def parse(self) -> tuple[dict[str, Expr], dict[str, int | str]]:
        rules: dict[str, Expr] = {}
        where: dict[str, int | str] = {}
        self.skip()
        while not self.s.at_end():
            at = self.s.i
            name = self.s.read_while(_is_name_char)
            if not name:
                raise self.s.unexpected(" (expected a rule name)")
            self.s.skip_blanks(newlines=False, comments=())
            if not self.s.startswith("::="):
                raise self.s.unexpected(f" (expected '::=' after the rule name {name!r})")
            if name in rules:
                raise self.s.error(f"rule {name!r} is defined twice (first at {where[name]})",
                                   at)
            self.s.i += 3
            where[name] = self.s.loc(at)
            rules[name] = self.alternates()
            if self.s.peek() == ")":
                raise self.s.error("')' without a matching '('")
        return rules, where

    def rule_starts_here(self) -> bool:
        """Whether a ``name ::=`` starts at the cursor (the end of the previous rule)."""
        j = self.s.i
        text = self.s.text
        while j < len(text) and _is_name_char(text[j]):
            j += 1
        while j < len(text) and text[j] in " \t":
            j += 1
        return j > self.s.i and text.startswith("::=", j)

    def alternates(self) -> Expr:
        at = self.s.i
        branches = [self.sequence()]
        while self.s.peek() == "|":
            self.s.i += 1
            branches.append(self.sequence())
        return alternate(branches, self.s.loc(at))

    def sequence(self) -> Expr:
        at = self.s.i
        items: list[Expr] = []
        stacked = 0  # repetitions of the last item, one around the other
        while True:
            self.skip()
            c = self.s.peek()
            if c in ("", "|", ")"):
                break
            if c in "*+?{":
                stacked += 1
                if stacked > MAX_GROUP_DEPTH:  # (later passes recurse on the tree)
                    raise self.s.error(f"repetitions nest deeper than {MAX_GROUP_DEPTH}",
                                       limit=True)
                items.append(self.quantified(items.pop() if items else None))
                continue
            stacked = 0
            if _is_name_char(c):
                if self.rule_starts_here():
                    break
                use = self.s.i
                items.append(Ref(self.s.read_while(_is_name_char), self.s.loc(use)))
            else:
                items.append(self.atom())
        return concat(items, self.s.loc(at))

    def atom(self) -> Expr:
        at = self.s.i
        c = self.s.peek()
        if c == '"':
            return self.literal()
        if c == "[":
            return self.char_class()
        if c == ".":
            self.s.i += 1
            return CharSet(complement(()), self.s.loc(at))
        if c == "(":
            if self.depth >= MAX_GROUP_DEPTH:  # (later passes recurse on the tree)
                raise self.s.error(f"groups nest deeper than {MAX_GROUP_DEPTH}", at,
                                   limit=True)
            self.s.i += 1
            self.depth += 1
            body = self.alternates()
            self.depth -= 1
            if self.s.peek() != ")":
                raise self.s.error("'(' is never closed", at)
            self.s.i += 1
            return body
        if c == "<":
            raise self.s.error("token references (<...>) are not supported")
        raise self.s.unexpected()

    def quantified(self, item: Expr | None) -> Expr:
        at = self.s.i
        c = self.s.peek()
        if item is None:
            raise self.s.error(f"{c!r} has nothing to repeat")
        self.s.i += 1
        if c != "{":
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            return repeat(item, lo, hi, self.s, at)
        self.skip()
        lo = self.s.read_int()
        self.skip()
        hi: int | None = lo
        if self.s.peek() == ",":
            self.s.i += 1
            self.skip()
            hi = self.s.read_int() if "0" <= self.s.peek() <= "9" else None
            self.skip()
        if self.s.peek() != "}":
            raise self.s.unexpected(" (expected '}' to close the repetition)")
        self.s.i += 1
        return repeat(item, lo, hi, self.s, at)

    def literal(self) -> Expr:
        at = self.s.i
        self.s.i += 1
        chars: list[Expr] = []
        while self.s.peek() != '"':
            if self.s.at_end():
                raise self.s.error("unterminated literal", at)
            pos = self.s.loc()
            cp = self.s.read_char(_ESCAPES)
            chars.append(CharSet(((cp, cp),), pos))
        self.s.i += 1
        return concat(chars, self.s.loc(at)) if chars else EMPTY

    def char_class(self) -> Expr:
        at = self.s.i
        self.s.i += 1
        negated = self.s.peek() == "^"
        self.s.i += negated
        ranges: list[tuple[int, int]] = []
        while self.s.peek() != "]":
            if self.s.at_end():
                raise self.s.error("unterminated character class", at)
            item_at = self.s.i
            lo = hi = self.s.read_char(_ESCAPES)
            if self.s.peek() == "-" and self.s.peek(1) not in ("]", ""):
                self.s.i += 1
                hi = self.s.read_char(_ESCAPES)
                if hi < lo:
                    raise self.s.error(f"character range out of order ({chr(lo)!r} > "
                                       f"{chr(hi)!r})", item_at)
            ranges.append((lo, hi))
        self.s.i += 1
        if not ranges and not negated:
            raise self.s.error("empty character class (it matches nothing)", at)
        merged = normalize(ranges)
        return CharSet(complement(merged) if negated else merged, self.s.loc(at))

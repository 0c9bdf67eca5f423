"""The Lark front end: Lark's EBNF → the grammar IR.

Syntax: rules (lowercase names, optionally ``?rule`` / ``!rule`` / ``_rule``) and terminals
(UPPERCASE) defined as ``name: expansions``; alternatives ``|`` (a definition continues
on the next lines that start with ``|``; inside ``( )`` and ``[ ]`` line breaks are
free), groups ``( )``, optional ``[ ]``, ``* + ?``, ``~ n`` and ``~ n..m``; string literals
``"..."`` (escapes ``\\n \\t \\r \\f \\v \\a \\b \\0 \\\\ \\" \\'`` and ``\\xHH \\uHHHH
\\UHHHHHHHH``) with the ``i`` flag, ranges ``"a".."z"``, regular expressions ``/.../flags``;
``//`` and ``#`` comments; the directives ``%import common.NAME [-> ALIAS]``,
``%import common (A, B)``, ``%ignore``, ``%override`` and ``%extend``. The default start
rule is ``start``. Everything that only shapes Lark's parse tree has no effect on the
language and is read and dropped: the ``?``/``!`` modifiers, aliases ``-> name`` and
priorities ``.N`` (priorities choose between parses or lexer matches, never which
strings belong to the language). Templates, ``%declare`` (tokens only a custom lexer
could produce) and imports of anything but ``common`` are refused.

Terminals are atomic sub-languages: a terminal (named, or a literal/regex written in a
rule) becomes its regex syntax tree, inlined where it is used. A regex's language is
every string it matches *in full* (Python's ``re`` would stop at the first alternative
that matches; ``/a|ab/`` still derives ``ab`` here). Flags: ``i`` (case-insensitive:
character sets are closed under case variants, :mod:`tether.grammar.case_fold`), ``s``
(``.`` matches a line break), ``x`` (verbose: blanks and ``#`` comments outside classes
are dropped), ``m`` and ``u`` (no effect on a full match); a feature our regex parser
refuses is an error located inside the grammar.

**No lexer.** The IR is lexer-less, so ``%ignore`` is written into the rules: with W the
optional run ``(I1|I2|...)*`` of ignored terminals, every terminal *occurrence in a rule*
becomes ``W T`` and the start rule is followed by one more W. A lexer skips ignored text
before every token and at the end, and that is exactly one W before each token plus one
at the end: never two W side by side, so no ambiguity is added, and never a W inside a
terminal. The language is the one a lexer-less (scannerless) parser gives — the same as
Lark's Earley parser with ``lexer="dynamic_complete"``, which tries every length of
every terminal. Lark's standard or contextual lexer can reject strings this accepts: it
splits the text into maximal tokens first, so with ``start: NAME NAME`` the text ``ab``
is one NAME there (and rejected) but ``"a" "b"`` here; and a keyword that a longer
terminal also matches (``"if"`` vs ``NAME``) is decided by priorities there. Every
error is a :class:`~tether.errors.CompileError` located at ``"line:column"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tether.automata.boolean import difference
from tether.automata.regex_ast import (
    EMPTY,
    Alternate,
    CharSet,
    Concat,
    Node,
    Repeat,
    normalize,
)
from tether.automata.regex_parser import MAX_GROUP_DEPTH, parse_regex
from tether.errors import CompileError
from tether.grammar.case_fold import fold_ranges
from tether.grammar.ir import Expr, Grammar, Ref
from tether.grammar.lark_common import COMMON_TERMINALS
from tether.grammar.lower import check_grammar
from tether.grammar.source_text import Cursor, alternate, concat, repeat

_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7, "b": 8, "0": 0,
            "\\": 92, '"': 34, "'": 39}
_COMMENTS = ("//", "#")
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")
_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
_REGEX_FLAGS = "imsux"
_QUANTIFIERS = "*+?~"


def parse_lark(text: str, start: str | None = None, *,
               ignore_rule: str | None = None, longest: frozenset[str] = frozenset()
               ) -> Grammar:
    """Parse Lark ``text`` into a checked grammar whose start rule is ``start`` (default
    ``start``); see the module docstring. With ``ignore_rule`` (for
    :mod:`tether.grammar.layout`, which replaces that rule inside brackets), the ignored
    run is a reference to a rule of that name and comes *after* each token (none after a
    token that may end a line, none before the first), and named terminals used by rules
    become rules of their own (one automaton each, shared by every use).

    ``longest`` names terminals matched longest (as a lexer would; see
    :class:`~tether.constraints.Grammar`). With ``ignore_rule``, a literal written in a
    rule that one of them matches in full is a *keyword* of it — a rule of its own named
    by the quoted literal (``'"if"'``) and matched longest too, so that, as a lexer
    reads ``insert`` as one name rather than ``in`` and ``sert``, the keyword never ends
    where the terminal could go on (:mod:`tether.engine.pda`, "rules matched longest");
    and the terminal no longer matches its keywords (reserved: a name is never ``if``,
    as Lark's lexer, where a literal outranks a regex, has it). The grammar's
    ``longest`` holds both."""
    if not isinstance(text, str):
        raise CompileError(f"a grammar must be a str, not {type(text).__name__}")
    parser = _Parser(text)
    parser.parse()
    return check_grammar(_Lowering(parser, ignore_rule, longest).grammar(start or "start"))


@dataclass(frozen=True)
class _Lexeme:
    """A terminal written inline in a body (a literal or a regex): its syntax tree, and
    a plain literal's text."""

    node: Node
    text: str | None = None

    @property
    def pos(self) -> int | str:
        return self.node.pos


@dataclass
class _Definition:
    kind: Literal["rule", "terminal"]
    body: Expr  # regex_ast nodes, Ref (any name) and _Lexeme
    at: int  # offset of the name in the text


def _is_name_char(c: str) -> bool:
    return len(c) == 1 and c.isascii() and (c.isalnum() or c == "_")


def _is_quantifier(c: str) -> bool:
    return len(c) == 1 and c in _QUANTIFIERS


class _Parser:
    """Reads the text into definitions (bodies still name terminals by Ref)."""

    def __init__(self, text: str) -> None:
        self.s = Cursor(text)
        self.defs: dict[str, _Definition] = {}
        self.ignored: list[Expr] = []

    # -- layout ------------------------------------------------------------------------
    def skip(self, depth: int) -> None:
        """Skip blanks and comments; line breaks too inside brackets."""
        self.s.skip_blanks(newlines=depth > 0, comments=_COMMENTS)

    def continues_with_bar(self) -> bool:
        """At a line break of a definition: whether a later line starts with ``|`` (the
        definition goes on; the cursor moves there) or not (it ends; the cursor stays)."""
        at = self.s.i
        self.s.skip_blanks(newlines=True, comments=_COMMENTS)
        if self.s.peek() == "|":
            return True
        self.s.i = at
        return False

    # -- top level ---------------------------------------------------------------------
    def parse(self) -> None:
        while True:
            self.skip(1)
            if self.s.at_end():
                return
            if self.s.peek() == "%":
                self.directive()
            else:
                self.definition("define")
            self.skip(0)
            if self.s.peek() in (")", "]"):
                raise self.s.error(f"{self.s.peek()!r} without a matching opening bracket")
            if not self.s.at_end() and self.s.peek() not in "\r\n":
                raise self.s.unexpected(" (expected the end of the line)")

    def name(self, what: str) -> tuple[str, int]:
        at = self.s.i
        name = self.s.read_while(_is_name_char)
        if not name:
            raise self.s.unexpected(f" (expected {what})")
        if not (_RULE_NAME.fullmatch(name) or _TERMINAL_NAME.fullmatch(name)):
            raise self.s.error(f"bad name {name!r}: a rule name is lowercase, a terminal "
                               "name UPPERCASE (letters, digits, _)", at)
        return name, at

    def definition(self, mode: Literal["define", "override", "extend"]) -> None:
        modifier_at = self.s.i
        modifier = self.s.peek() in ("?", "!")
        self.s.i += modifier
        name, at = self.name("a rule or terminal name")
        kind: Literal["rule", "terminal"] = "rule" if _RULE_NAME.fullmatch(name) else "terminal"
        if modifier and kind == "terminal":
            raise self.s.error(f"{self.s.text[modifier_at]!r} only applies to rules",
                               modifier_at)
        self.skip(0)
        if self.s.peek() == "{":
            raise self.s.error("templates (name{...}) are not supported")
        if self.s.peek() == ".":
            self.priority()
        self.skip(0)
        if self.s.peek() != ":":
            raise self.s.unexpected(f" (expected ':' after {name!r})")
        self.s.i += 1
        body = self.expansions(0)
        self.define(name, _Definition(kind, body, at), mode)

    def priority(self) -> None:
        """``.N`` after a name: read and dropped (see the module docstring)."""
        self.s.i += 1
        if self.s.peek() in ("+", "-"):
            self.s.i += 1
        if not self.s.read_while(lambda c: "0" <= c <= "9"):
            raise self.s.unexpected(" (expected a priority number after '.')")

    def define(self, name: str, definition: _Definition,
               mode: Literal["define", "override", "extend"]) -> None:
        old = self.defs.get(name)
        if mode == "define" and old is not None:
            raise self.s.error(f"{name!r} is defined twice (first at {self.s.loc(old.at)})",
                               definition.at)
        if mode != "define" and old is None:
            raise self.s.error(f"%{mode} of {name!r}, which is not defined", definition.at)
        if mode == "extend":
            definition.body = Alternate((old.body, definition.body), old.body.pos)
        self.defs[name] = definition

    def directive(self) -> None:
        at = self.s.i
        self.s.i += 1
        word = self.s.read_while(str.isalpha)
        self.skip(0)
        if word == "ignore":
            self.ignored.append(self.expansions(0))
        elif word == "import":
            self.import_common(at)
        elif word in ("override", "extend"):
            self.definition(word)
        elif word == "declare":
            raise self.s.error("%declare names tokens that only a custom lexer produces; "
                               "there is no lexer here, so they cannot be generated", at)
        else:
            raise self.s.error(f"unknown directive %{word}", at)

    def import_common(self, at: int) -> None:
        path_at = self.s.i
        path = [self.s.read_while(_is_name_char)]
        while self.s.peek() == "." and _is_name_char(self.s.peek(1)):
            self.s.i += 1
            path.append(self.s.read_while(_is_name_char))
        if path[0] != "common" or len(path) > 2:
            raise self.s.error("only terminals of 'common' can be imported "
                               "(%import common.NAME or %import common (A, B))", path_at)
        self.skip(0)
        if len(path) == 2:
            name_at = self.s.i - len(path[1])
            alias, alias_at = path[1], path_at
            if self.s.startswith("->"):
                self.s.i += 2
                self.skip(0)
                alias, alias_at = self.name("a name after '->'")
            self.import_one(path[1], name_at, alias, alias_at)
            return
        if self.s.peek() != "(":
            raise self.s.unexpected(" (expected '.NAME' or '(NAMES)' after 'common')")
        while True:
            self.s.i += 1
            self.skip(0)
            name, name_at = self.name("a terminal name")
            self.import_one(name, name_at, name, name_at)
            self.skip(0)
            if self.s.peek() == ")":
                self.s.i += 1
                return
            if self.s.peek() != ",":
                raise self.s.unexpected(" (expected ',' or ')')")

    def import_one(self, name: str, name_at: int, alias: str, alias_at: int) -> None:
        pattern = COMMON_TERMINALS.get(name)
        if pattern is None:
            raise self.s.error(f"common has no terminal {name!r}", name_at)
        if not _TERMINAL_NAME.fullmatch(alias):
            raise self.s.error(f"{alias!r} is not a terminal name (UPPERCASE)", alias_at)
        node = _relocate(parse_regex(pattern, unicode=True), self.s.loc(alias_at))
        self.define(alias, _Definition("terminal", node, alias_at), "define")

    # -- bodies ------------------------------------------------------------------------
    def expansions(self, depth: int) -> Expr:
        at = self.s.i
        branches = [self.alias(depth)]
        while self.s.peek() == "|" or (depth == 0 and self.s.peek() in ("\r", "\n")
                                       and self.continues_with_bar()):
            self.s.i += 1
            branches.append(self.alias(depth))
        return alternate(branches, self.s.loc(at))

    def alias(self, depth: int) -> Expr:
        """A sequence, then an optional ``-> name`` (read and dropped)."""
        body = self.sequence(depth)
        if self.s.startswith("->"):
            self.s.i += 2
            self.skip(depth)
            self.name("an alias name after '->'")
            self.skip(depth)
        return body

    def sequence(self, depth: int) -> Expr:
        at = self.s.i
        items: list[Expr] = []
        while True:
            self.skip(depth)
            c = self.s.peek()
            if c in ("", "|", ")", "]", "\r", "\n") or self.s.startswith("->"):
                return concat(items, self.s.loc(at))
            if _is_quantifier(c):
                raise self.s.error(f"{c!r} has nothing to repeat")
            item = self.atom(depth)
            self.skip(depth)
            if _is_quantifier(self.s.peek()):
                item = self.quantified(item, depth)
                self.skip(depth)
                if _is_quantifier(self.s.peek()):
                    raise self.s.error("a repetition cannot be repeated directly; "
                                       "add parentheses")
            items.append(item)

    def quantified(self, item: Expr, depth: int) -> Expr:
        at = self.s.i
        c = self.s.peek()
        self.s.i += 1
        if c != "~":
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            return repeat(item, lo, hi, self.s, at)
        self.skip(depth)
        lo = hi = self.s.read_int()
        self.skip(depth)
        if self.s.startswith(".."):
            self.s.i += 2
            self.skip(depth)
            hi = self.s.read_int()
        return repeat(item, lo, hi, self.s, at)

    def atom(self, depth: int) -> Expr:
        at = self.s.i
        c = self.s.peek()
        if c in ("(", "["):
            if depth >= MAX_GROUP_DEPTH:  # (later passes recurse on the tree)
                raise self.s.error(f"groups nest deeper than {MAX_GROUP_DEPTH}", at,
                                   limit=True)
            self.s.i += 1
            body = self.expansions(depth + 1)
            close = ")" if c == "(" else "]"
            if self.s.peek() != close:
                raise self.s.error(f"{c!r} is never closed", at)
            self.s.i += 1
            return body if c == "(" else Repeat(body, 0, 1, self.s.loc(at))
        if c == '"':
            node = self.string_or_range()
            literal = self.s.text[at + 1:self.s.i - 1]
            plain = self.s.text[self.s.i - 1] == '"' and "\\" not in literal
            return _Lexeme(node, literal if plain and literal else None)
        if c == "/":
            return _Lexeme(self.regex())
        if _is_name_char(c):
            name, _ = self.name("a name")
            self.skip(depth)
            if self.s.peek() == "{":
                raise self.s.error("templates (name{...}) are not supported")
            return Ref(name, self.s.loc(at))
        raise self.s.unexpected()

    def string(self) -> tuple[list[int], bool]:
        """A ``"..."`` literal's code points, and whether it has the ``i`` flag."""
        at = self.s.i
        self.s.i += 1
        chars: list[int] = []
        while self.s.peek() != '"':
            if self.s.at_end() or self.s.peek() in "\r\n":
                raise self.s.error("unterminated string", at)
            chars.append(self.s.read_char(_ESCAPES))
        self.s.i += 1
        flag = self.s.peek() == "i" and not _is_name_char(self.s.peek(1))
        self.s.i += flag
        return chars, flag

    def string_or_range(self) -> Node:
        at = self.s.i
        pos = self.s.loc(at)
        chars, folded = self.string()
        if not self.s.startswith(".."):
            sets = [CharSet(fold_ranges(((c, c),)) if folded else ((c, c),), pos)
                    for c in chars]
            return concat(sets, pos) if sets else EMPTY
        self.s.i += 2
        self.skip(0)
        if self.s.peek() != '"':
            raise self.s.unexpected(" (expected a string after '..')")
        hi_chars, hi_folded = self.string()
        if len(chars) != 1 or len(hi_chars) != 1:
            raise self.s.error("a range \"a\"..\"z\" needs one character on each side", at)
        if hi_chars[0] < chars[0]:
            raise self.s.error("range out of order", at)
        ranges = ((chars[0], hi_chars[0]),)
        return CharSet(fold_ranges(ranges) if folded or hi_folded else normalize(ranges), pos)

    def regex(self) -> Node:
        at = self.s.i
        text = self.s.text
        j = at + 1
        while j < len(text) and text[j] != "/":
            j += 2 if text[j] == "\\" else 1
        if j >= len(text) or text[j] != "/":
            raise self.s.error("unterminated regular expression", at)
        pattern = text[at + 1:j]
        self.s.i = j + 1
        flags_at = self.s.i
        flags = self.s.read_while(str.isalpha)
        for k, f in enumerate(flags):
            if f not in _REGEX_FLAGS:
                raise self.s.error(f"unsupported regular expression flag {f!r}", flags_at + k)
        offsets = list(range(at + 1, j))
        if "x" in flags:
            pattern, offsets = _strip_verbose(pattern, offsets)
        try:
            node = parse_regex(pattern, dotall="s" in flags, unicode=True)
        except CompileError as e:
            column = e.location if isinstance(e.location, int) else 1
            offset = offsets[column - 1] if 0 < column <= len(offsets) else j
            raise type(e)(f"in the regular expression: {e.message}",
                          location=self.s.loc(offset), source=text) from None
        return _relocate(node, self.s.loc(at), fold="i" in flags)


def _strip_verbose(pattern: str, offsets: list[int]) -> tuple[str, list[int]]:
    """The ``x`` flag: drop blanks and ``#`` comments outside classes (an escaped
    character is kept), keeping each remaining character's offset in the grammar."""
    out: list[str] = []
    kept: list[int] = []
    k = 0
    class_start = -1  # index after '[' (and '^') of the class we are in, else -1
    while k < len(pattern):
        c = pattern[k]
        step = 2 if c == "\\" else 1
        if class_start < 0 and c in " \t\n\r\f\v":
            k += 1
            continue
        if class_start < 0 and c == "#":
            end = pattern.find("\n", k)
            k = len(pattern) if end < 0 else end
            continue
        if class_start < 0 and c == "[":
            class_start = k + 1 + (pattern[k + 1:k + 2] == "^")
        elif c == "]" and class_start >= 0 and k > class_start:
            class_start = -1
        out.append(pattern[k:k + step])
        kept.extend(offsets[k:k + step])
        k += step
    return "".join(out), kept


def _relocate(node: Node, pos: str, *, fold: bool = False) -> Node:
    """A regex tree placed in the grammar: every ``pos`` becomes ``pos`` (the regex's
    ``line:column``), and with ``fold`` every character set ignores case."""
    if isinstance(node, CharSet):
        return CharSet(fold_ranges(node.ranges) if fold else node.ranges, pos)
    if isinstance(node, Concat | Alternate):
        return type(node)(tuple(_relocate(i, pos, fold=fold) for i in node.items), pos)
    if isinstance(node, Repeat):
        return Repeat(_relocate(node.item, pos, fold=fold), node.min, node.max, pos)
    return node


class _Lowering:
    """Definitions → IR: terminals inlined (with the ignored run before each occurrence
    in a rule), rules kept as rules."""

    def __init__(self, parser: _Parser, ignore_rule: str | None = None,
                 longest: frozenset[str] = frozenset()) -> None:
        self.s = parser.s
        self.defs = parser.defs
        self.longest = longest
        # keyword rule name: its literal, where, and the terminal it is a keyword of
        self.keywords: dict[str, tuple[Node, int | str, str]] = {}
        self.terminals: dict[str, Node] = {}
        self.resolving: list[str] = []
        self.ignore: Node | None = None
        self.ignore_rule: str | None = None
        self.terminal_rules: dict[str, Node] = {}
        if parser.ignored:
            runs = [self.lower(body, in_terminal=True) for body in parser.ignored]
            self.ignore = Repeat(alternate(runs, runs[0].pos), 0, None, runs[0].pos)
            self.ignore_rule = ignore_rule
        if self.ignore_rule is not None:
            self.ignore_body, self.ignore = self.ignore, Ref(self.ignore_rule, self.ignore.pos)

    def grammar(self, start: str) -> Grammar:
        for name, d in self.defs.items():
            if d.kind == "terminal":
                self.terminal(name, self.s.loc(d.at))
        rules: dict[str, Expr] = {}
        where: dict[str, int | str] = {}
        for name, d in self.defs.items():
            if d.kind == "rule":
                rules[name] = self.lower(d.body, in_terminal=False)
                where[name] = self.s.loc(d.at)
        if start not in rules:
            raise CompileError(f"the start rule {start!r} is not defined", source=self.s.text)
        for name, node in self.terminal_rules.items():
            rules[name] = node
            where[name] = self.s.loc(self.defs[name].at)
        for name, (node, at, _) in self.keywords.items():
            rules[name] = node
            where[name] = at
        # Keywords are reserved, as a lexer that tells them from names has it: the
        # terminal no longer matches them (a name is never `if`).
        for terminal in {t for _, _, t in self.keywords.values()} & rules.keys():
            words = sorted(n for n, (_, _, t) in self.keywords.items() if t == terminal)
            rules[terminal] = difference(rules[terminal], alternate(
                [rules[w] for w in words], where[terminal]), location=where[terminal])
        if self.ignore_rule is not None:
            rules[self.ignore_rule] = self.ignore_body
            where[self.ignore_rule] = self.ignore_body.pos
        if self.ignore is not None and self.ignore_rule is None:  # after the last token
            rules["$" + start] = Concat((Ref(start, where[start]), self.ignore), where[start])
            where["$" + start] = where[start]
            start = "$" + start
        return Grammar(rules, start, where, self.s.text,
                       longest=self.longest | frozenset(self.keywords))

    def terminal(self, name: str, used_at: str) -> Node:
        """The syntax tree of the terminal ``name`` (its references resolved)."""
        if name in self.terminals:
            return self.terminals[name]
        d = self.defs.get(name)
        if d is None:
            raise CompileError(f"undefined terminal {name!r}", location=used_at,
                               source=self.s.text)
        if name in self.resolving:
            cycle = " -> ".join(self.resolving[self.resolving.index(name):] + [name])
            raise self.s.error(f"terminal {name!r} refers to itself ({cycle}); terminals "
                               "must be regular, use a rule", d.at)
        self.resolving.append(name)
        node = self.lower(d.body, in_terminal=True)
        self.resolving.pop()
        self.terminals[name] = node
        return node

    def token(self, node: Node, in_terminal: bool) -> Node:
        """A terminal occurrence: inside a rule, preceded by the ignored run — or, with
        ``ignore_rule`` (layout grammars), followed by it unless the terminal may end a
        line, so that the text a layout marker reads at the start of a line (its
        indentation) is never extended by ignored blanks."""
        if in_terminal or self.ignore is None:
            return node
        if self.ignore_rule is None:
            return Concat((self.ignore, node), node.pos)
        body = self.terminal_rules.get(node.name) if isinstance(node, Ref) else node
        if body is not None and _may_end_with(body, 0x0A):
            return node
        return Concat((node, self.ignore), node.pos)

    def keyword(self, lexeme: _Lexeme) -> str | None:
        """The rule of ``lexeme`` if it is a keyword of a terminal matched longest (see
        :func:`parse_lark`), made on first use."""
        text = lexeme.text
        if text is None or self.ignore_rule is None:
            return None
        name = f'"{text}"'
        if name not in self.keywords:
            of = next((t for t in sorted(self.longest)
                       if self.defs.get(t) is not None and self.defs[t].kind == "terminal"
                       and _matches(self.terminal(t, str(lexeme.pos)), text)), None)
            if of is None:
                return None
            self.keywords[name] = (lexeme.node, lexeme.pos, of)
        return name

    def lower(self, expr: Expr, *, in_terminal: bool) -> Expr:
        if isinstance(expr, _Lexeme):
            keyword = None if in_terminal else self.keyword(expr)
            if keyword is not None:
                return self.token(Ref(keyword, expr.pos), in_terminal)
            return self.token(expr.node, in_terminal)
        if isinstance(expr, Ref):
            if _RULE_NAME.fullmatch(expr.name):
                if in_terminal:
                    raise CompileError(f"a terminal cannot use the rule {expr.name!r}",
                                       location=expr.pos, source=self.s.text)
                return expr
            node = self.terminal(expr.name, str(expr.pos))
            if self.ignore_rule is not None and not in_terminal:
                self.terminal_rules[expr.name] = node
                node = Ref(expr.name, expr.pos)
            return self.token(node, in_terminal)
        if isinstance(expr, Concat | Alternate):
            return type(expr)(tuple(self.lower(i, in_terminal=in_terminal)
                                    for i in expr.items), expr.pos)
        if isinstance(expr, Repeat):
            return Repeat(self.lower(expr.item, in_terminal=in_terminal), expr.min,
                          expr.max, expr.pos)
        return expr


def _matches(node: Node, text: str) -> bool:
    """Whether ``node``'s language holds ``text`` (no for a node kind not read here)."""
    return len(text) in _ends(node, text, {0})


def _ends(node: Node, text: str, starts: set[int]) -> set[int]:
    """Where a match of ``node`` in ``text`` starting at one of ``starts`` may end."""
    if isinstance(node, CharSet):
        return {i + 1 for i in starts if i < len(text)
                and any(lo <= ord(text[i]) <= hi for lo, hi in node.ranges)}
    if isinstance(node, Concat):
        for item in node.items:
            starts = _ends(item, text, starts)
        return starts
    if isinstance(node, Alternate):
        return set().union(*(_ends(item, text, starts) for item in node.items))
    if isinstance(node, Repeat):
        here = starts
        for _ in range(node.min):
            here = _ends(node.item, text, here)
        ends, count = set(here), node.min
        while here and (node.max is None or count < node.max):
            here = _ends(node.item, text, here) - (ends if node.max is None else set())
            ends |= here
            count += 1
        return ends
    return set()


def _may_end_with(node: Node, char: int) -> bool:
    """Whether some string of ``node``'s language ends with the character ``char``."""
    if isinstance(node, CharSet):
        return any(lo <= char <= hi for lo, hi in node.ranges)
    if isinstance(node, Alternate):
        return any(_may_end_with(i, char) for i in node.items)
    if isinstance(node, Repeat):
        return (node.max is None or node.max > 0) and _may_end_with(node.item, char)
    if isinstance(node, Concat):
        for item in reversed(node.items):
            if _may_end_with(item, char):
                return True
            if not _nullable(item):
                return False
    return False


def _nullable(node: Node) -> bool:
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Alternate):
        return any(_nullable(i) for i in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or _nullable(node.item)
    if isinstance(node, Concat):
        return all(_nullable(i) for i in node.items)
    return True

"""Parse a regex in Python ``re`` syntax into the :mod:`regex_ast` tree.

The dialect is what JSON Schema ``pattern`` and Python's ``re`` share: literals and
escapes, classes with ranges and negation, ``.``, ``\\d \\w \\s`` and their negations,
``\\p{..}``/``\\P{..}`` general categories, groups (capturing, named, non-capturing),
alternation, greedy and lazy quantifiers incl. ``{n,m}``, the flags ``s``, ``a``, ``u``
and ``m``, and ``^``/``$``/``\\A``/``\\Z`` at the ends of the pattern (constraints are always
matched in full). Features whose meaning is not a regular language over the output or
that change the language of a full match (backreferences, lookaround, word boundaries,
possessive quantifiers, atomic groups, ``(?i)``, ``(?x)``) are refused with a
:class:`CompileError` naming the column, never silently ignored.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from tether.automata import unicode_sets
from tether.automata.regex_ast import (
    EMPTY,
    Alternate,
    Anchor,
    CharSet,
    Concat,
    Node,
    Repeat,
    complement,
    normalize,
)
from tether.errors import CompileError, LimitExceeded

MAX_REPEAT = 100_000  # largest bound of a counted repetition
MAX_GROUP_DEPTH = 100  # groups inside one another (later passes recurse on the tree)

_SIMPLE_ESCAPES = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_ASCII_CLASSES = {
    "d": ((48, 57),),
    "w": ((48, 57), (65, 90), (95, 95), (97, 122)),
    "s": ((9, 13), (32, 32)),
}
_CLASS_NAMES = {"d": "digit", "w": "word", "s": "space"}


@dataclass
class RegexFlags:
    """The flags in force at a point of a pattern (inline groups like ``(?s)`` change
    them for their extent)."""

    dotall: bool = False
    ascii: bool = False


def parse_regex(pattern: str, *, dotall: bool = False, unicode: bool = False) -> Node:
    """Parse ``pattern`` (matched in full) into a syntax tree.

    ``\\d \\w \\s`` are ASCII (``[0-9]``, ``[A-Za-z0-9_]``, ASCII blanks) unless
    ``unicode`` is set or the pattern says ``(?u)``: what users of JSON Schema and other
    constrained-decoding tools mean by them (Python's ``re`` default is Unicode)."""
    parser = RegexParser(pattern, RegexFlags(dotall=dotall, ascii=not unicode))
    node = parser.parse()
    return _resolve_anchors(node, at_start=True, at_end=True, pattern=pattern)


class RegexParser:
    """A recursive-descent parser of one pattern into a syntax tree (:func:`parse_regex`
    is its entry point). Dialects subclass it and override how an escape or an atom
    reads: JSON Schema's ECMA-262 patterns do (:mod:`tether.schema.strings`)."""

    def __init__(self, pattern: str, flags: RegexFlags) -> None:
        self.p = pattern
        self.i = 0
        self.flags = flags
        self.depth = 0  # groups open around self.i

    # -- helpers -----------------------------------------------------------------------
    def error(self, message: str, at: int | None = None) -> CompileError:
        return CompileError(message, location=(self.i if at is None else at) + 1,
                            source=self.p)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def unsupported(self, what: str, at: int) -> CompileError:
        return self.error(f"unsupported regex feature: {what}", at)

    # -- grammar -----------------------------------------------------------------------
    def parse(self) -> Node:
        self.parse_global_flags()
        node = self.parse_alternation()
        if self.i < len(self.p):
            raise self.error("unbalanced parenthesis")
        return node

    def parse_global_flags(self) -> None:
        while self.p.startswith("(?", self.i):
            j = self.i + 2
            while j < len(self.p) and self.p[j].isalpha():
                j += 1
            if j == self.i + 2 or self.peek(j - self.i) != ")":
                return
            self.apply_flags(self.p[self.i + 2:j], self.flags, self.i)
            self.i = j + 1

    def apply_flags(self, letters: str, flags: RegexFlags, at: int) -> None:
        for k, ch in enumerate(letters):
            if ch == "s":
                flags.dotall = True
            elif ch == "a":
                flags.ascii = True
            elif ch == "u":
                flags.ascii = False
            elif ch == "m":
                pass  # m only moves ^/$, which sit at the ends
            elif ch in "ixL":
                raise self.unsupported(f"the inline flag {ch!r}", at + 2 + k)
            else:
                raise self.error(f"unknown flag {ch!r}", at + 2 + k)

    def parse_alternation(self) -> Node:
        start = self.i
        branches = [self.parse_concat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_concat())
        return branches[0] if len(branches) == 1 else Alternate(tuple(branches), start + 1)

    def parse_concat(self) -> Node:
        start = self.i
        items: list[Node] = []
        last: tuple[Node, int, int] | None = None  # the last atom, its column, its end
        while self.i < len(self.p) and self.peek() not in "|)":
            atom_at = self.i
            if self.p.startswith("(?#", atom_at):  # a comment: as if it were not there,
                self.parse_group()  # so a quantifier after it repeats the atom before it
                if last is not None and last[2] == len(items) and \
                        self.read_quantifier_ahead():
                    atom, at, _ = last
                    items[-1] = self.parse_quantifiers(atom, at)
                continue
            atom = self.parse_atom()
            quantified = self.parse_quantifiers(atom, atom_at)
            items.append(quantified)
            last = (atom, atom_at, len(items)) if quantified is atom else None
        if len(items) == 1:
            return items[0]
        return Concat(tuple(items), start + 1)

    def parse_quantifiers(self, atom: Node, atom_at: int) -> Node:
        repeated = False
        while True:
            at = self.i
            bounds = self.read_quantifier()
            if bounds is None:
                return atom
            if repeated:
                raise self.error("multiple repeat", at)
            if isinstance(atom, Anchor):
                raise self.error("nothing to repeat", at)
            lo, hi = bounds
            if self.peek() == "?":
                self.i += 1  # lazy: the same language for a full match
            elif self.peek() == "+":
                raise self.unsupported("possessive quantifier", self.i)
            atom = Repeat(atom, lo, hi, atom_at + 1)
            repeated = True

    def read_quantifier_ahead(self) -> bool:
        """Whether a quantifier starts at ``self.i`` (nothing is read)."""
        at = self.i
        found = self.read_quantifier() is not None
        self.i = at
        return found

    def read_quantifier(self) -> tuple[int, int | None] | None:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        if ch != "{":
            return None
        return self.read_counted()

    def read_counted(self) -> tuple[int, int | None] | None:
        """``{n}``, ``{n,}``, ``{,m}``, ``{n,m}``; None (no quantifier) if not that shape."""
        start = self.i
        close = self.p.find("}", start)
        if close < 0:
            return None
        body = self.p[start + 1:close]
        lo_s, comma, hi_s = body.partition(",")
        if not (lo_s.isdigit() or lo_s == "") or not (hi_s.isdigit() or hi_s == ""):
            return None
        if not lo_s.isascii() or not hi_s.isascii():
            return None
        if not comma and not lo_s:
            return None
        lo = int(lo_s) if lo_s else 0
        hi: int | None = int(hi_s) if hi_s else (None if comma else lo)
        if lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
            raise self.error(f"repetition bound over {MAX_REPEAT}", start)
        if hi is not None and hi < lo:
            raise self.error("min repeat greater than max repeat", start + 1)
        self.i = close + 1
        return lo, hi

    def parse_atom(self) -> Node:
        at = self.i
        ch = self.peek()
        if ch == "(":
            return self.parse_group()
        if ch == "[":
            return self.parse_class()
        if ch == ".":
            self.i += 1
            excluded = () if self.flags.dotall else ((10, 10),)
            return CharSet(complement(excluded), at + 1)
        if ch in "^$":
            self.i += 1
            return Anchor(ch == "^", at + 1)
        if ch == "\\":
            return self.parse_escape()
        if ch in "*+?":
            raise self.error("nothing to repeat")
        if ch == "{" and self.read_counted() is not None:
            raise self.error("nothing to repeat", at)
        self.i += 1
        return CharSet(normalize([(ord(ch), ord(ch))]), at + 1)

    def parse_group(self) -> Node:
        open_at = self.i
        if self.depth >= MAX_GROUP_DEPTH:
            raise LimitExceeded(f"groups nest deeper than {MAX_GROUP_DEPTH}",
                                location=open_at + 1, source=self.p)
        self.i += 1
        saved = RegexFlags(self.flags.dotall, self.flags.ascii)
        if self.peek() == "?" and self.parse_group_prefix(open_at):
            return EMPTY  # a comment group, already read
        self.depth += 1
        node = self.parse_alternation()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", open_at)
        self.i += 1
        self.flags = saved
        return node

    def parse_group_prefix(self, open_at: int) -> bool:
        """Read what follows ``(?``; leaves ``self.i`` at the group's body. Returns True
        for a comment group ``(?#...)``, read to its end."""
        self.i += 1
        ch = self.peek()
        if ch == ":":
            self.i += 1
        elif ch == "P" and self.peek(1) == "<" or ch == "<" and self.peek(1) not in "=!":
            self.i += 2 if ch == "P" else 1
            self.read_group_name(open_at)
        elif ch == "P" and self.peek(1) == "=":
            raise self.unsupported("backreference", open_at)
        elif ch in "=!":
            raise self.unsupported("lookahead", open_at)
        elif ch == "<":
            raise self.unsupported("lookbehind", open_at)
        elif ch == ">":
            raise self.unsupported("atomic group", open_at)
        elif ch == "(":
            raise self.unsupported("conditional group", open_at)
        elif ch == "#":
            close = self.p.find(")", self.i)
            if close < 0:
                raise self.error("missing ), unterminated comment", open_at)
            self.i = close + 1
            return True
        else:
            self.parse_scoped_flags(open_at)
        return False

    def read_group_name(self, open_at: int) -> None:
        close = self.p.find(">", self.i)
        name = self.p[self.i:close] if close >= 0 else ""
        if close < 0 or not name.isidentifier():
            raise self.error("bad group name", self.i)
        self.i = close + 1

    def parse_scoped_flags(self, open_at: int) -> None:
        j = self.i
        while j < len(self.p) and (self.p[j].isalpha() or self.p[j] == "-"):
            j += 1
        letters = self.p[self.i:j]
        if self.peek(j - self.i) == ")":
            raise self.error("global flags not at the start of the expression", open_at)
        if self.peek(j - self.i) != ":" or not letters:
            raise self.error("unknown extension ?" + self.p[self.i:j + 1], open_at)
        on, _, off = letters.partition("-")
        if off:
            raise self.unsupported("turning flags off", open_at)
        self.apply_flags(on, self.flags, open_at)
        self.i = j + 1

    # -- escapes ---------------------------------------------------------------------
    def parse_escape(self) -> Node:
        at = self.i
        item = self.read_escape(in_class=False)
        if isinstance(item, int):
            return CharSet(normalize([(item, item)]), at + 1)
        if isinstance(item, tuple):
            return CharSet(item, at + 1)
        return item

    def read_escape(self, *, in_class: bool) -> int | tuple[tuple[int, int], ...] | Node:
        """After a backslash: a code point, a set of ranges, or (outside classes) a node."""
        at = self.i
        self.i += 1
        ch = self.peek()
        if not ch:
            raise self.error("bad escape (end of pattern)", at)
        self.i += 1
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if ch == "b" and in_class:
            return 8
        if ch in "dwsDWS":
            return self.class_escape(ch)
        if ch in "pP":
            return self.property_escape(ch, at)
        if ch == "x":
            return self.hex_digits(2, at)
        if ch == "u":
            return self.hex_digits(4, at)
        if ch == "U":
            cp = self.hex_digits(8, at)
            if cp > 0x10FFFF:
                raise self.error(f"bad escape \\U{cp:08x}", at)
            return cp
        if ch == "N":
            return self.named_char(at)
        if ch.isdigit():
            return self.octal_or_backref(ch, at, in_class=in_class)
        if not in_class and ch in "AZ":
            return Anchor(ch == "A", at + 1)
        if not in_class and ch in "bB":
            raise self.unsupported("word boundary", at)
        if ch.isascii() and ch.isalnum():
            raise self.error(f"bad escape \\{ch}", at)
        return ord(ch)

    def class_escape(self, ch: str) -> tuple[tuple[int, int], ...]:
        key = ch.lower()
        if self.flags.ascii:
            ranges = _ASCII_CLASSES[key]
        else:
            ranges = unicode_sets.class_ranges(_CLASS_NAMES[key])
        return complement(ranges) if ch.isupper() else ranges

    def property_escape(self, ch: str, at: int) -> tuple[tuple[int, int], ...]:
        if self.peek() == "{":
            close = self.p.find("}", self.i)
            if close < 0:
                raise self.error("unterminated \\p{...}", at)
            name = self.p[self.i + 1:close]
            self.i = close + 1
        else:
            name = self.peek()
            self.i += 1
        name = name.removeprefix("General_Category=").removeprefix("gc=")
        ranges = unicode_sets.category_ranges(name)
        if ranges is None:
            raise self.unsupported(f"unknown Unicode property {name!r}", at)
        return complement(ranges) if ch == "P" else ranges

    def hex_digits(self, n: int, at: int) -> int:
        digits = self.p[self.i:self.i + n]
        if len(digits) != n or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise self.error(f"incomplete escape \\{self.p[at + 1]}{digits}", at)
        self.i += n
        return int(digits, 16)

    def named_char(self, at: int) -> int:
        if self.peek() != "{":
            raise self.error("missing {", self.i)
        close = self.p.find("}", self.i)
        if close < 0:
            raise self.error("missing }", self.i)
        name = self.p[self.i + 1:close]
        try:
            char = unicodedata.lookup(name)
        except KeyError:
            raise self.error(f"undefined character name {name!r}", at) from None
        self.i = close + 1
        return ord(char)

    def octal_or_backref(self, first: str, at: int, *, in_class: bool) -> int:
        digits = first
        while len(digits) < 3 and self.peek() in "01234567" and self.peek():
            digits += self.peek()
            self.i += 1
        octal = all(c in "01234567" for c in digits)
        if first == "0" or (octal and len(digits) == 3) or in_class:
            if not octal:
                raise self.error(f"bad escape \\{digits}", at)
            value = int(digits, 8)
            if value > 0o377:
                raise self.error(f"octal escape value \\{digits} outside of range 0-0o377", at)
            return value
        raise self.unsupported("backreference", at)

    # -- classes -----------------------------------------------------------------------
    def parse_class(self) -> CharSet:
        open_at = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.error("unterminated character set", open_at)
            if self.peek() == "]" and not first:
                self.i += 1
                break
            first = False
            item_at = self.i
            lo = self.class_item()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_item()
                if isinstance(lo, tuple) or isinstance(hi, tuple):
                    raise self.error("bad character range", item_at)
                if hi < lo:
                    raise self.error("bad character range", item_at)
                ranges.append((lo, hi))
            elif isinstance(lo, tuple):
                ranges.extend(lo)
            else:
                ranges.append((lo, lo))
        merged = normalize(ranges)
        return CharSet(complement(merged) if negate else merged, open_at + 1)

    def class_item(self) -> int | tuple[tuple[int, int], ...]:
        if self.i >= len(self.p):
            raise self.error("unterminated character set")
        if self.peek() == "\\":
            item = self.read_escape(in_class=True)
            assert isinstance(item, (int, tuple)), "class escapes are characters or sets"
            return item
        ch = self.peek()
        self.i += 1
        return ord(ch)


def _resolve_anchors(node: Node, *, at_start: bool, at_end: bool, pattern: str) -> Node:
    """Replace anchors at the pattern's ends by the empty string; refuse any other."""
    if isinstance(node, Anchor):
        if (node.at_start and at_start) or (not node.at_start and at_end):
            return EMPTY
        what = "^ or \\A not at the start" if node.at_start else "$ or \\Z not at the end"
        raise CompileError(f"unsupported regex feature: {what} of the pattern",
                           location=node.pos, source=pattern)
    if isinstance(node, Alternate):
        return Alternate(tuple(_resolve_anchors(b, at_start=at_start, at_end=at_end,
                                                pattern=pattern) for b in node.items),
                         node.pos)
    if isinstance(node, Concat):
        items = list(node.items)
        zero_width = [_is_zero_width(x) for x in items]
        out = []
        for k, item in enumerate(items):
            start_k = at_start and all(zero_width[:k])
            end_k = at_end and all(zero_width[k + 1:])
            out.append(_resolve_anchors(item, at_start=start_k, at_end=end_k, pattern=pattern))
        return Concat(tuple(out), node.pos)
    if isinstance(node, Repeat):
        single = node.max is not None and node.max <= 1
        return Repeat(_resolve_anchors(node.item, at_start=at_start and single,
                                       at_end=at_end and single, pattern=pattern),
                      node.min, node.max, node.pos)
    return node


def _is_zero_width(node: Node) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, Concat):
        return all(_is_zero_width(x) for x in node.items)
    return False

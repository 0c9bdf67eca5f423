"""Reading grammar source text: the pieces the GBNF and Lark front ends share.

A :class:`Cursor` walks the text, skips blanks and comments, reads names, integers and
escapes, and builds :class:`~tether.errors.CompileError` s located at a 1-based
``"line:column"`` (columns count characters, a tab is one column). :func:`concat`,
:func:`alternate` and :func:`repeat` build IR nodes (the last with the bound every front
end applies to counted repetitions).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from tether.automata.regex_ast import EMPTY, SURROGATES, Alternate, Concat, Repeat
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import Expr

MAX_REPEAT = 10_000  # largest count of a counted repetition ({m,n}, ~ n..m)
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


class Cursor:
    """A position in grammar text, with helpers that report ``line:column``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self._line_starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]

    # -- positions and errors ----------------------------------------------------------
    def loc(self, at: int | None = None) -> str:
        """``"line:column"`` of offset ``at`` (default: the cursor)."""
        at = self.i if at is None else at
        line = bisect.bisect_right(self._line_starts, at)
        return f"{line}:{at - self._line_starts[line - 1] + 1}"

    def error(self, message: str, at: int | None = None, *,
              limit: bool = False) -> CompileError:
        """A :class:`CompileError` (or :class:`LimitExceeded`) located at ``at``."""
        cls = LimitExceeded if limit else CompileError
        return cls(message, location=self.loc(at), source=self.text)

    def unexpected(self, what: str = "") -> CompileError:
        """An error about the character under the cursor (or the end of the text)."""
        if self.at_end():
            return self.error(f"unexpected end of the grammar{what}")
        return self.error(f"unexpected {self.peek()!r}{what}")

    # -- reading -----------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def at_end(self) -> bool:
        return self.i >= len(self.text)

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def skip_blanks(self, *, newlines: bool, comments: tuple[str, ...]) -> None:
        """Skip spaces, tabs, comments (each runs to the end of its line) and, if
        ``newlines``, line breaks."""
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif any(text.startswith(m, self.i) for m in comments):
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
                if self.i > 0 and text[self.i - 1] == "\r":
                    self.i -= 1
            else:
                return

    def read_while(self, ok: Callable[[str], bool]) -> str:
        """Read the characters for which ``ok`` holds."""
        start = self.i
        while self.i < len(self.text) and ok(self.text[self.i]):
            self.i += 1
        return self.text[start:self.i]

    def read_int(self) -> int:
        """A decimal integer (at most :data:`MAX_REPEAT`: it counts repetitions)."""
        at = self.i
        digits = self.read_while(lambda c: "0" <= c <= "9")
        if not digits:
            raise self.unexpected(" (expected a number)")
        value = int(digits)
        if value > MAX_REPEAT:
            raise self.error(f"repetition count {value} is over the limit of {MAX_REPEAT}",
                             at, limit=True)
        return value

    def read_char(self, simple: dict[str, int]) -> int:
        """The code point of the character or escape (see :meth:`read_escape`) at the
        cursor, which must not be at the end."""
        if self.peek() == "\\":
            return self.read_escape(simple)
        cp = ord(self.peek())
        if SURROGATES[0] <= cp <= SURROGATES[1]:
            raise self.error(f"U+{cp:04X} is a surrogate, not a character")
        self.i += 1
        return cp

    def read_escape(self, simple: dict[str, int]) -> int:
        """The code point of the escape at the cursor (which is on the backslash):
        one of ``simple`` or ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``."""
        at = self.i
        c = self.peek(1)
        if c in simple:
            self.i += 2
            return simple[c]
        if not c:
            raise self.error("unterminated escape at the end of the grammar", at)
        if c not in _HEX_DIGITS:
            raise self.error("unknown escape \\" + c, at)
        n = _HEX_DIGITS[c]
        digits = self.text[self.i + 2:self.i + 2 + n]
        if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise self.error(f"\\{c} needs {n} hexadecimal digits", at)
        cp = int(digits, 16)
        if cp > 0x10FFFF:
            raise self.error(f"\\{c}{digits} is beyond the last Unicode code point", at)
        if SURROGATES[0] <= cp <= SURROGATES[1]:
            raise self.error(f"\\{c}{digits} is a surrogate, not a character", at)
        self.i += 2 + n
        return cp


def repeat(item: Expr, lo: int, hi: int | None, cursor: Cursor, at: int) -> Repeat:
    """``item`` repeated ``lo`` to ``hi`` (None: unbounded) times; the bounds must be in
    order (they are already at most :data:`MAX_REPEAT`). ``at`` locates the operator."""
    if hi is not None and hi < lo:
        raise cursor.error(f"repetition bounds out of order ({lo} > {hi})", at)
    return Repeat(item, lo, hi, cursor.loc(at))


def concat(items: list[Expr], pos: str) -> Expr:
    """The sequence of ``items`` (the item itself when there is one)."""
    if len(items) == 1:
        return items[0]
    return Concat(tuple(items), pos) if items else EMPTY


def alternate(items: list[Expr], pos: str) -> Expr:
    """The choice between ``items`` (the item itself when there is one)."""
    return items[0] if len(items) == 1 else Alternate(tuple(items), pos)

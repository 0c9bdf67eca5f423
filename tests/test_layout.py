"""Layout markers (tether.grammar.layout): indentation blocks and brackets written into a
lexer-less grammar, checked on a small indentation language."""

from __future__ import annotations

import pytest

import tether
from tether.errors import CompileError

BLOCKS = r'''
start: stmt+
stmt: _line (WORD _NL | WORD ":" _NL _indent stmt+ _dedent | call _NL)
call: WORD _open "(" [WORD ("," WORD)*] _close ")"
_line: "\x00"
_indent: "\x00"
_dedent: "\x00"
_open: "\x00"
_close: "\x00"
WORD: /[a-z]+/
_NL: /\n/
_SPACE: / +/
%ignore _SPACE
'''

BYTES = tether.Vocabulary([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


def compiled(unit: str = "  ", max_depth: int = 3) -> tether.Compiled:
    return tether.compile(tether.Grammar(BLOCKS, syntax="lark", indent=unit,
                                         max_depth=max_depth), BYTES)


@pytest.mark.parametrize(("text", "ok"), [
    ("a\nb\n", True),
    ("a:\n  b\n  c\nd\n", True),
    ("a:\n  b:\n    c\n  d\ne\n", True),
    ("f(x,\n   y)\n", True),            # a line break inside brackets
    ("f( x ,y )\n", True),
    ("a:\nb\n", False),                  # a block needs a deeper line
    ("a:\n  b\n c\n", False),            # dedent to a level that never existed
    ("a:\n   b\n", False),               # not a multiple of the unit
    ("f(x\n", False),                    # unclosed bracket
    ("a\n  b\n", False),                 # indent without a block opener
    ("a:\n  b:\n    c:\n      d\n", True),
    ("a:\n  b:\n    c:\n      d:\n        e\n", False),  # deeper than max_depth=3
])
def test_blocks_and_brackets(text: str, ok: bool) -> None:
    assert compiled().check(text).matches is ok


def test_the_unit_is_configurable() -> None:
    assert compiled("\t").check("a:\n\tb\n").matches
    assert not compiled("\t").check("a:\n  b\n").matches


def test_unbalanced_markers_are_errors() -> None:
    bad = BLOCKS.replace('_close ")"', '")"')
    with pytest.raises(CompileError, match="balanced"):
        tether.compile(tether.Grammar(bad, syntax="lark", indent="  "), BYTES)


def test_indent_needs_lark_and_blanks() -> None:
    with pytest.raises(CompileError):
        tether.Grammar("root ::= [a]", indent="  ")
    with pytest.raises(CompileError):
        tether.Grammar(BLOCKS, syntax="lark", indent="ab")

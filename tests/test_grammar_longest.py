"""Rules matched longest (``tether.Grammar(..., longest=...)``): masks and end of text
against a regex that spells out the language, token by token on random walks over a
small vocabulary; located errors; Python's identifiers."""

from __future__ import annotations

import random

import pytest
import regex

import tether
import tether.grammars
from tether.engine import bitmask

TOKENS = [b"a", b"b", b"ab", b"ba", b" ", b"  ", b"a ", b" b", b"ab c", b"(", b")", b"(a",
          b"b)", b"a(", b")(", b"c"]

# (grammar in GBNF, rules matched longest, the language as a regex)
CASES = {
    "juxtaposed": ('root ::= name " "? name\nname ::= [a-z]+\n', ("name",),
                   r"[a-z]+ [a-z]+"),
    "nullable separator": ('root ::= name sep name\nsep ::= " "*\nname ::= [a-z]+\n',
                           ("name",), r"[a-z]+ +[a-z]+"),
    "guarded call": ('root ::= name rest\nrest ::= word | "(" name ")"\n'
                     'word ::= [a-z]+\nname ::= [a-z]+\n', ("name",), r"[a-z]+\([a-z]+\)"),
    # A keyword that a name also matches is matched as a name is: "abc" is one name.
    "keyword": ('root ::= kw " "? name | name "()"\nkw ::= "ab"\nname ::= [a-c]+\n',
                ("name", "kw"), r"ab [a-c]+|[a-c]+\(\)"),
}


def _walks(compiled: tether.Compiled, language: str, rng: random.Random) -> int:
    """Random walks: at every step the mask and end of text must agree with the regex;
    returns the number of states checked."""
    checked = 0
    for _ in range(60):
        matcher = compiled.matcher()
        text = ""
        for _ in range(8):
            words = matcher.mask()
            allowed = []
            for token, data in enumerate(TOKENS):
                viable = regex.fullmatch(language, text + data.decode(), partial=True)
                assert bitmask.is_allowed(words, token) == (viable is not None), (text, data)
                if viable is not None:
                    allowed.append(token)
            assert matcher.eos_allowed() == (regex.fullmatch(language, text) is not None), text
            checked += 1
            if not allowed:
                break
            token = rng.choice(allowed)
            matcher.consume(token)
            text += TOKENS[token].decode()
    return checked


@pytest.mark.parametrize("name", CASES)
def test_masks_match_the_language(name: str) -> None:
    text, longest, language = CASES[name]
    compiled = tether.compile(tether.Grammar(text, syntax="gbnf", longest=longest),
                              tether.Vocabulary(TOKENS))
    assert _walks(compiled, language, random.Random(name)) > 100


def test_without_longest_identifiers_split() -> None:
    text, _, _ = CASES["juxtaposed"]
    vocab = tether.Vocabulary(TOKENS)
    assert tether.compile(tether.Grammar(text, syntax="gbnf"), vocab).check("ab").matches
    longest = tether.Grammar(text, syntax="gbnf", longest=("name",))
    assert not tether.compile(longest, vocab).check("ab").matches


def test_undefined_rule_is_an_error() -> None:
    with pytest.raises(tether.CompileError, match="'nope' to match longest is not defined"):
        tether.compile(tether.Grammar('root ::= "a"\n', syntax="gbnf", longest=("nope",)),
                       tether.Vocabulary(TOKENS))


def test_a_rule_that_calls_is_an_error() -> None:
    grammar = tether.Grammar('root ::= name name\nname ::= letter+\nletter ::= [a-z]\n',
                             syntax="gbnf", longest=("name",))
    with pytest.raises(tether.CompileError, match="only a terminal") as error:
        tether.compile(grammar, tether.Vocabulary(TOKENS))
    assert error.value.location == "2:1"


def test_longest_must_be_names() -> None:
    with pytest.raises(tether.CompileError, match="tuple of rule names"):
        tether.Grammar('root ::= "a"\n', syntax="gbnf", longest="root")


def test_python_reads_names_keywords_and_strings_as_python() -> None:
    bytes_only = tether.Vocabulary([bytes([b]) for b in range(9, 127)])
    python = tether.compile(tether.grammars.python(), bytes_only)
    assert python.check("x = y if z else w\n").matches
    assert not python.check("x = yif z else w\n").matches  # was read as `y if z`
    assert python.check("x = (y)if z else w\n").matches  # Python accepts this too
    # keywords: was read as `a in sert`, `b else where` (HumanEval outputs at a budget's end)
    assert not python.check("a insert\n").matches
    assert not python.check("x = (a if b elsewhere)\n").matches
    assert python.check("x = (a if b else where)\n").matches
    assert python.check('return"x"\n').matches and python.check("x = not(y)\n").matches
    # strings: `"""` opens a long string (was `""` then a short string `"abc"`)
    assert not python.check('"""abc"\n').matches
    assert python.check('"""a"b"""\n').matches and python.check('x = "" + "a"\n').matches
    assert python.check('x = "a""b"\n').matches and python.check("x = rb''\n").matches


def test_lark_keywords_of_a_longest_terminal() -> None:
    """In a layout grammar a literal that a terminal matched longest matches in full is a
    keyword rule of its own, matched longest too; other literals stay inline."""
    from tether.compiler import _grammar_of

    grammar = _grammar_of(tether.grammars.python())
    assert {'"in"', '"else"', '"lambda"', "NAME"} <= grammar.longest
    assert '"in"' in grammar.rules and '"("' not in grammar.rules

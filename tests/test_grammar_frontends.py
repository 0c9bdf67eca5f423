"""The GBNF and Lark front ends (issue 5, part 1): grammar text → grammar IR.

The language of each example grammar (``tests/grammars/``) is compared with an
independent parser, the ``lark`` package (Earley, ``lexer="dynamic_complete"``): on the
Lark files directly, and for the GBNF files on their hand-written Lark twins
(``tests/grammars/gbnf_twins/``). Our side runs the IR through a small Earley recognizer
(``tests/grammar_oracles.py``, shared with the acceptance tests) and through
``tether.compile``. Then: the malformed-grammar corpus with
exact ``line:column`` locations, feature tests, and fuzzing (only ``CompileError``).
"""

from __future__ import annotations

import contextlib
import random
import warnings
import zlib

import pytest
from grammar_oracles import (
    EXAMPLES,
    GRAMMARS,
    IrRecognizer,
    corpus,
    lark_accepts,
    lark_parser,
    load_example,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from tether.automata.regex_parser import MAX_GROUP_DEPTH
from tether.errors import CompileError, LimitExceeded
from tether.grammar.gbnf import parse_gbnf
from tether.grammar.ir import Grammar, Ref
from tether.grammar.lark import parse_lark
from tether.grammar.lower import recursive_rules

pytest.importorskip("lark")


# -- the language of every example, against lark ----------------------------------------
@pytest.mark.parametrize("syntax", ["lark", "gbnf"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_language_matches_lark(name: str, syntax: str) -> None:
    grammar, lark_text = load_example(name, syntax)
    reference = lark_parser(lark_text)
    ours = IrRecognizer(grammar)
    texts = corpus(grammar, seed=zlib.crc32(f"{name}.{syntax}".encode()), n_valid=60,
                    n_mutants=120)
    accepted = 0
    for text in texts:
        expected = lark_accepts(reference, text)
        assert ours.accepts(text) == expected, (name, syntax, text)
        accepted += expected
    assert 40 <= accepted < len(texts)  # both verdicts were exercised


# -- through the engine --------------------------------------------------------------------
def dfa_accepts(grammar: Grammar, text: str) -> bool:
    """Run a non-recursive grammar's automaton (the engine's lazy DFA) on ``text``."""
    from tether.automata.dfa import DEAD
    from tether.compiler import to_automaton

    automaton = to_automaton(grammar)
    state = automaton.start
    for byte in text.encode():
        state = automaton.step(state, byte)
        if state == DEAD:
            return False
    return bool(automaton.accepting[state])


COMMANDS_LARK = r"""
// Robot commands: not recursive, so it runs on the lazy DFA.
start: command (";" command)* [";"]
command: "move"i DIRECTION [INT] -> move
       | "say"i ESCAPED_STRING
       | "wait"i [INT "ms"]
DIRECTION: "north" | "south" | "east" | "west"
%import common (INT, ESCAPED_STRING)
%import common.WS
%ignore WS
"""

TIMESTAMP_GBNF = r"""
# An ISO-8601-like timestamp: not recursive, so it runs on the lazy DFA.
root ::= date ( [T ] time )?
date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( [0-2] [0-9] | "3" [01] )
time ::= [01] [0-9] ":" [0-5] [0-9] ( ":" [0-5] [0-9] ( "." [0-9]{1,6} )? )? zone?
zone ::= "Z" | [+-] [0-9]{2} ":" [0-9]{2}
"""

TIMESTAMP_TWIN = r"""
start: date (/[T ]/ time)?
date: /[0-9]{4}/ "-" /0[1-9]|1[0-2]/ "-" /[0-2][0-9]|3[01]/
time: /[01][0-9]/ ":" /[0-5][0-9]/ (":" /[0-5][0-9]/ ("." /[0-9]{1,6}/)?)? zone?
zone: "Z" | /[+-][0-9]{2}:[0-9]{2}/
"""

NON_RECURSIVE = [("lark", COMMANDS_LARK, COMMANDS_LARK), ("gbnf", TIMESTAMP_GBNF, TIMESTAMP_TWIN)]


@pytest.mark.parametrize(("syntax", "text", "twin"), NON_RECURSIVE)
def test_non_recursive_grammar_through_compile(syntax, text, twin, smollm2_vocab) -> None:
    grammar = (parse_gbnf if syntax == "gbnf" else parse_lark)(text)
    assert not recursive_rules(grammar)
    compiled = tether.compile(tether.Grammar(text, syntax=syntax), smollm2_vocab)
    reference = lark_parser(twin)
    texts = corpus(grammar, seed=7, n_valid=40, n_mutants=80)
    for s in texts:
        expected = lark_accepts(reference, s)
        assert compiled.check(s).matches == expected, s
        assert dfa_accepts(grammar, s) == expected, s
    _walk_tokens(compiled, smollm2_vocab, [s for s in texts[:40] if compiled.check(s).matches])


@pytest.mark.parametrize("syntax", ["lark", "gbnf"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_through_compile(name: str, syntax: str, smollm2_vocab) -> None:
    grammar, lark_text = load_example(name, syntax)
    reference = lark_parser(lark_text)
    text = (GRAMMARS / f"{name}.{syntax}").read_text()
    compiled = tether.compile(tether.Grammar(text, syntax=syntax), smollm2_vocab)
    texts = corpus(grammar, seed=11, n_valid=30, n_mutants=60)
    for s in texts:
        assert compiled.check(s).matches == lark_accepts(reference, s), (name, s)
    _walk_tokens(compiled, smollm2_vocab, texts[:10])


def _walk_tokens(compiled, vocab, texts: list[str]) -> None:
    """Each text (in the language) is accepted token by token (longest-match tokens)."""
    from mask_walk import greedy_tokens

    for s in texts:
        matcher = compiled.matcher()
        for token in greedy_tokens(vocab, s.encode()):
            assert matcher.allowed(token), (s, token)
            matcher.consume(token)
        assert matcher.is_accepting() and matcher.eos_allowed(), s


# -- malformed grammars: the exact place of each error -------------------------------------
MALFORMED = [
    # GBNF
    ("gbnf", 'root ::= "abc', "1:10", "unterminated literal"),
    ("gbnf", "root ::= [a-z", "1:10", "unterminated character class"),
    ("gbnf", 'root ::= "\\q"', "1:11", "unknown escape"),
    ("gbnf", "root ::= [\\q]", "1:11", "unknown escape"),
    ("gbnf", 'root ::= "\\x4"', "1:11", "2 hexadecimal digits"),
    ("gbnf", 'root ::= "\\uD800"', "1:11", "surrogate"),
    ("gbnf", 'root ::= "\\U00110000"', "1:11", "beyond the last Unicode"),
    ("gbnf", 'root = "a"', "1:6", "expected '::='"),
    ("gbnf", 'root ::= "a"\n)', "2:1", "without a matching '('"),
    ("gbnf", 'root ::= ("a"', "1:10", "never closed"),
    ("gbnf", 'root ::= "a" )', "1:14", "without a matching '('"),
    ("gbnf", 'root ::= "a"{3,2}', "1:13", "out of order"),
    ("gbnf", 'root ::= "a"{20000}', "1:14", "over the limit"),
    ("gbnf", 'root ::= "a"{2', "1:15", "expected '}'"),
    ("gbnf", 'root ::= "a"{,2}', "1:14", "expected a number"),
    ("gbnf", 'root ::= "a"{a}', "1:14", "expected a number"),
    ("gbnf", 'root ::= *"a"', "1:10", "nothing to repeat"),
    ("gbnf", '::= "a"', "1:1", "expected a rule name"),
    ("gbnf", 'root ::= "a"\n  ::= "b"', "2:3", "unexpected ':'"),
    ("gbnf", "root ::= [z-a]", "1:11", "out of order"),
    ("gbnf", "root ::= []", "1:10", "empty character class"),
    ("gbnf", "root ::= <think>", "1:10", "token references"),
    ("gbnf", 'root ::= "a" | @', "1:16", "unexpected '@'"),
    ("gbnf", 'root ::= x\nroot ::= "b"\nx ::= "c"', "2:1", "defined twice"),
    ("gbnf", "root ::= undefined-rule", "1:10", "undefined rule 'undefined-rule'"),
    ("gbnf", 'root ::= "a" loop\nloop ::= "b" loop', "1:1", "derives no string"),
    ("gbnf", 'start ::= "a"', None, "start rule 'root' is not defined"),
    ("gbnf", 'root ::= "a"\n# comment\nroot2 "b"', "3:1", "undefined rule 'root2'"),
    ("gbnf", 'root ::= "a"\r\n\r\n  x ::= "\\', "3:10", "unterminated escape"),
    ("gbnf", '\t# c\n\troot ::= "a" +\n\t\t{1,x}', "3:6", "expected '}'"),
    # Lark
    ("lark", 'start: "abc', "1:8", "unterminated string"),
    ("lark", 'start: "abc\n"', "1:8", "unterminated string"),
    ("lark", "start: /ab", "1:8", "unterminated regular expression"),
    ("lark", "start: /a\n", "1:8", "unterminated regular expression"),
    ("lark", 'start: "\\q"', "1:9", "unknown escape"),
    ("lark", "start: A\nA: /a(?=b)/", "2:6", "lookahead"),
    ("lark", "start: /(?i)a/", "1:11", "inline flag"),
    ("lark", "start: /a{3,2}/", "1:11", "min repeat greater than max"),
    ("lark", "start: A\nA: /a b/x\nB: /[/", "3:5", "unterminated character set"),
    ("lark", "start: /x  # c\n  (/x", "2:3", "missing )"),
    ("lark", "start: /a/z", "1:11", "flag 'z'"),
    ("lark", 'start "a"', "1:7", "expected ':'"),
    ("lark", 'start: ("a"', "1:8", "'(' is never closed"),
    ("lark", 'start: ["a"\n  "b"', "1:8", "'[' is never closed"),
    ("lark", 'start: "a")', "1:11", "without a matching opening bracket"),
    ("lark", 'start: "a" ~ 3..2', "1:12", "out of order"),
    ("lark", 'start: "a" ~ 99999', "1:14", "over the limit"),
    ("lark", 'start: "a"**', "1:12", "cannot be repeated directly"),
    ("lark", 'start: * "a"', "1:8", "nothing to repeat"),
    ("lark", "start: A\nA: B\nB: A", "2:1", "refers to itself"),
    ("lark", 'start: A\nA: "a" rule\nrule: "b"', "2:8", "cannot use the rule 'rule'"),
    ("lark", "start: UNDEFINED", "1:8", "undefined terminal 'UNDEFINED'"),
    ("lark", 'start: "x"\n   | undefined', "2:6", "undefined rule 'undefined'"),
    ("lark", 'start: "a"\nstart: "b"', "2:1", "defined twice"),
    ("lark", 'start: "a"\n%declare FOO', "2:1", "%declare"),
    ("lark", '%import common.NOPE\nstart: "a"', "1:16", "common has no terminal 'NOPE'"),
    ("lark", '%import other.WS\nstart: "a"', "1:9", "only terminals of 'common'"),
    ("lark", '%import .local.WS\nstart: "a"', "1:9", "only terminals of 'common'"),
    ("lark", '%import common.WS -> ws\nstart: "a"', "1:22", "not a terminal name"),
    ("lark", '%frobnicate\nstart: "a"', "1:1", "unknown directive"),
    ("lark", 'start: pair{"a", "b"}', "1:12", "templates"),
    ("lark", '_pair{x}: x\nstart: "a"', "1:6", "templates"),
    ("lark", 'Start: "a"', "1:1", "bad name 'Start'"),
    ("lark", '?FOO: "a"\nstart: FOO', "1:1", "only applies to rules"),
    ("lark", 'start: "ab".."z"', "1:8", "one character on each side"),
    ("lark", 'start: "z".."a"', "1:8", "out of order"),
    ("lark", 'start.x: "a"', "1:7", "priority number"),
    ("lark", 'start: "a" |\n | @', "2:4", "unexpected '@'"),
    ("lark", 'start: "a"\n  "b"', "2:3", "expected a rule or terminal name"),
    ("lark", 'start: "a" b: "c"', "1:13", "unexpected ':'"),
    ("lark", 'start: "a" %ignore " "', "1:12", "unexpected '%'"),
    ("lark", '%import common.WS junk\nstart: "a"', "1:19", "expected the end of the line"),
    ("lark", 'start: loop\nloop: "a" loop', "1:1", "derives no string"),
    ("lark", '%override start: "a"', "1:11", "not defined"),
    ("lark", 'begin: "a"', None, "start rule 'start' is not defined"),
    ("lark", 'start: "a" -> ', "1:15", "alias name"),
    ("lark", '%ignore rule\nstart: "a"\nrule: "b"', "1:9", "cannot use the rule 'rule'"),
]


@pytest.mark.parametrize(("syntax", "text", "location", "message"), MALFORMED)
def test_malformed_grammar_is_located(syntax, text, location, message) -> None:
    parse = parse_gbnf if syntax == "gbnf" else parse_lark
    with pytest.raises(CompileError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parse(text)
    assert info.value.location == location
    assert message in info.value.message
    assert info.value.source == text


def test_malformed_corpus_is_large_enough() -> None:
    assert sum(1 for case in MALFORMED if case[0] == "gbnf") >= 20
    assert sum(1 for case in MALFORMED if case[0] == "lark") >= 40


@pytest.mark.parametrize(("syntax", "text"), [
    ("gbnf", 'root ::= ( ( "a"{100} ){100} ){100}'),
    ("lark", 'start: (("a" ~ 100) ~ 100) ~ 100'),
])
def test_blow_up_is_bounded(syntax: str, text: str) -> None:
    grammar = (parse_gbnf if syntax == "gbnf" else parse_lark)(text)
    with pytest.raises(LimitExceeded) as info:
        dfa_accepts(grammar, "a")
    assert isinstance(info.value.location, str) and ":" in info.value.location


@pytest.mark.parametrize(("syntax", "head", "open_", "close"), [
    ("gbnf", "root ::= ", "(", ")"),
    ("lark", "start: ", "(", ")"),
    ("lark", "start: ", "[", "]"),
])
def test_groups_nested_past_the_bound_are_a_located_limit(syntax, head, open_, close) -> None:
    # (thousands deep once overflowed Python's stack: a RecursionError, no location)
    parse = parse_gbnf if syntax == "gbnf" else parse_lark
    assert parse(head + open_ * MAX_GROUP_DEPTH + '"a"' + close * MAX_GROUP_DEPTH)
    for depth in (MAX_GROUP_DEPTH + 1, 5_000):
        with pytest.raises(LimitExceeded) as info:
            parse(head + open_ * depth + '"a"' + close * depth)
        assert info.value.location == f"1:{len(head) + MAX_GROUP_DEPTH + 1}"
        assert "nest deeper" in info.value.message


def test_gbnf_repetitions_stacked_past_the_bound_are_a_located_limit() -> None:
    head = 'root ::= "a"'
    assert parse_gbnf(head + "?" * MAX_GROUP_DEPTH)
    with pytest.raises(LimitExceeded) as info:
        parse_gbnf(head + "?" * 3_000)
    assert info.value.location == f"1:{len(head) + MAX_GROUP_DEPTH + 1}"


@pytest.mark.parametrize("syntax", ["gbnf", "lark"])
def test_a_long_chain_of_rules_is_a_limit_not_a_crash_or_a_hang(syntax: str,
                                                                smollm2_vocab) -> None:
    # r0 needs r1 needs r2 ...: once a RecursionError (inlining), before that minutes of
    # fixed-point rounds (one rule settled per round) and of cycle searches (one per rule)
    sep = "::=" if syntax == "gbnf" else ":"
    n = 30_000
    text = "\n".join(f'r{i} {sep} r{i + 1} "x"' for i in range(n)) + f'\nr{n} {sep} "y"'
    with pytest.raises(LimitExceeded, match="nests deeper"):
        tether.compile(tether.Grammar(text, syntax=syntax, start="r0"), smollm2_vocab)
    short = "\n".join(f'r{i} {sep} r{i + 1} "x"' for i in range(300)) + f'\nr300 {sep} "y"'
    matcher = tether.compile(tether.Grammar(short, syntax=syntax, start="r0"),
                             smollm2_vocab).matcher()
    assert matcher.compiled.check("y" + "x" * 300).matches


# -- GBNF features -------------------------------------------------------------------------
def gbnf_accepts(text: str, s: str, start: str | None = None) -> bool:
    return IrRecognizer(parse_gbnf(text, start=start)).accepts(s)


def lark_ir_accepts(text: str, s: str, start: str | None = None) -> bool:
    return IrRecognizer(parse_lark(text, start=start)).accepts(s)


@pytest.mark.parametrize(("text", "yes", "no"), [
    (r'root ::= "\n\t\r\\\"\[\]"', ["\n\t\r\\\"[]"], ["n"]),
    (r'root ::= "\x41\u00e9\U0001F600"', ["Aé😀"], ["A"]),
    (r'root ::= [\x30-\x32\]\\]+', ["012]\\"], ["3", "["]),
    (r'root ::= [^a-c\n]', ["d", "é", "\t"], ["a", "b", "\n"]),
    (r'root ::= [a-]', ["a", "-"], ["b"]),
    (r'root ::= . .', ["\n😀", "ab"], ["a", "abc"]),
    (r'root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    (r'root ::= "a"{2,}', ["aa", "aaaaa"], ["a"]),
    (r'root ::= "a"{1,2} "b" {0,1}', ["a", "aa", "ab", "aab"], ["", "abb"]),
    (r'root ::= "a" * "b"+ "c"?', ["b", "aabbc"], ["a", "ac"]),
    (r'root ::= ("a" | "b")** ""', ["", "abab"], ["c"]),
    (r'root ::= "x" | ', ["", "x"], ["xx"]),
    ('root ::=\n  "a"  # first\n  ( "b"\n  | "c" )\n\nnext-rule_2 ::= "z"\n', ["ab", "ac"],
     ["a", "z"]),
    ('root ::= a\na ::= "a"\n  | "b" # continued\nb ::= "c"', ["a", "b"], ["c"]),
])
def test_gbnf_features(text: str, yes: list[str], no: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in yes:
            assert gbnf_accepts(text, s), s
        for s in no:
            assert not gbnf_accepts(text, s), s


def test_gbnf_start_rule_and_locations() -> None:
    grammar = parse_gbnf('root ::= "a"\nother ::= root "b"', start="other")
    assert grammar.start == "other"
    assert grammar.where == {"root": "1:1", "other": "2:1"}
    ref = grammar.rules["other"].items[0]
    assert ref == Ref("root", "2:11")


@pytest.mark.parametrize(("parse", "text", "start"), [
    (parse_gbnf, 'root ::= "a"\norphan ::= "b"', "root"),
    (parse_lark, 'start: "a"\norphan: "b"', "start"),
])
def test_unreachable_rule_warns_and_is_dropped(parse, text: str, start: str) -> None:
    with pytest.warns(UserWarning, match="orphan"):
        grammar = parse(text)
    assert list(grammar.rules) == [start]


# -- Lark features -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "yes", "no"), [
    ('start: "SeLect"i', ["select", "SELECT", "sElEcT"], ["selec"]),
    ("start: /[a-c]+x/i", ["ABx", "aBX"], ["d"]),
    ("start: /é|k/i", ["É", "K", "\u212a"], ["e"]),
    ("start: /a.b/", ["axb"], ["a\nb"]),
    ("start: /a.b/s", ["a\nb"], []),
    ("start: /a  b # spaces and comments go\n [ ]c/x", ["ab c"], ["a b c", "abc"]),
    ('start: "a" ~ 2 "b" ~ 1..3', ["aab", "aabbb"], ["ab", "aabbbb"]),
    ('start: ["a"] "b"? ("c" | "d")* "e"+', ["e", "abcdcee"], ["", "ab"]),
    ('start: "a".."c" "x".."z"i', ["ax", "cZ"], ["dx"]),
    ('start: "\\n\\t\\\\\\"\\x41\\u00e9"', ["\n\t\\\"Aé"], []),
    ('?start: item+ -> items\n!item.2: "a" -> a_item\n    | _b\n_b: "b"', ["ab", "ba"],
     [""]),
    ("start: A B\nA.-1: B \"x\"\nB: /[0-9]/", ["1x2"], ["1x", "x2"]),
    ('start: x\nx: "a"\n%extend x: "b"', ["a", "b"], ["c"]),
    ('%import common.WS\n%override WS: "_"\nstart: "a" WS "b"', ["a_b"], ["a b"]),
    ('start: X\n%import common.INT -> X', ["42"], ["4a"]),
    ('start: INT "," NUMBER\n%import common (INT, NUMBER)', ["1,2.5", "3,.5e-3"], ["1.5,2"]),
    ('start: "a"  // a comment\n  # another\n  | "b"', ["a", "b"], []),
])
def test_lark_features(text: str, yes: list[str], no: list[str]) -> None:
    for s in yes:
        assert lark_ir_accepts(text, s), s
    for s in no:
        assert not lark_ir_accepts(text, s), s


IGNORE_GRAMMAR = 'start: NAME ("," NAME)*\nNAME: /[a-z]+/\n%ignore " "\n'


@pytest.mark.parametrize(("s", "ok"), [
    ("a,b", True), ("  a , b  ", True), (" ", False), ("a b", False), ("", False),
])
def test_lark_ignore_between_tokens_only(s: str, ok: bool) -> None:
    assert lark_ir_accepts(IGNORE_GRAMMAR, s) == ok
    reference = lark_parser(IGNORE_GRAMMAR)
    assert lark_accepts(reference, s) == ok


def test_lark_ignore_never_inside_a_terminal_and_lexerless_splits() -> None:
    text = 'start: NAME NAME | "ab" ";"\nNAME: /[a-z]+/\n%ignore " "\n'
    assert lark_ir_accepts(text, "ab")  # "a" "b": no lexer forces one NAME
    assert lark_ir_accepts(text, " ab ;")
    assert not lark_ir_accepts(text, "a b;")  # "ab" is one terminal
    grammar = parse_lark(text)
    assert grammar.start == "$start"  # the ignored run after the last token


def test_lark_empty_start_accepts_only_ignored_text() -> None:
    text = 'start: "x"*\n%import common.WS\n%ignore WS\n'
    for s, ok in [("", True), (" \n", True), ("x x", True), ("xy", False)]:
        assert lark_ir_accepts(text, s) == ok


def test_lark_start_rule_and_locations() -> None:
    grammar = parse_lark('start: a\n?a: "x"\n  | start "x"\nother: a', start="other")
    assert grammar.start == "other"
    assert grammar.where["a"] == "2:2"
    assert Ref("start", "3:5") in grammar.rules["a"].items[1].items


@pytest.mark.parametrize("name", sorted(__import__("tether.grammar.lark_common",
                                                   fromlist=["x"]).COMMON_TERMINALS))
def test_common_terminals_match_lark(name: str) -> None:
    probes = ["0", "7", "42", "-3", "+12", "1.5", ".5", "1.", "1e5", "2.5E-3", "-1.0e+2", "e5",
              "a", "Z", "abc", "aBc", "_x1", "x_1", "1x", "f", "fF0", "g", " ", "\t \t", " \n ",
              "\n", "\r\n", "\r", "\n\n", "# hi", "#", "// c", "/* c */", "/* a * b **/",
              "/* */ */", "-- q", '""', '"a b"', '"a\\"b"', '"a"b"', '"a\\\\"', '"\\n"', "'a'",
              "a\n"]
    text = f"start: {name}\n%import common.{name}\n"
    reference = lark_parser(text)
    grammar = parse_lark(text)
    for probe in probes:
        assert dfa_accepts(grammar, probe) == lark_accepts(reference, probe), (name, probe)


# -- fuzzing: only CompileError, never a crash or a hang -----------------------------------
GBNF_ALPHABET = st.sampled_from(list('root::=ab "\\[]^-.()|*+?{},0123#\n\t xuU') + ["::="])
LARK_ALPHABET = st.sampled_from(list('startAB:"/\\[]()|*+?~.,-> _%\n\tix0129') +
                                ["%import common.", "%ignore", "->", ".."])


def _parse_quietly(parse, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            grammar = parse(text)
        except CompileError:
            return
        if not recursive_rules(grammar):
            with contextlib.suppress(CompileError):
                dfa_accepts(grammar, "ab")


FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(GBNF_ALPHABET, max_size=40).map("".join))
def test_fuzz_gbnf_random_text(text: str) -> None:
    _parse_quietly(parse_gbnf, text)


@FUZZ
@given(st.lists(LARK_ALPHABET, max_size=40).map("".join))
def test_fuzz_lark_random_text(text: str) -> None:
    _parse_quietly(parse_lark, text)


@FUZZ
@given(st.sampled_from(EXAMPLES), st.sampled_from(["gbnf", "lark"]),
       st.randoms(use_true_random=False), st.text(max_size=3))
def test_fuzz_mutated_examples(name: str, syntax: str, rng: random.Random, junk: str) -> None:
    text = (GRAMMARS / f"{name}.{syntax}").read_text()
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(text) + 1)
        cut = rng.randint(0, 3)
        text = text[:k] + (junk if rng.random() < 0.5 else "") + text[k + cut:]
    _parse_quietly(parse_gbnf if syntax == "gbnf" else parse_lark, text)


@FUZZ
@given(st.text(max_size=60))
def test_fuzz_any_unicode(text: str) -> None:
    _parse_quietly(parse_gbnf, text)
    _parse_quietly(parse_lark, text)

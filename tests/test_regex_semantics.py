"""The regex engine agrees with Python's ``re`` on what fully matches, refuses what it
cannot express with a column, and stays bounded on pathological patterns."""

from __future__ import annotations

import re
import time

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex_corpus import CORPUS

from tether.automata import DEAD, LazyDFA, build_nfa, parse_regex
from tether.errors import CompileError, LimitExceeded


def full_match(pattern: str, text: str) -> bool:
    dfa = LazyDFA(build_nfa(parse_regex(pattern)))  # (?u) in the pattern: Unicode classes
    state = dfa.walk(dfa.start, text.encode())
    return state != DEAD and bool(dfa.accepting[state])


# -- random patterns against re.fullmatch ----------------------------------------------
ALPHABET = "abc-.é😀\n 1٣_Z"
LEAVES = [
    "a", "b", "c", r"\-", r"\.", "é", "😀", r"\n", " ", "1", "Z",
    "[abc]", "[^ab]", "[a-c]", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", ".",
    r"[\w-]", r"[^\W\d]", "[à-ÿ]", "[😀-🙏]", r"[^\n]", r"[.\-]", r"[\d.]", r"\u00e9",
    r"\x61", r"[^\s\S]",
]
QUANTIFIERS = ["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "+?", "??", "{,2}"]


def _patterns() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(LEAVES)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
            st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
            inner.map(lambda x: f"({x})"),
        )

    return st.recursive(leaf, extend, max_leaves=8)


COMPARED = [0]  # cases compared by the random test (checked by the next test)


@settings(max_examples=500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pattern=_patterns(), data=st.data())
def test_random_patterns_agree_with_re(pattern: str, data: st.DataObject) -> None:
    unicode = data.draw(st.booleans())  # \d \w \s: ASCII by default, as re.ASCII
    compiled = re.compile(pattern, 0 if unicode else re.ASCII)
    texts = data.draw(st.lists(st.text(ALPHABET, max_size=8), min_size=20, max_size=20))
    try:
        dfa = LazyDFA(build_nfa(parse_regex(pattern, unicode=unicode)))
    except CompileError as error:  # only for a language with no string at all
        assert "matches no string" in str(error)
        assert not any(compiled.fullmatch(t) for t in texts)
        COMPARED[0] += len(texts)
        return
    matching = data.draw(st.lists(st.from_regex(compiled, fullmatch=True), max_size=10))
    for text in texts + matching:
        state = dfa.walk(dfa.start, text.encode())
        ours = state != DEAD and bool(dfa.accepting[state])
        assert ours == (compiled.fullmatch(text) is not None), (pattern, text)
    COMPARED[0] += len(texts) + len(matching)


def test_enough_random_cases() -> None:
    if COMPARED[0] == 0:
        pytest.skip("run together with test_random_patterns_agree_with_re")
    assert COMPARED[0] >= 10_000, COMPARED[0]


def test_classes_are_ascii_unless_asked() -> None:
    assert full_match(r"\d+", "123") and not full_match(r"\d+", "🯸🯸")
    assert not full_match(r"\w+", "é") and full_match(r"(?u)\w+", "é")
    assert full_match(r"(?u)\d(?a:\d)", "٣3") and not full_match(r"(?u)\d(?a:\d)", "3٣")
    dfa = LazyDFA(build_nfa(parse_regex(r"\s", unicode=True)))
    assert dfa.accepting[dfa.walk(dfa.start, "\u2003".encode())]


# -- the patterns of JSON Schema practice compile ---------------------------------------
PRACTICE = [p for p, _ in CORPUS] + [
    r"^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$",
    r"^\+?[1-9]\d{1,14}$",
    r"^(?:[\u2700-\u27BF]|[\U0001F300-\U0001F5FF]|[\U0001F600-\U0001F64F])+$",
    r"^[\p{L}_][\p{L}\p{N}_]*$",
    r"^[^\W\d]\w*$",
    r"^(?P<year>\d{4})-(?P<month>\d{2})$",
]


@pytest.mark.parametrize("pattern", PRACTICE)
def test_practice_patterns_compile(pattern: str) -> None:
    LazyDFA(build_nfa(parse_regex(pattern)))


@pytest.mark.parametrize(("pattern", "examples"), CORPUS)
def test_corpus_examples_match(pattern: str, examples: list[str]) -> None:
    for example in examples:
        assert full_match(pattern, example), example
        assert regex.fullmatch(pattern, example)


# -- errors carry the column -----------------------------------------------------------
BAD = [
    ("abc(", 4, "unterminated subpattern"),
    ("a)", 2, "unbalanced parenthesis"),
    ("a**", 3, "multiple repeat"),
    ("*a", 1, "nothing to repeat"),
    ("[a-", 1, "unterminated character set"),
    ("ab[z-a]", 4, "bad character range"),
    ("x{3,2}", 3, "min repeat greater than max repeat"),
    (r"ab\q", 3, "bad escape"),
    (r"\x4", 1, "incomplete escape"),
    ("(?<=a)b", 1, "lookbehind"),
    ("a(?=b)", 2, "lookahead"),
    (r"(a)\1", 4, "backreference"),
    (r"a\bc", 2, "word boundary"),
    ("a*+", 3, "possessive"),
    ("(?i)abc", 3, "inline flag"),
    ("a^b", 2, "not at the start"),
    ("a$b", 2, "not at the end"),
    (r"\p{Foo}", 1, "unknown Unicode property"),
    ("(?P<1>a)", 5, "bad group name"),
]


@pytest.mark.parametrize(("pattern", "column", "words"), BAD)
def test_errors_name_the_column(pattern: str, column: int, words: str) -> None:
    with pytest.raises(CompileError) as info:
        LazyDFA(build_nfa(parse_regex(pattern)))
    assert info.value.location == column, str(info.value)
    assert words in str(info.value)


def test_empty_language_is_an_error() -> None:
    with pytest.raises(CompileError, match="matches no string"):
        build_nfa(parse_regex(r"[^\s\S]"))


# -- pathological patterns are bounded ------------------------------------------------
def test_exponential_alternation_is_fast() -> None:
    started = time.perf_counter()
    dfa = LazyDFA(build_nfa(parse_regex(r"(a|aa)*b{1000}")))
    assert dfa.materialize(5000)
    state = dfa.walk(dfa.start, b"aaa" + b"b" * 1000)
    assert dfa.accepting[state]
    assert time.perf_counter() - started < 5


def test_nested_counted_repeats_are_refused() -> None:
    started = time.perf_counter()
    with pytest.raises(LimitExceeded) as info:
        build_nfa(parse_regex(r"((a{100}){100}){100}"))
    assert info.value.location is not None
    assert time.perf_counter() - started < 5


def test_dfa_state_bound() -> None:
    dfa = LazyDFA(build_nfa(parse_regex(r"(a|b)*a(a|b){20}")), max_states=1000)
    with pytest.raises(LimitExceeded, match="more than 1000 states"):
        dfa.materialize(10**6)


def test_huge_repeat_bound_is_refused() -> None:
    with pytest.raises(CompileError, match="repetition bound"):
        parse_regex("a{1000000}")

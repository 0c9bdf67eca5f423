"""Value automata of JSON Schema (strings, numbers, formats) and the boolean operations
under them, checked against independent oracles: Python's ``Decimal``, the ``regex``
module, ``ipaddress``, ``datetime`` and ``json``."""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import json
from decimal import Decimal, localcontext

import pytest
import regex
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tether.automata import DEAD, LazyDFA, build_nfa, parse_regex
from tether.automata.boolean import difference, intersect, is_empty
from tether.automata.regex_ast import Automaton
from tether.errors import CompileError, LimitExceeded
from tether.schema.formats import format_expr
from tether.schema.number_exponents import MANTISSA_DIGITS
from tether.schema.numbers import json_integer, json_number
from tether.schema.strings import json_string

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


class Lang:
    """Membership and prefix viability in a node's language."""

    def __init__(self, node) -> None:
        self.dfa = LazyDFA(build_nfa(node))

    def __contains__(self, text: str) -> bool:
        state = self.dfa.walk(self.dfa.start, text.encode())
        return state != DEAD and bool(self.dfa.accepting[state])

    def viable(self, text: str) -> bool:
        return self.dfa.walk(self.dfa.start, text.encode()) != DEAD


# -- boolean operations --------------------------------------------------------------------
def test_intersection_and_difference_agree_with_brute_force() -> None:
    a, b = parse_regex(r"[a-c]{1,4}"), parse_regex(r".*b.*")
    both, only_a = Lang(intersect(a, b)), Lang(difference(a, b))
    for k in range(6):
        for word in map("".join, itertools.product("abcd", repeat=k)):
            in_a = regex.fullmatch(r"[a-c]{1,4}", word) is not None
            assert (word in both) == (in_a and "b" in word)
            assert (word in only_a) == (in_a and "b" not in word)


def test_empty_intersection_is_detected() -> None:
    assert is_empty(intersect(parse_regex("a+"), parse_regex("b+")))
    assert is_empty(difference(parse_regex("a|b"), parse_regex("[ab]")))


def test_automaton_nodes_compose_with_regex_nodes() -> None:
    from tether.automata.regex_ast import Concat, Repeat, literal

    inner = intersect(parse_regex("[0-9]+"), parse_regex("[0-4]*"))
    lang = Lang(Concat((literal("<"), Repeat(inner, 1, 2), literal(">"))))
    assert "<12>" in lang and "<1234>" in lang and "<5>" not in lang and "<>" not in lang


# -- integers ------------------------------------------------------------------------------
@pytest.mark.parametrize(("low", "high"), [(-37, 1234), (0, 2**63 - 1), (5, None), (None, -3),
                                           (None, None), (0, 0), (-10, -10), (99, 101)])
def test_integer_ranges_at_the_edges(low: int | None, high: int | None) -> None:
    lang = Lang(json_integer(minimum=low, maximum=high))
    probes = {0, 1, -1, 9, 10, 99, 100, 2**63 - 1, 2**63, -(2**63)}
    for bound in (low, high):
        if bound is not None:
            probes |= {bound - 1, bound, bound + 1, bound * 10, -bound}
    for v in probes:
        expected = (low is None or v >= low) and (high is None or v <= high)
        assert (str(v) in lang) == expected, v
    assert ("-0" in lang) == ((low is None or low <= 0) and (high is None or high >= 0))
    for bad in ("01", "+1", "1.0", "", "-", "00"):
        assert bad not in lang


@SETTINGS
@given(st.integers(-10**6, 10**6), st.integers(0, 10**5) | st.none(),
       st.integers(-10**6, 10**6) | st.none(), st.integers(1, 40) | st.none(),
       st.lists(st.integers(-10**7, 10**7), max_size=30))
def test_random_integer_schemas(low, span, value, step, samples) -> None:
    high = None if span is None or low is None else low + span
    if value is None:
        low = None
    try:
        lang = Lang(json_integer(minimum=low, maximum=high, multiple_of=step))
    except CompileError:  # no multiple in a narrow range
        assert step is not None and not any(
            v % step == 0 for v in range(low, high + 1))  # type: ignore[arg-type]
        return
    for v in samples + [x for x in (low, high) if x is not None]:
        expected = ((low is None or v >= low) and (high is None or v <= high)
                    and (step is None or v % step == 0))
        assert (str(v) in lang) == expected, v
        if expected:  # every prefix of a valid text is viable
            assert all(lang.viable(str(v)[:k]) for k in range(len(str(v))))


def test_empty_integer_range_is_a_compile_error() -> None:
    with pytest.raises(CompileError) as e:
        json_integer(minimum=5, maximum=3, location="/properties/n")
    assert str(e.value.location).startswith("/properties/n")


# -- numbers -------------------------------------------------------------------------------
def _number_texts(value: Decimal) -> set[str]:
    """Spellings of ``value``: plain, with trailing zeros, and json.dumps of the float."""
    plain = format(value, "f")
    out = {plain, json.dumps(float(value))}
    out.add(plain + ("0" if "." in plain else ".0"))
    return out


decimals = st.decimals(min_value=Decimal("-1000"), max_value=Decimal("1000"), places=3,
                       allow_nan=False, allow_infinity=False)


@SETTINGS
@given(decimals | st.none(), decimals | st.none(), st.booleans(), st.booleans(),
       st.lists(decimals, min_size=1, max_size=15))
def test_random_number_bounds(low, high, excl_low, excl_high, samples) -> None:
    if low is not None and high is not None and (low > high or (
            low == high and (excl_low or excl_high))):
        with pytest.raises(CompileError):
            json_number(minimum=low, maximum=high, exclusive_minimum=excl_low,
                        exclusive_maximum=excl_high)
        return
    lang = Lang(json_number(minimum=low, maximum=high, exclusive_minimum=excl_low,
                            exclusive_maximum=excl_high))
    probes = list(samples) + [b + d for b in (low, high) if b is not None
                              for d in (Decimal(0), Decimal("0.001"), Decimal("-0.001"))]
    for v in probes:
        expected = ((low is None or (v > low if excl_low else v >= low))
                    and (high is None or (v < high if excl_high else v <= high)))
        for text in _number_texts(v):
            if "e" in text.lower() and Decimal(text) != v:
                continue
            accepted = text in lang
            if "e" in text.lower():  # exponent forms: sound (never wrong), maybe lost
                assert not accepted or expected, text
            else:
                assert accepted == expected, (text, low, high)


@pytest.mark.parametrize("text", ["1e-05", "2.5e-07", "1e+20", "1.5E3", "0e0", "-0.0"])
def test_exponent_forms_with_sign_bounds(text: str) -> None:
    value = Decimal(text)
    assert (text in Lang(json_number(minimum=Decimal(0)))) == (value >= 0)
    positive = Lang(json_number(minimum=Decimal(0), exclusive_minimum=True))
    assert (text in positive) == (value > 0)
    assert text in Lang(json_number())


@pytest.mark.parametrize(("low", "high", "text", "expected"), [
    ("0.25", None, "2.5e-01", True), ("0.25", None, "2.4e-1", False),
    ("0.25", None, "1e+300", True), ("-0.25", "1.5", "1e-05", True),
    (None, "1.5", "1.6e0", False), (None, "1.5", "1.5E+00", True),
    ("100", None, "9.99e1", False), ("100", None, "1e2", True),
])
def test_scientific_forms_with_bounds(low, high, text, expected) -> None:
    lang = Lang(json_number(minimum=low and Decimal(low), maximum=high and Decimal(high)))
    assert (text in lang) == expected


@pytest.mark.parametrize(("step", "good", "bad"), [
    ("0.01", ["1.25", "-3", "0.1", "7.50", "0", "1e-2"], ["1.255", "0.001", "1e-3"]),
    ("2.5", ["5", "7.5", "-2.5", "0.0"], ["1", "2.4", "2.55"]),
    ("1", ["3", "3.0", "-4.00"], ["3.5", "0.1"]),
])
def test_decimal_multiple_of(step: str, good: list[str], bad: list[str]) -> None:
    lang = Lang(json_number(multiple_of=Decimal(step)))
    assert all(t in lang for t in good)
    assert not any(t in lang for t in bad)


# Number texts in every spelling a writer may use: plain, padded, exponent forms whose
# mantissa is any of the value's shifts (up to MANTISSA_DIGITS digits), signs on both parts.
def _spelled(value: Decimal, shift: int, exp_char: str, padding: int) -> str | None:
    mantissa = value.scaleb(-shift)
    text = format(mantissa.normalize(), "f") if mantissa else "0"
    if padding:
        text += ("" if "." in text else ".") + "0" * padding
    if sum(c.isdigit() for c in text) > MANTISSA_DIGITS:
        return None
    sign = "+" if shift >= 0 and padding % 2 else ""
    return f"{text}{exp_char}{sign}{shift}"


bounds = st.sampled_from(["1", "5", "0.25", "-3", "1e200", "1e-300", "-0.001", "12345.678",
                          "0", "7e-5", "-1e10"]).map(Decimal)
steps = st.sampled_from(["0.5", "0.01", "7", "2.5", "1e3", "0.12", "1"]).map(Decimal)
values = (st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=4,
                      allow_nan=False, allow_infinity=False)
          | st.sampled_from(["1e2", "1.5", "1e-300", "2e-300", "1e200", "9.99e199", "-3",
                             "0.25", "0.2499", "12345.678", "7e-5", "0"]).map(Decimal))


@settings(SETTINGS, max_examples=30, phases=[Phase.explicit, Phase.generate])
@given(st.none() | bounds, st.none() | bounds, st.booleans(), st.booleans(),
       st.none() | steps, st.lists(st.tuples(values, st.integers(-25, 25),
                                              st.sampled_from("eE"), st.integers(0, 2)),
                                    min_size=5, max_size=20))
def test_exponent_forms_answer_as_decimal_arithmetic(low, high, low_open, high_open, step,
                                                     texts) -> None:
    """Every exponent-form text with a mantissa of up to MANTISSA_DIGITS digits is accepted
    exactly when its value satisfies the keywords (jsonschema's answer, in exact
    arithmetic); no text outside is ever accepted."""
    try:
        lang = Lang(json_number(minimum=low, maximum=high, exclusive_minimum=low_open,
                                exclusive_maximum=high_open, multiple_of=step))
    except CompileError:  # an empty range, or no multiple of the step inside it
        assert low is not None and high is not None
        with localcontext(prec=1_000):
            first = (low / step).to_integral_value(rounding="ROUND_CEILING") * step \
                if step else low
            assert not (first < high or (first == high and not high_open)
                        or (first == low and not low_open and low < high)) or low > high \
                or (low == high and (low_open or high_open))
        return
    for value, shift, exp_char, padding in texts:
        text = _spelled(value, shift, exp_char, padding)
        if text is None:
            continue
        v = Decimal(text)
        with localcontext(prec=1_000):  # exact remainders for quotients up to 1e500
            expected = ((low is None or (v > low if low_open else v >= low))
                        and (high is None or (v < high if high_open else v <= high))
                        and (step is None or v % step == 0))
        assert (text in lang) == expected, (text, low, high, step)


@pytest.mark.parametrize(("schema", "text"), [
    ({"multiple_of": Decimal("0.5")}, "1e2"), ({"multiple_of": Decimal("0.5")}, "15e-1"),
    ({"multiple_of": Decimal("1e-300")}, "1e-300"), ({"maximum": Decimal("1e200")}, "5"),
    ({"maximum": Decimal("1e200")}, "1E200"), ({"minimum": Decimal("3"),
                                                 "maximum": Decimal("3")}, "0.03e+2"),
])
def test_number_rows_of_the_reliability_issue(schema, text) -> None:
    assert text in Lang(json_number(**schema))


def test_huge_multiple_of_is_refused_at_its_keyword() -> None:
    with pytest.raises(CompileError) as e:
        json_number(multiple_of=Decimal("0.0000001234567"), location="/x")
    assert e.value.location == "/x/multipleOf"


# -- strings -------------------------------------------------------------------------------
ALPHABET = ["a", "b", "7", "é", "\n", '"', "\\", "/", "😀"]


def _spellings(value: str) -> list[str]:
    """The JSON encodings of ``value`` our policy accepts (raw, short escapes, \\u00XX)."""
    u_escaped = "".join(f"\\u{ord(c):04X}" if ord(c) < 128 else c for c in value)
    return [json.dumps(value, ensure_ascii=False), f'"{u_escaped}"']


def _deterministic(node: Automaton) -> bool:
    """Whether no state of ``node`` has two moves on one byte."""
    edges = sorted(map(tuple, node.edges.tolist()))
    return all(a[0] != b[0] or b[1] > a[2] for a, b in zip(edges, edges[1:], strict=False))


def _ecma_search(pattern: str, value: str) -> bool:
    return regex.search(pattern.replace("$", r"\Z"), value) is not None


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 4) | st.none(),
       st.lists(st.sampled_from(["^a", "b$", "a|7", "^[ab]*$", "é.", "^$|b", "x^", "a(b|$)"]),
                max_size=2),
       st.lists(st.sampled_from(["^7", "\\\\"]), max_size=1),
       st.lists(st.sampled_from(["", "a", "ab"]), max_size=2),
       st.lists(st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join), max_size=25))
def test_random_string_schemas(low, extra, patterns, excluded, values, samples) -> None:
    high = None if extra is None else low + extra
    try:
        node = json_string(min_length=low, max_length=high, patterns=patterns,
                           excluded_patterns=excluded, excluded_values=values)
    except CompileError:
        return  # unsatisfiable; the brute-force check below would find nothing
    if isinstance(node, Automaton):  # (read by its own moves in compiled walks)
        assert _deterministic(node)
    lang = Lang(node)
    for value in samples:
        expected = (low <= len(value) and (high is None or len(value) <= high)
                    and all(_ecma_search(p, value) for p in patterns)
                    and not any(_ecma_search(p, value) for p in excluded)
                    and value not in values)
        for text in _spellings(value):
            assert (text in lang) == expected, (text, low, high, patterns, excluded, values)
        if expected:
            text = _spellings(value)[0]
            assert all(lang.viable(text[:k]) for k in range(len(text)))
        if not value.isascii():  # \uXXXX for non-ASCII is outside the policy
            assert json.dumps(value) not in lang


def test_a_pattern_alone_is_an_automaton_unless_its_dfa_is_large() -> None:
    """A pattern alone is encoded from its DFA (read by its own moves in masks); one whose
    DFA has more than MAX_ALONE_STATES states stays a tree. The same strings either way."""
    small_pattern, large_pattern = r"^\d{3}-\d{4}$", "^[ab]*a[ab]{10}$"
    small = json_string(patterns=[small_pattern])
    assert isinstance(small, Automaton) and _deterministic(small)
    large = json_string(patterns=[large_pattern])  # 2,049 DFA states
    assert not isinstance(large, Automaton)
    values = ["555-1234", "55-1234", "x555-1234", "a" * 11, "b" + "a" * 11, "ab" * 6,
              "a" + "b" * 10, "ba" + "b" * 9, "a" + "b" * 9, ""]
    for node, pattern in ((small, small_pattern), (large, large_pattern)):
        lang = Lang(node)
        for value in values:
            assert (json.dumps(value) in lang) == _ecma_search(pattern, value), (pattern, value)


NAME_PIECES = ["a", "ab", "é", "😀", '"', "\\", "\n", "k"]


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(NAME_PIECES), max_size=3).map("".join),
                min_size=1, max_size=5),
       st.lists(st.lists(st.sampled_from(NAME_PIECES), max_size=4).map("".join), max_size=30))
def test_keys_other_than_names(names, samples) -> None:
    """Any string but a few names (the keys an object does not declare, built straight
    from the names' trie): every spelling of a name refused, of anything else accepted,
    one deterministic automaton."""
    node = json_string(excluded_values=names)
    assert isinstance(node, Automaton) and _deterministic(node)
    lang = Lang(node)
    for value in [*names, *samples, *(n[:k] for n in names for k in range(len(n)))]:
        for text in _spellings(value):
            assert (text in lang) == (value not in names), (text, names)


def test_string_encoding_policy() -> None:
    lang = Lang(json_string())
    assert '"a\\u00e9"' not in lang  # non-ASCII is written raw only
    assert '"\\ud83d\\ude00"' not in lang
    for bad in ['"\n"', '"\\x"', '"\\u00"', '"a', 'a"', '"\\"']:
        assert bad not in lang
    for good in ['""', '"\\/\\b\\f\\n\\r\\t"', '"\\u001F\\u007f"', '"é😀"']:
        assert good in lang


def test_lengths_count_code_points() -> None:
    lang = Lang(json_string(min_length=2, max_length=2))
    assert '"é😀"' in lang and '"\\n\\u0041"' in lang and '"ab"' in lang
    assert '"a"' not in lang and '"abc"' not in lang


def test_long_max_length_is_exact() -> None:
    lang = Lang(json_string(max_length=1000))
    assert json.dumps("é" * 1000, ensure_ascii=False) in lang
    assert json.dumps("a" * 1001) not in lang


def test_huge_length_is_a_located_limit() -> None:
    with pytest.raises(LimitExceeded) as e:
        json_string(max_length=100_000, location="/properties/s")
    assert e.value.location == "/properties/s/maxLength"


def test_unsatisfiable_strings_are_compile_errors() -> None:
    with pytest.raises(CompileError):
        json_string(min_length=5, max_length=3)
    with pytest.raises(CompileError):
        json_string(patterns=["^a+$"], excluded_patterns=["a"])


def test_unsupported_pattern_names_the_pattern_pointer() -> None:
    with pytest.raises(CompileError) as e:
        json_string(patterns=["(?<=a)b"], location="/properties/p")
    assert e.value.location == "/properties/p/pattern"


def test_ecma_classes() -> None:
    assert '"\\u0661"' not in Lang(json_string(patterns=[r"^\d$"]))  # ASCII \d
    assert '"\u00a0"' in Lang(json_string(patterns=[r"^\s$"]))  # ECMA \s
    assert '"\\r"' not in Lang(json_string(patterns=[r"^.$"]))  # . excludes CR


# -- formats -------------------------------------------------------------------------------
def _format(name: str) -> Lang:
    return Lang(json_string(format=name))


IPV6 = ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "::ffff:1.2.3.4",
        "1::2:3", "fe80::1:2:3:4:5", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9",
        ":::", "1::2::3", "12345::", "1:2:3:4:5:6:7", "::1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4",
        "1:::2", "::1.2.3.256", "a:b:c:d:e:f:0:0", "abcd::ef01:2345", ":1::", "1::2:"]


def test_ipv6_agrees_with_ipaddress() -> None:
    lang = _format("ipv6")
    for text in IPV6:
        try:
            ipaddress.IPv6Address(text)
            valid = True
        except ValueError:
            valid = False
        assert (json.dumps(text) in lang) == valid, text


@SETTINGS
@given(st.ip_addresses(v=6).map(lambda a: a.compressed)
       | st.ip_addresses(v=6).map(lambda a: a.exploded))
def test_random_ipv6_addresses(text: str) -> None:
    assert json.dumps(text) in _LANGS["ipv6"]


def test_ipv4() -> None:
    lang = _format("ipv4")
    for text, valid in [("0.0.0.0", True), ("255.255.255.255", True), ("256.1.1.1", False),
                        ("01.1.1.1", False), ("1.1.1", False), ("1.1.1.1.", False)]:
        assert (json.dumps(text) in lang) == valid, text


def test_dates_agree_with_datetime() -> None:
    lang = _format("date")
    day = datetime.date(1896, 1, 1)
    while day.year < 2104:
        assert json.dumps(day.isoformat()) in lang
        day += datetime.timedelta(days=3)
    for text in ["1900-02-29", "2001-02-29", "2020-04-31", "2020-13-01", "2020-00-10",
                 "2020-01-32", "2020-1-01", "20200101"]:
        assert json.dumps(text) not in lang, text
    for text in ["2000-02-29", "2004-02-29", "2400-02-29"]:
        assert json.dumps(text) in lang


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("date-time", ["2023-01-15T10:30:00Z", "2023-01-15t10:30:00.123+05:30",
                   "1998-12-31T23:59:60Z"],
     ["2023-01-15T10:30:00", "2023-01-15 10:30:00Z", "2023-01-15T24:00:00Z",
      "2023-01-15T10:30:60Z"]),
    ("time", ["10:30:00Z", "23:59:59.5-08:00"], ["10:30", "10:30:00", "25:00:00Z"]),
    ("duration", ["P1D", "PT1H", "P1Y2M3DT4H5M6S", "P4W", "PT36H"],
     ["P", "PT", "P1H", "1D", "P1DT", "P1W2D"]),
    ("email", ["a@b.co", "first.last+tag@example-domain.org"],
     ["a", "@b.co", "a@", "a..b@c.d", "a@-b.com"]),
    ("hostname", ["example.com", "a", "xn--bcher-kva.example", "a-b.c-d"],
     ["-a.com", "a-.com", "a..b", "a" * 64, ""]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"],
     ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"]),
    ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c",
             "http://[::1]:8080/", "file:///etc/hosts"],
     ["example.com", "//example.com", "http://exa mple.com", "1http://x", "http://x/%zz"]),
    ("uri-reference", ["/a/b", "../x", "#frag", "", "https://x.y"], ["\\\\x", "a b"]),
    ("json-pointer", ["", "/a/b", "/a~0b~1c"], ["a", "/a~2"]),
])
def test_format_examples(name: str, good: list[str], bad: list[str]) -> None:
    lang = _LANGS[name]
    for text in good:
        assert json.dumps(text) in lang, text
    for text in bad:
        assert json.dumps(text) not in lang, text


def test_formats_agree_with_jsonschema_on_good_examples() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for name in ("date", "date-time", "ipv4", "ipv6", "email", "duration", "uuid"):
        if name not in checker.checkers:
            continue
        for text in ["2023-01-15", "2023-01-15T10:30:00Z", "10.0.0.1", "::1", "a@b.co", "P1D",
                     "123e4567-e89b-12d3-a456-426614174000", "2023-02-30", "1.2.3", "x"]:
            if json.dumps(text) in _LANGS[name]:
                assert checker.conforms(text, name), (name, text)


def test_unknown_and_number_formats_are_ignored() -> None:
    for name in ("int32", "int64", "double", "made-up"):
        assert format_expr(name) is None
    assert '"anything"' in Lang(json_string(format="int32"))


def test_formats_validators_check_but_we_cannot_are_refused() -> None:
    for name in ("regex", "iri", "idn-email"):
        with pytest.raises(CompileError, match="cannot be enforced"):
            format_expr(name, "/properties/p/format")


def test_uri_template_and_relative_json_pointer() -> None:
    lang = Lang(json_string(format="uri-template"))
    assert '"http://x.org/{id}/a{?q,lang}"' in lang
    assert '"http://x.org/{"' not in lang
    lang = Lang(json_string(format="relative-json-pointer"))
    assert '"0/a~1b"' in lang and '"1#"' in lang and '"01"' not in lang


def test_format_with_pattern_and_length() -> None:
    lang = Lang(json_string(format="date", patterns=["^2023"], max_length=10))
    assert '"2023-05-01"' in lang and '"2024-05-01"' not in lang


class _LazyLangs(dict):
    def __missing__(self, name: str) -> Lang:
        self[name] = _format(name)
        return self[name]


_LANGS = _LazyLangs()

"""The process-wide caches of automaton pieces: bounded, keyed by content only, and
invisible in results (a piece built again is the same; a location is the caller's)."""

from __future__ import annotations

import pytest

from tether.automata.boolean import difference_dfa, to_dfa
from tether.automata.pieces import PieceCache, clear_piece_caches
from tether.errors import CompileError, LimitExceeded
from tether.schema.strings import json_string


def test_piece_cache_is_bounded_by_entries_and_weight() -> None:
    cache: PieceCache[int] = PieceCache("test", max_entries=3, max_weight=10,
                                        weight=lambda v: v)
    for k in range(5):
        assert cache.get(k, lambda k=k: k + 1) == k + 1
    assert len(cache) <= 3 and cache.weight <= 10
    assert cache.get(4, lambda: -1) == 5  # the most recent is kept
    assert cache.get(99, lambda: 11) == 11  # heavier than the whole budget: not kept
    assert cache.get(99, lambda: 12) == 12
    calls = []

    def failing() -> int:
        calls.append(1)
        raise ValueError

    for _ in range(2):
        with pytest.raises(ValueError):
            cache.get("bad", failing)
    assert len(calls) == 2  # errors are not cached


def _same_language(a, b) -> bool:
    da, db = to_dfa(a, max_states=200_000), to_dfa(b, max_states=200_000)
    return difference_dfa(da, db).is_empty() and difference_dfa(db, da).is_empty()


@pytest.mark.parametrize("kwargs", [
    {"max_length": 40}, {"excluded_values": ("id", "name", "é")},
    {"patterns": ("^a|b$",), "excluded_patterns": ("x",)}, {"format": "email"}, {}])
def test_string_pieces_are_located_by_the_caller(kwargs) -> None:
    first = json_string(location="/a", **kwargs)
    second = json_string(location="/b", **kwargs)
    assert first.pos == "/a" and second.pos == "/b"
    clear_piece_caches()
    fresh = json_string(location="/c", **kwargs)
    assert fresh.pos == "/c"
    assert _same_language(first, fresh)


def test_refused_strings_raise_at_each_callers_location() -> None:
    for where in ("/p", "/q", "/p"):
        with pytest.raises(LimitExceeded) as e:
            json_string(max_length=100_000, location=where)
        assert e.value.location == f"{where}/maxLength"
        with pytest.raises(CompileError) as e:
            json_string(patterns=("(?<=x)",), location=where)
        assert e.value.location == f"{where}/pattern" and e.value.source == "(?<=x)"
        with pytest.raises(CompileError) as e:
            json_string(min_length=3, patterns=("^a?$",), location=where)
        assert e.value.location == where


def _automaton(n, edges, start, accepting):
    import numpy as np

    from tether.automata.regex_ast import Automaton

    array = np.array(edges, dtype=np.int32).reshape(-1, 4)
    array.flags.writeable = False
    return Automaton(n, array, start, accepting)


def test_embedded_automata_are_trimmed() -> None:
    """Copied into an NFA, an automaton keeps only the states that reach acceptance
    (a dead cycle, a start that reaches nothing), so the NFA stays trimmed."""
    from tether.automata.dfa import DEAD, LazyDFA
    from tether.automata.nfa import build_nfa
    from tether.automata.regex_ast import Alternate, CharSet, Concat, Repeat

    dead_start = _automaton(2, [[0, 97, 97, 0]], 0, (1,))  # 'a'* never reaching 1
    with pytest.raises(CompileError):
        build_nfa(dead_start)
    d = LazyDFA(build_nfa(Concat((CharSet(((120, 120),)), Repeat(dead_start, 0, None),
                                  Alternate((dead_start, CharSet(((98, 98),))))))))
    assert d.accepting[d.walk(d.start, b"xb")] and d.walk(d.start, b"xa") == DEAD
    dead_cycle = _automaton(4, [[0, 97, 97, 1], [0, 98, 98, 2], [2, 99, 99, 2],
                                [1, 100, 100, 3]], 0, (3,))
    d = LazyDFA(build_nfa(dead_cycle))
    assert d.accepting[d.walk(d.start, b"ad")] and d.walk(d.start, b"b") == DEAD

"""Byte-level automata (SPEC §3): regex syntax → AST → UTF-8 byte NFA → lazy DFA.

Each layer has one job: :mod:`.regex_parser` reads Python-``re`` syntax into the
:mod:`.regex_ast` tree (errors carry the column), :mod:`.unicode_sets` knows the
character sets behind ``\\d \\w \\s \\p{..}``, :mod:`.utf8` turns code-point ranges into
byte-range sequences, :mod:`.nfa` builds a trimmed byte NFA with a bound on its size, and
:mod:`.dfa` determinises it lazily with a bound on its states.
"""

from tether.automata.dfa import DEAD, LazyDFA
from tether.automata.nfa import Nfa, build_nfa
from tether.automata.regex_parser import parse_regex

__all__ = ["DEAD", "LazyDFA", "Nfa", "build_nfa", "parse_regex"]

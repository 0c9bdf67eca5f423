"""`tether.compile`: turn a constraint source into a :class:`Compiled` for a vocabulary.

Compilation is cached per (constraint, vocabulary fingerprint) in a thread-safe LRU
bounded in entries and in the memory their cached masks and tables hold, so every request
with the same constraint shares one compiled form and its per-state masks (SPEC §3).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import replace

from tether.automata.dfa import LazyDFA
from tether.automata.nfa import build_nfa
from tether.automata.regex_ast import Alternate, Node, literal
from tether.automata.regex_parser import parse_regex
from tether.constraints import Choices, Constraint, Grammar, JsonSchema, Regex
from tether.engine.compiled import Compiled
from tether.engine.json_checks import JsonChecksCompiled
from tether.engine.pda import PushdownAutomaton
from tether.engine.pushdown import PushdownCompiled
from tether.engine.regular import RegularCompiled
from tether.errors import CompileError, LimitExceeded, TetherError
from tether.gc_pause import paused_gc
from tether.grammar.ir import Grammar as GrammarIR
from tether.grammar.ir import deep_recursion
from tether.grammar.lower import check_grammar, inline, merge_equal_rules, recursive_rules
from tether.vocab import Vocabulary

MAX_CACHED_CONSTRAINTS = 64
# What the cached constraints may hold at most (their masks and tables grow as they are
# used; Compiled.held_bytes): a server compiling a new schema per request stays bounded
# (tether serve sets its own bound), and the Python grammar's pieces, ~100 MB once its
# warm-up is walked (docs/grammars.md), stay cached beside other constraints.
MAX_CACHED_BYTES = 256 << 20
# Compile-time work (masks computed ahead) stops once compiling has taken this long.
COMPILE_TIME_TARGET_S = 0.020

# Inside brackets of an indentation-aware grammar: blanks, line breaks, continuation
# backslashes and comments (which run to the end of their line).
BRACKET_SPACE = parse_regex(r"(?:[ \t\f\r\n]|\\\r?\n|#[^\r\n]*\r?\n)*")

_cache: OrderedDict[tuple[Constraint, str], Compiled] = OrderedDict()
_cache_lock = threading.Lock()
# Constraints kept compiled whatever they hold (keep_resident), outside the bounds above.
_resident: set[Constraint] = set()


def compile(constraint: Constraint | str, vocab: Vocabulary) -> Compiled:  # noqa: A001
    """Compile ``constraint`` for ``vocab`` (a plain ``str`` is taken as a regex)."""
    if isinstance(constraint, str):
        constraint = Regex(constraint)
    if not isinstance(constraint, Regex | Choices | JsonSchema | Grammar):
        hint = (" (wrap a schema in tether.JsonSchema(...))"
                if isinstance(constraint, dict | bool) else "")
        raise CompileError(f"cannot compile a {type(constraint).__name__}; expected "
                           f"tether.Regex, tether.Choices, tether.JsonSchema or "
                           f"tether.Grammar{hint}")
    if not isinstance(vocab, Vocabulary):
        raise TetherError(f"vocab must be a tether.Vocabulary, not {type(vocab).__name__} "
                          "(tether.Vocabulary.from_file(path) reads a tokenizer file)")
    key = (constraint, vocab.fingerprint)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and not hit.saturated:
            _cache.move_to_end(key)
            return hit
    with paused_gc():
        compiled = _compile_uncached(constraint, vocab)
    with _cache_lock:
        _cache[key] = compiled
        _evict()
    return compiled


def _evict(keep: int = 1) -> None:
    """Drop the least recently used constraints past the cache's bounds (all but the
    newest ``keep``: the constraint just compiled is kept whatever it holds); resident
    ones stay and do not count."""
    evictable = [key for key in _cache if key[0] not in _resident]
    held = sum(_cache[key].held_bytes for key in evictable)
    count = len(evictable)
    for key in evictable[:max(count - keep, 0)]:
        if count <= MAX_CACHED_CONSTRAINTS and held <= MAX_CACHED_BYTES:
            break
        held -= _cache.pop(key).held_bytes
        count -= 1


def shrink_cache() -> None:
    """Evict past the cache's bounds now, the newest constraint included: what a cached
    constraint holds grows as it is used (its masks), so a server calls this after each
    request."""
    with _cache_lock:
        _evict(keep=0)


def keep_resident(constraint: Constraint) -> None:
    """Keep ``constraint`` compiled (per vocabulary) once it is, whatever it holds: out
    of the cache's bounds and never evicted. For the few costly constraints a process
    reuses — a server keeps its built-in languages (the Python grammar: ~1 s to compile,
    ~100 MB of pieces once used, more than a server's whole bound for the rest)."""
    with _cache_lock:
        _resident.add(constraint)


def cached_bytes() -> int:
    """What the cached constraints hold (the sum of their ``held_bytes``)."""
    with _cache_lock:
        return _held()


def _held() -> int:
    return sum(c.held_bytes for c in _cache.values())


def limit_cache(max_bytes: int) -> None:
    """Bound what the cached constraints may hold (default ``MAX_CACHED_BYTES``; a server
    sets its own), evicting now past it."""
    global MAX_CACHED_BYTES
    with _cache_lock:
        MAX_CACHED_BYTES = max_bytes
        _evict()


def clear_cache() -> None:
    """Forget every compiled constraint (benchmarks time compiles from scratch), and
    which were to be kept resident.

    The bounded, process-wide caches of *pieces* keyed by their content (a string
    value's automaton, a pattern's DFA, a character set's UTF-8 automaton…; see
    :mod:`tether.automata.pieces`) are kept, as a server keeps them: none holds a whole
    constraint, and a compile's result never depends on them, only its time.
    :func:`tether.automata.pieces.clear_piece_caches` empties those too."""
    with _cache_lock:
        _cache.clear()
        _resident.clear()


def _grammar_of(constraint: JsonSchema | Grammar) -> GrammarIR:
    """The grammar IR of a schema or grammar source (front ends imported on first use)."""
    if isinstance(constraint, JsonSchema):
        from tether.schema import compile_schema

        return compile_schema(constraint)
    grammar = _grammar_text_of(constraint)
    longest = grammar.longest | frozenset(constraint.longest)
    return replace(grammar, longest=longest) if longest != grammar.longest else grammar


def _grammar_text_of(constraint: Grammar) -> GrammarIR:
    if constraint.syntax == "gbnf":
        from tether.grammar.gbnf import parse_gbnf

        return parse_gbnf(constraint.text, start=constraint.start)
    from tether.grammar.lark import parse_lark

    if constraint.indent is None:
        return parse_lark(constraint.text, start=constraint.start)
    from tether.grammar.layout import resolve_layout

    ignored = "_ignored"
    grammar = parse_lark(constraint.text, start=constraint.start, ignore_rule=ignored,
                         longest=frozenset(constraint.longest))
    return resolve_layout(grammar, ignored=ignored, unit=constraint.indent,
                          bracket_space=BRACKET_SPACE, max_depth=constraint.max_depth)


def to_automaton(grammar: GrammarIR, *, pushdown: bool = False
                 ) -> LazyDFA | PushdownAutomaton:
    """The lazy automaton that runs ``grammar``: a grammar whose rules never refer back
    to themselves is a regular language, inlined into one regular expression and run by
    the lazy DFA (the fastest engine); a recursive one, or one with an any-order group
    (which the pushdown engine builds lazily: as a regular expression it would spell out
    every order), runs on the pushdown automaton. ``pushdown=True``
    keeps the rules as calls even when the grammar is not recursive: each rule is then
    built once however many times it is used, and masks are composed per rule (see
    :mod:`tether.engine.pushdown`) — the better choice for large structured grammars
    such as JSON Schemas, whose inlined automaton can be huge; such an automaton uses one
    class per byte, so no class trie is built for it. Rules matched longest need the
    pushdown engine too (an inlined rule has no end to restrict)."""
    with deep_recursion(grammar.source):
        grammar = check_grammar(grammar)
    if not pushdown and not grammar.longest and not recursive_rules(grammar):
        try:
            with deep_recursion(grammar.source):  # (a long chain of rules nests deeply)
                return LazyDFA(build_nfa(inline(grammar), source=grammar.source),
                               source=grammar.source)
        except LimitExceeded:
            pass  # too large once inlined: the pushdown engine builds each rule once
    return PushdownAutomaton(merge_equal_rules(grammar), byte_classes=not pushdown)


def _compile_uncached(constraint: Constraint, vocab: Vocabulary) -> Compiled:
    started = time.perf_counter()
    if isinstance(constraint, Regex):
        source = constraint.pattern
        node: Node = parse_regex(source, dotall=constraint.dotall,
                                 unicode=constraint.unicode)
    elif isinstance(constraint, Choices):
        source = None
        node = Alternate(tuple(literal(o) for o in constraint.options))
    else:  # JsonSchema | Grammar (compile() checked the kind)
        grammar = _grammar_of(constraint)
        automaton = to_automaton(grammar, pushdown=isinstance(constraint, JsonSchema))
    if not isinstance(constraint, JsonSchema | Grammar):
        automaton = LazyDFA(build_nfa(node, source=source), source=source)
    if isinstance(automaton, PushdownAutomaton):
        compiled: Compiled = PushdownCompiled(constraint, vocab, automaton)
    else:
        compiled = RegularCompiled(constraint, vocab, automaton)
    compiled.precompute(deadline=started + COMPILE_TIME_TARGET_S)
    compiled.compile_seconds = time.perf_counter() - started
    if isinstance(constraint, JsonSchema) and grammar.runtime_checks is not None:
        compiled = JsonChecksCompiled(compiled, grammar.runtime_checks)
    return compiled

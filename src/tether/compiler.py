"""`tether.compile`: turn a constraint source into a :class:`Compiled` for a vocabulary.

Compilation is cached per (constraint, vocabulary fingerprint) in a bounded,
thread-safe LRU, so every request with the same constraint shares one compiled form and
its per-state masks (SPEC §3).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from tether.automata.dfa import LazyDFA
from tether.automata.nfa import build_nfa
from tether.automata.regex_ast import Alternate, Node, literal
from tether.automata.regex_parser import parse_regex
from tether.constraints import Choices, Constraint, Regex
from tether.engine.compiled import Compiled
from tether.engine.regular import RegularCompiled
from tether.errors import CompileError
from tether.gc_pause import paused_gc
from tether.vocab import Vocabulary

MAX_CACHED_CONSTRAINTS = 64
# Compile-time work (masks computed ahead) stops once compiling has taken this long.
COMPILE_TIME_TARGET_S = 0.020

_cache: OrderedDict[tuple[Constraint, str], Compiled] = OrderedDict()
_cache_lock = threading.Lock()


def compile(constraint: Constraint | str, vocab: Vocabulary) -> Compiled:  # noqa: A001
    """Compile ``constraint`` for ``vocab`` (a plain ``str`` is taken as a regex)."""
    if isinstance(constraint, str):
        constraint = Regex(constraint)
    key = (constraint, vocab.fingerprint)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    with paused_gc():
        compiled = _compile_uncached(constraint, vocab)
    with _cache_lock:
        _cache[key] = compiled
        while len(_cache) > MAX_CACHED_CONSTRAINTS:
            _cache.popitem(last=False)
    return compiled


def _compile_uncached(constraint: Constraint, vocab: Vocabulary) -> Compiled:
    started = time.perf_counter()
    if isinstance(constraint, Regex):
        source = constraint.pattern
        node: Node = parse_regex(source, dotall=constraint.dotall)
    elif isinstance(constraint, Choices):
        source = None
        node = Alternate(tuple(literal(o) for o in constraint.options))
    else:
        raise CompileError(f"cannot compile a {type(constraint).__name__}; expected "
                           "tether.Regex or tether.Choices")
    dfa = LazyDFA(build_nfa(node, source=source), source=source)
    compiled = RegularCompiled(constraint, vocab, dfa)
    compiled.precompute(deadline=started + COMPILE_TIME_TARGET_S)
    compiled.compile_seconds = time.perf_counter() - started
    return compiled

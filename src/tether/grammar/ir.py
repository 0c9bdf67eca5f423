"""The grammar IR: the one form every constraint source compiles to (SPEC §1, §6).

A :class:`Grammar` is a set of named rules. A rule's body is a regular expression whose
atoms are characters (the :mod:`tether.automata.regex_ast` nodes: ``CharSet``,
``Concat``, ``Alternate``, ``Repeat``), pre-built byte automata (``Automaton``: an
intersection or difference of regular languages), references to rules (:class:`Ref`) and
:class:`AnyOrder` groups (members in any order, each at most once: JSON object bodies).
Regexes, GBNF, Lark and JSON Schema all build this; the engine decides how to run it:
a grammar with no recursion is inlined into one regular expression (the lazy DFA of
:mod:`tether.automata`), any other runs on the pushdown engine of :mod:`tether.engine.pda`.

Invariants a front end guarantees (and :func:`check_grammar` verifies):
- every :class:`Ref` names a rule of the grammar, and ``start`` is a rule;
- there are no lexer semantics: the language is exactly the set of character strings the
  rules derive (a front end with ``%ignore`` or keywords writes them into the rules);
- ``pos`` fields only locate things for error messages: a 1-based column (regex), a
  ``"line:column"`` string (grammar text) or a JSON pointer (schema).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tether.automata.regex_ast import Alternate, Automaton, CharSet, Concat, Repeat
from tether.errors import LimitExceeded

BUILD_RECURSION_LIMIT = 20_000  # syntax-tree depth the passes over rule bodies recurse to


@dataclass(frozen=True)
class Ref:
    """A reference to the rule called ``name``."""

    name: str
    pos: int | str = 0


@dataclass(frozen=True)
class AnyOrder:
    """Comma-separated members in any order: each of ``members`` at most once (those
    whose ``required`` flag is set exactly once), and ``extra`` (if any) any number of
    times, anywhere; between ``min_count`` and ``max_count`` members in all (extras
    included). ``comma`` separates consecutive members. With ``min_count == 0`` the
    empty sequence is allowed.

    No member nor ``extra`` may derive the empty string. A regular expression of this
    language has to spell out every order, so the pushdown engine builds it lazily
    instead: one rule per reached state (the members written so far and how many in all,
    counted up to the bounds), never the 2^n subsets (:mod:`tether.engine.pda`).
    """

    members: tuple[Expr, ...]
    required: tuple[bool, ...]
    extra: Expr | None
    comma: Expr
    min_count: int = 0
    max_count: int | None = None
    pos: int | str = 0

    def parts(self) -> list[Expr]:
        """Every sub-expression: the members, the extra member and the comma."""
        return [*self.members, *(() if self.extra is None else (self.extra,)), self.comma]


Expr = CharSet | Concat | Alternate | Repeat | Automaton | Ref | AnyOrder


@dataclass
class Grammar:
    """Named rules (``rules[name]`` is the body) and the start rule.

    ``where[name]`` says where a rule is defined (for error messages); ``source`` is the
    text the grammar came from, if any. A rule named in ``longest`` is matched longest, as
    a lexer matches a token: it never ends right before a byte it could go on with (an
    identifier does not end inside a longer one), see :mod:`tether.engine.pda`.
    """

    rules: dict[str, Expr]
    start: str
    where: dict[str, int | str] = field(default_factory=dict)
    source: str | None = None
    longest: frozenset[str] = frozenset()
    # JSON only: what the matcher checks beside the grammar (distinct items, long
    # strings' lengths): a tether.schema.runtime_checks.RuntimeChecks
    runtime_checks: object = None


def refs_in(expr: Expr) -> list[Ref]:
    """Every :class:`Ref` in ``expr``, in order of appearance."""
    return nodes_in(expr, Ref)


def nodes_in(expr: Expr, kind: type | tuple[type, ...]) -> list:
    """Every node of ``expr`` that is an instance of ``kind``, in order of appearance
    (the parts of an :class:`AnyOrder` group included)."""
    out = []
    stack: list[Expr] = [expr]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        if isinstance(node, kind):
            out.append(node)
        shape = type(node)  # (exact types: no IR node class is subclassed)
        if shape is Concat or shape is Alternate:
            extend(node.items[::-1])  # type: ignore[union-attr,arg-type]
        elif shape is Repeat:
            push(node.item)  # type: ignore[union-attr,arg-type]
        elif shape is AnyOrder:
            extend(node.parts()[::-1])  # type: ignore[union-attr]
    return out


@contextmanager
def deep_recursion(source: str | None) -> Iterator[None]:
    """Around a recursive pass over rule bodies (those of large schemas nest deeply): the
    interpreter's recursion limit raised to :data:`BUILD_RECURSION_LIMIT`, and a body
    deeper still a :class:`~tether.errors.LimitExceeded`, not a ``RecursionError``."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, BUILD_RECURSION_LIMIT))
    try:
        yield
    except RecursionError:
        raise LimitExceeded("a rule of the grammar nests too deeply to build",
                            source=source) from None
    finally:
        sys.setrecursionlimit(limit)

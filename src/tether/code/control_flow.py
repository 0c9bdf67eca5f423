"""`ControlFlowScorer` and `semantics_scorer`: the soft code domains for Python
(docs/code-domains.md, "ControlFlow and Semantics").

ControlFlow scores tokens by rules about where a construct belongs, read from the scope
tracker's state (:class:`~tether.code.scope_tracker.ScopeTracker`):

* ``await`` only inside an ``async def`` body: elsewhere the tokens that write it score
  −1;
* ``return`` and ``yield`` only inside a function body: at module or class level −1;
* no bare ``except:``: right after ``except``, a token that writes the ``:`` scores −1
  and one that writes ``Exception`` +0.5;
* files in ``with`` statements: ``name = open(`` scores −0.5 on ``open``.

Semantics prefers the identifiers and APIs the prompt names (every name in backticked
code, and words shaped like identifiers: ``snake_case``, ``dotted.names``,
``CamelCase``): +0.5 on the tokens that
begin, continue or complete one (a :class:`~tether.fusion.LexiconScorer`). What must
never appear is hard, not soft: ``forbidden_imports`` (Imports) and
:func:`~tether.fusion.forbid_words`.
"""

from __future__ import annotations

import keyword
import re

import numpy as np

from tether.code.scope_tracker import CODE, ScopeTracker
from tether.fusion import LexiconScorer, SoftScore
from tether.vocab import Vocabulary

_BACKTICKED = re.compile(r"`([^`\n]+)`")
_NAME = re.compile(r"[A-Za-z_]\w*")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b|\b[a-z]+_\w+\b|"
                         r"\b[A-Z][a-z]+[A-Z]\w*\b")
_BOOST = 0.5
_COMMON = frozenset({"str", "int", "float", "bool", "list", "dict", "set", "tuple",
                     "bytes", "None", "True", "False", "self"})


class ControlFlowScorer:
    """The ControlFlow soft domain for Python (see the module docstring); follows the
    text with its own scope tracker."""

    def __init__(self, vocab: Vocabulary, weight: float = 1.0) -> None:
        self.vocab = vocab
        self._await = LexiconScorer(vocab, {"await": -1.0}, weight=weight)
        self._outside_function = LexiconScorer(vocab, {"return": -1.0, "yield": -1.0},
                                               weight=weight)
        self._open = LexiconScorer(vocab, {"open": -0.5}, weight=weight)
        self._exception = LexiconScorer(vocab, {"Exception": _BOOST}, weight=weight)
        colon = [t for t, data in enumerate(vocab.tokens)
                 if not vocab.special[t] and data.lstrip(b" ").startswith(b":")]
        self._bare_except = SoftScore.sparse(colon, [-1.0] * len(colon), weight)
        self._states: list[ScopeTracker] = [ScopeTracker()]

    # -- the Scorer interface ---------------------------------------------------------
    def scores(self, generated: bytes) -> SoftScore | None:
        tracker = self._states[-1]
        if tracker.mode != CODE:
            return None
        parts: list[SoftScore] = []
        if not tracker.in_function(is_async=True):
            parts.append(self._await.scores(generated))
        if not tracker.in_function():
            parts.append(self._outside_function.scores(generated))
        if _after_except(tracker):
            parts += [self._bare_except, self._exception.scores(generated)]
        assigning = tracker.op == "=" if tracker.op else tracker.prev == "="
        if tracker.stmt is None and assigning and not tracker.brackets and not tracker.run:
            parts.append(self._open.scores(generated))
        return combine(parts)

    def consume(self, token_id: int) -> None:
        after = self._states[-1].copy()
        after.feed(self.vocab.token_bytes(int(token_id)))
        self._states.append(after)

    def rollback(self, n: int = 1) -> None:
        del self._states[len(self._states) - n:]

    def fork(self) -> ControlFlowScorer:
        twin = object.__new__(ControlFlowScorer)
        twin.__dict__.update(self.__dict__)
        twin._states = list(self._states)
        return twin


def _after_except(tracker: ScopeTracker) -> bool:
    """Whether the text ends with an ``except`` keyword that nothing follows yet."""
    if tracker.run:
        return tracker.run == b"except" and tracker.first_lexeme and tracker.stmt is None
    return tracker.stmt == "except" and tracker.prev == "except"


def combine(scores: list[SoftScore]) -> SoftScore | None:
    """Sparse scores added up (weights applied), as one sparse score."""
    sparse = [s for s in scores if s is not None and s.ids is not None and len(s.ids)]
    if not sparse:
        return None
    if len(sparse) == 1:
        return sparse[0]
    ids = np.concatenate([s.ids for s in sparse])
    values = np.concatenate([s.values * s.weight for s in sparse])
    unique, where = np.unique(ids, return_inverse=True)
    total = np.zeros(unique.shape[0])
    np.add.at(total, where, values)
    return SoftScore.sparse(unique, total)


def prompt_identifiers(prompt: str) -> list[str]:
    """The identifiers and APIs a prompt names: the names in backticked code, dotted
    names, ``snake_case`` and ``CamelCase`` words (each dotted part too); keywords,
    builtin type names and names shorter than three characters (whose prefixes are half
    the vocabulary) left out."""
    found: list[str] = []
    spans = [name for span in _BACKTICKED.findall(prompt) for name in _NAME.findall(span)]
    for text in spans + _IDENTIFIER.findall(prompt):
        for part in [text, *text.split(".")]:
            if part.isidentifier() and len(part) >= 3 and not keyword.iskeyword(part) \
                    and part not in _COMMON and part not in found:
                found.append(part)
    return found


def semantics_scorer(vocab: Vocabulary, prompt: str,
                     weight: float = 1.0) -> LexiconScorer | None:
    """The Semantics soft domain: the prompt's identifiers preferred (``None`` if it
    names none)."""
    names = prompt_identifiers(prompt)
    if not names:
        return None
    return LexiconScorer(vocab, {name: _BOOST for name in names}, weight=weight)

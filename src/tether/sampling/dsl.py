"""The sampling DSL (SPEC §9): a program of one command per line that says how the next
token is chosen, compiled to the stages a :class:`~tether.sampling.Pipeline` uses.

::

    temperature 0.7
    top_k 50
    top_p 0.9
    sample

Commands (``#`` starts a comment; blank lines are ignored)::

    sort [-|+]                  order the view by value (descending by default)
    slice [n]:[m][:s]           keep view positions n:m:s (Python slice semantics)
    threshold OP v              remove tokens whose value OP v (OP: < <= > >= == !=)
    temperature t               divide the logits by t > 0
    top_k k | top_p p | min_p p the built-in truncations
    penalty KIND v              KIND: repetition | presence | frequency
    mask                        apply the constraint's mask here (default: first)
    softmax                     values become probabilities
    cumsum [exclusive]          values become running sums along the view
    logits                      values become the logits again
    argmax | sample | beam k    how to pick (last; default: sample)

Token identity is never lost: ``sort`` orders a view and ``softmax``/``cumsum`` compute
values beside the logits; the pick always uses the logits of the tokens left. Errors
are :class:`ProgramError` with a 1-based ``line:column`` location. The language is
documented with examples in ``docs/sampling-dsl.md``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.errors import CompileError, TetherError
from tether.sampling.engine import Stages, Step
from tether.sampling.stages import (
    COMPARISONS,
    Cumsum,
    Logits,
    Mask,
    MinP,
    Penalties,
    Softmax,
    Sort,
    Stage,
    Temperature,
    Threshold,
    TopK,
    TopP,
)
from tether.sampling.stages import Slice as SliceStage

PICKS = ("argmax", "sample", "beam")
_PENALTIES = ("repetition", "presence", "frequency")


class ProgramError(CompileError):
    """A sampling program could not be parsed; ``location`` is ``"line:column"``."""


@dataclass(frozen=True)
class _Word:
    text: str
    column: int  # 1-based


@dataclass(frozen=True)
class _Line:
    number: int
    words: tuple[_Word, ...]
    end: int  # the column just past the last character before any comment

    def at(self, word: _Word | None = None) -> str:
        return f"{self.number}:{word.column if word else self.end}"


@dataclass(frozen=True)
class Program:
    """A parsed sampling program: its stages, and how it picks (``"sample"``,
    ``"argmax"`` or ``"beam"`` with ``beam_width``). Use it wherever a
    :class:`~tether.sampling.Pipeline` goes."""

    source: str
    stages: tuple[Stage, ...]
    pick: str = "sample"
    beam_width: int = 0
    _plan: Stages = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mask_first = not any(isinstance(s, Mask) for s in self.stages)
        object.__setattr__(self, "_plan", Stages(self.stages, mask_first=mask_first))

    def apply(self, logits: Any, mask: Any = None, history: Any = ()) -> Any:
        """The processed logits (``-inf`` where removed), like ``Pipeline.apply``."""
        return self._plan.apply(logits, mask, history)

    def sample(self, logits: Any, mask: Any = None, history: Any = (),
               rng: np.random.Generator | None = None) -> Step | list[Step]:
        """The program's pick: a draw, or the argmax for a program ending in ``argmax``.
        A ``beam`` program decides whole sequences: see
        :func:`tether.sampling.beam_search`."""
        if self.pick == "beam":
            raise TetherError(f"a `beam {self.beam_width}` program decides whole sequences, "
                              "not one token: use tether.sampling.beam_search or generate()")
        return self._plan.decide(logits, mask, history, rng, greedy=self.pick == "argmax")

    def argmax(self, logits: Any, mask: Any = None, history: Any = ()) -> Step | list[Step]:
        """The most likely token after processing (ties to the lowest id)."""
        return self._plan.decide(logits, mask, history, None, greedy=True)


def parse_program(text: str) -> Program:
    """Parse a sampling program; raises :class:`ProgramError` (``line:column``)."""
    return _Parser(text).parse()


# -- parsing ------------------------------------------------------------------------------------
def _split(number: int, raw: str) -> _Line:
    content = raw.split("#", 1)[0].rstrip()
    words = tuple(_Word(m.group(), m.start() + 1) for m in re.finditer(r"\S+", content))
    return _Line(number, words, len(content) + 1)


class _Parser:
    """Reads a program line by line, tracking what the values are (logits,
    probabilities or running sums) so misplaced commands are caught at their line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stages: list[Stage] = []
        self.values = "logits"
        self.values_since = ""  # where the values stopped being logits
        self.pick: tuple[str, int, _Line, _Word] | None = None
        self.mask_at = ""

    def parse(self) -> Program:
        for number, raw in enumerate(self.text.splitlines(), start=1):
            line = _split(number, raw)
            if line.words:
                self._command(line)
        pick, width = ("sample", 0) if self.pick is None else self.pick[:2]
        return Program(self.text, tuple(self.stages), pick, width)

    def error(self, message: str, line: _Line, word: _Word | None = None) -> ProgramError:
        return ProgramError(message, location=line.at(word), source=self.text)

    def _command(self, line: _Line) -> None:
        name, *args = line.words
        handler = _COMMANDS.get(name.text)
        if handler is None:
            close = difflib.get_close_matches(name.text, list(_COMMANDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.error(f"unknown command {name.text!r}{hint}", line, name)
        if self.pick is not None:
            _, _, pick_line, pick_word = self.pick
            raise self.error(f"{name.text!r} follows {pick_word.text!r} (line {pick_line.number}):"
                             f" {pick_word.text!r} must be the last command", line, name)
        arity = _ARITY[name.text]
        if len(args) > arity[1]:
            takes = ("no arguments" if arity[1] == 0 else
                     f"{arity[1]} argument{'s' if arity[1] > 1 else ''}")
            raise self.error(f"{name.text} takes {takes}; unexpected {args[arity[1]].text!r}",
                             line, args[arity[1]])
        if len(args) < arity[0]:
            raise self.error(f"{name.text} needs {_USAGE[name.text]}", line)
        handler(self, line, name, args)

    # -- value tracking -----------------------------------------------------------------
    def _needs_logits(self, line: _Line, name: _Word) -> None:
        if self.values != "logits":
            raise self.error(f"{name.text} changes logits, but the values are {self.values} here "
                             f"({self.values_since}): put it earlier, or write `logits` before "
                             "it", line, name)

    def _values_become(self, values: str, line: _Line, name: _Word) -> None:
        if values != "logits" and self.values == "logits":
            self.values_since = f"{name.text} at line {line.number}"
        self.values = values

    # -- commands -------------------------------------------------------------------------
    def _sort(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        order = args[0] if args else None
        if order is not None and order.text not in ("-", "+"):
            raise self.error(f"sort order must be - (descending) or + (ascending), not "
                             f"{order.text!r}", line, order)
        self.stages.append(Sort(descending=order is None or order.text == "-"))

    def _slice(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        spec = args[0]
        parts = spec.text.split(":")
        if len(parts) not in (2, 3):
            raise self.error(f"slice needs start:stop or start:stop:step, not {spec.text!r}",
                             line, spec)
        bounds: list[int | None] = []
        column = spec.column
        for part in parts:
            if part and not re.fullmatch(r"[+-]?\d+", part):
                raise self.error(f"slice bounds must be integers, not {part!r}", line,
                                 _Word(part, column))
            bounds.append(int(part) if part else None)
            column += len(part) + 1
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.error("slice step cannot be zero", line,
                             _Word(parts[2], column - len(parts[2]) - 1))
        self.stages.append(SliceStage(*bounds))

    def _threshold(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        if len(args) == 1:
            glued = re.match(r"[<>=!]=?", args[0].text)
            if glued and len(args[0].text) > glued.end():
                raise self.error(f"threshold needs a space between the operator and the value "
                                 f"({glued.group()} {args[0].text[glued.end():]})", line, args[0])
            raise self.error(f"threshold needs {_USAGE['threshold']}", line)
        op, value = args
        if op.text not in COMPARISONS:
            raise self.error(f"threshold needs a comparison ({' '.join(COMPARISONS)}), not "
                             f"{op.text!r}", line, op)
        self.stages.append(Threshold(op.text, _number(self, line, value, "threshold value")))

    def _temperature(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        self._needs_logits(line, name)
        t = _number(self, line, args[0], "temperature", lambda v: v > 0, "> 0 (use argmax "
                    "for greedy decoding)")
        self.stages.append(Temperature(t))

    def _top_k(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        self.stages.append(TopK(_integer(self, line, args[0], "top_k", 1)))

    def _top_p(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        p = _number(self, line, args[0], "top_p", lambda v: 0 < v <= 1, "in (0, 1]")
        self.stages.append(TopP(p))

    def _min_p(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        p = _number(self, line, args[0], "min_p", lambda v: 0 < v <= 1, "in (0, 1]")
        self.stages.append(MinP(p))

    def _penalty(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        self._needs_logits(line, name)
        kind, value = args
        if kind.text not in _PENALTIES:
            raise self.error(f"penalty kind must be one of {', '.join(_PENALTIES)}, not "
                             f"{kind.text!r}", line, kind)
        if kind.text == "repetition":
            v = _number(self, line, value, "repetition penalty", lambda v: v > 0, "> 0")
            self.stages.append(Penalties(repetition=v))
        else:
            v = _number(self, line, value, f"{kind.text} penalty")
            self.stages.append(Penalties(**{kind.text: v}))

    def _mask(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        if self.mask_at:
            raise self.error(f"mask appears twice (first at line {self.mask_at})", line, name)
        self.mask_at = str(line.number)
        self.stages.append(Mask())

    def _softmax(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        self._needs_logits(line, name)
        self._values_become("probabilities", line, name)
        self.stages.append(Softmax())

    def _cumsum(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        mode = args[0] if args else None
        if mode is not None and mode.text not in ("exclusive", "inclusive"):
            raise self.error(f"cumsum takes `exclusive` or `inclusive`, not {mode.text!r}",
                             line, mode)
        if self.values != "probabilities":
            raise self.error(f"cumsum needs probabilities, but the values are {self.values} "
                             "here: put softmax before it", line, name)
        self._values_become("running sums", line, name)
        self.stages.append(Cumsum(exclusive=mode is not None and mode.text == "exclusive"))

    def _logits(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        self.values = "logits"
        self.stages.append(Logits())

    def _pick(self, line: _Line, name: _Word, args: list[_Word]) -> None:
        width = _integer(self, line, args[0], "beam width", 1) if name.text == "beam" else 0
        self.pick = (name.text, width, line, name)


def _number(parser: _Parser, line: _Line, word: _Word, what: str,
            valid: Callable[[float], bool] = math.isfinite, rule: str = "finite") -> float:
    try:
        value = float(word.text)
    except ValueError:
        raise parser.error(f"{what} must be a number, not {word.text!r}", line, word) from None
    if not math.isfinite(value) or not valid(value):
        raise parser.error(f"{what} must be {rule}, not {word.text}", line, word)
    return value


def _integer(parser: _Parser, line: _Line, word: _Word, what: str, least: int) -> int:
    if not re.fullmatch(r"[+-]?\d+", word.text):
        raise parser.error(f"{what} must be an integer, not {word.text!r}", line, word)
    value = int(word.text)
    if value < least:
        raise parser.error(f"{what} must be ≥ {least}, not {value}", line, word)
    return value


_COMMANDS: dict[str, Callable[[_Parser, _Line, _Word, list[_Word]], None]] = {
    "sort": _Parser._sort, "slice": _Parser._slice, "threshold": _Parser._threshold,
    "temperature": _Parser._temperature, "top_k": _Parser._top_k, "top_p": _Parser._top_p,
    "min_p": _Parser._min_p, "penalty": _Parser._penalty, "mask": _Parser._mask,
    "softmax": _Parser._softmax, "cumsum": _Parser._cumsum, "logits": _Parser._logits,
    "argmax": _Parser._pick, "sample": _Parser._pick, "beam": _Parser._pick,
}
_ARITY = {"sort": (0, 1), "slice": (1, 1), "threshold": (1, 2), "temperature": (1, 1),
          "top_k": (1, 1), "top_p": (1, 1), "min_p": (1, 1), "penalty": (2, 2), "mask": (0, 0),
          "softmax": (0, 0), "cumsum": (0, 1), "logits": (0, 0), "argmax": (0, 0),
          "sample": (0, 0), "beam": (1, 1)}
_USAGE = {"slice": "a range such as :10 or 2:-1", "threshold": "an operator and a value, "
          "e.g. threshold < -5", "temperature": "a value, e.g. temperature 0.7",
          "top_k": "a count, e.g. top_k 40", "top_p": "a probability, e.g. top_p 0.9",
          "min_p": "a probability, e.g. min_p 0.05", "penalty": "a kind and a value, e.g. "
          "penalty repetition 1.1", "beam": "a width, e.g. beam 4"}

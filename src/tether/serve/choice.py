"""Generating one choice of a request on the model worker: the token loop
(:class:`~tether.runtime.loop.ModelLoop`) turned into the pieces of an OpenAI answer.

Each step's text becomes content — held back while it may still be the start of a stop
string, cut where one appears — or the parts of a tool call (:class:`CallReader`). Under
``tool_choice="auto"`` the first words decide: a start of ``<tool_call>`` switches to the
call's session, its marker's rest forced (:mod:`tether.serve.tools`). With logprobs on,
each decided token reports its log-probability under the model's own distribution
(temperature 1, before the mask) and the top alternatives; a forced token was not
decided by the model (it was not even asked): it reports log-probability 0, certain under
the constraint, with no alternatives. Between steps the run checks whether it should stop
(the client went away, the request's deadline passed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.errors import BudgetTooSmall
from tether.runtime.llama import LlamaModel
from tether.runtime.loop import LoopStep, ModelLoop
from tether.serve.plan import ChoicePlan, Plan
from tether.serve.tools import CALL_OPEN, CallReader
from tether.session import RunSummary, Session, build_session


@dataclass(frozen=True)
class TokenLogprob:
    """One token's log-probability and its top alternatives ``(text, logprob, bytes)``."""

    token: str
    logprob: float
    bytes: list[int]
    top: list[tuple[str, float, list[int]]]


@dataclass
class Delta:
    """What a step added to choice ``index``."""

    index: int
    content: str = ""
    tool_name: str | None = None
    tool_arguments: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_name or self.tool_arguments or self.logprobs)


@dataclass
class Finish:
    """The end of choice ``index``: OpenAI's ``finish_reason``, the tokens generated,
    and tether's report (stop reason, per-step KL)."""

    index: int
    finish_reason: str
    completion_tokens: int
    tether: dict[str, Any]


class StopStrings:
    """Cuts streamed text at the first stop string, holding back what may start one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops, self.held, self.hit = stops, "", False

    def feed(self, text: str) -> str:
        """The text that can be sent now."""
        if not self.stops:
            return text
        return self._cut(self.held + text, final=False)

    def flush(self) -> str:
        """What was held back, at the end of the text (up to a stop string in it)."""
        held, self.held = self.held, ""
        return self._cut(held, final=True) if self.stops else held

    def _cut(self, buffer: str, *, final: bool) -> str:
        """The text before the leftmost stop string in ``buffer`` once no stop string
        that may still begin further left is pending (its start read, the rest to come:
        ``re`` would take that one); else the text before the leftmost place a stop
        string may begin, the rest held back."""
        found = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        pending = [] if final else [len(buffer) - k for s in self.stops
                                    for k in range(1, len(s)) if buffer.endswith(s[:k])]
        hold = min(pending, default=len(buffer))
        if found and min(found) <= hold:
            self.hit, self.held = True, ""
            return buffer[:min(found)]
        self.held = buffer[hold:]
        return buffer[:hold]


class ChoiceRun:
    """Run one choice; ``emit`` receives :class:`Delta` and a final :class:`Finish`.
    ``interrupted`` says why the run must stop now (``None``: go on)."""

    def __init__(self, lm: LlamaModel, choice: ChoicePlan, plan: Plan,
                 guard: AbstractContextManager[object],
                 interrupted: Callable[[], str | None], emit: Callable[[Any], None]) -> None:
        self.lm, self.choice, self.plan, self.guard = lm, choice, plan, guard
        self.interrupted, self.emit = interrupted, emit
        self.stops = StopStrings(plan.stops)
        self.sessions: list[Session] = [choice.session]
        self.forced_marker = 0  # tokens of the call marker forced under "auto"
        self._text = ""  # text the session produced in the current step
        self._listened: list[Session] = []  # sessions whose on_text this run set
        tool = choice.tool
        self.reader: CallReader | None = None
        self.undecided = ""  # "auto": the text before the model chose text or a call
        self.mode = "content"
        if tool is not None:
            self.mode = "undecided" if tool.mode == "auto" else "call"
            if tool.mode != "auto":
                self.reader = CallReader(tool.name if tool.mode == "named" else None)

    def run(self) -> None:
        lm, choice = self.lm, self.choice
        lm.start(choice.prompt)
        try:
            loop = self._loop(choice.session)
            stop: str | None = None
            while loop is not None:
                switch_to = None
                for step in loop.steps():
                    self._step(step)
                    if self.mode == "undecided" and self.undecided.strip():
                        switch_to = self._decide_mode(loop)
                        if switch_to is not None:
                            break
                    stop = self.interrupted() or ("stop_string" if self.stops.hit else None)
                    if stop is not None:
                        break
                loop, stop = (switch_to, None) if switch_to is not None else \
                    (None, stop or loop.stop_reason)
            self._finish(stop or "eog")
        finally:
            # The sessions no longer call back into this run: a session -> run -> plan ->
            # session cycle would keep the request's constraints and masks alive until
            # the garbage collector's next full pass (measured: tens of MB under load).
            for session in self._listened:
                session.on_text = None

    # -- a step ----------------------------------------------------------------------------
    def _loop(self, session: Session, pending: list[int] | None = None) -> ModelLoop:
        session.on_text = self._on_text
        self._listened.append(session)
        return ModelLoop(self.lm, session, pending or [], guard=self.guard)

    def _on_text(self, text: str) -> None:
        self._text += text

    def _step(self, step: LoopStep) -> None:
        text, self._text = self._text, ""
        delta = Delta(self.choice.index)
        if self.plan.top_logprobs is not None:
            delta.logprobs = self._logprobs(step)
        if self.mode == "undecided":
            self.undecided += text
        elif self.mode == "content":
            delta.content = self.stops.feed(text)
        else:
            self._read_call(delta, self.reader.feed(text))  # type: ignore[union-attr]
        if delta:
            self.emit(delta)

    def _read_call(self, delta: Delta, events: list[tuple[str, str]]) -> None:
        for kind, value in events:
            if kind == "name":
                delta.tool_name = value
            else:
                delta.tool_arguments += value

    def _decide_mode(self, loop: ModelLoop) -> ModelLoop | None:
        """``auto``: a start of the call marker switches to the call (returns its loop);
        anything else makes the answer text."""
        start = self.undecided.lstrip()
        if not CALL_OPEN.startswith(start):
            self.mode = "content"
            text, self.undecided = self.undecided, ""
            delta = Delta(self.choice.index, content=self.stops.feed(text))
            if delta:
                self.emit(delta)
            return None
        rest = self.lm.tokenize(CALL_OPEN[len(start):].encode("utf-8"))
        self.mode, self.reader = "call", CallReader()
        self.forced_marker = len(rest)
        first = self.sessions[0]
        used = len(first.tokens) + len(rest)
        left = None if first.max_tokens is None else first.max_tokens - used
        try:
            with self.guard:
                matcher = self.choice.call.matcher()  # type: ignore[union-attr]
                session = build_session(self.lm.vocab, self.lm, matcher, self.choice.decide,
                                        max_tokens=left,
                                        room=self.lm.n_ctx - len(self.choice.prompt) - used)
        except BudgetTooSmall:  # no room left for a call: the marker stays text
            self.mode, self.reader = "content", None
            return None
        self.sessions.append(session)
        return self._loop(session, loop.unread() + rest)

    def _logprobs(self, step: LoopStep) -> list[TokenLogprob]:
        vocab = self.lm.vocab
        if step.forced or step.logits is None:
            return [TokenLogprob(_text(vocab.token_bytes(t)), 0.0, list(vocab.token_bytes(t)),
                                 []) for t in step.tokens]
        logits = np.asarray(step.logits, dtype=np.float64)
        top = np.max(logits)
        log_z = top + np.log(np.sum(np.exp(logits - top)))
        k = self.plan.top_logprobs or 0
        best = np.argpartition(-logits, k)[:k] if k else np.array([], dtype=np.int64)
        best = best[np.argsort(-logits[best], kind="stable")]
        alternatives = [(_text(vocab.token_bytes(int(t))), float(logits[t] - log_z),
                         list(vocab.token_bytes(int(t)))) for t in best]
        return [TokenLogprob(_text(vocab.token_bytes(t)), float(logits[t] - log_z),
                             list(vocab.token_bytes(t)), alternatives) for t in step.tokens]

    # -- the end ---------------------------------------------------------------------------
    def _finish(self, stop: str) -> None:
        for session in self.sessions:
            session.flush()
        delta = Delta(self.choice.index)
        tail, self._text = self._text, ""
        if self.mode == "undecided":  # never decided: whatever it wrote is text
            self.mode, tail = "content", self.undecided + tail
        if self.mode == "content":
            delta.content = self.stops.feed(tail)
            if not self.stops.hit:
                delta.content += self.stops.flush()
                if self.stops.hit:  # a stop string, held back while a longer one could be
                    stop = "stop_string"
        else:
            self._read_call(delta, self.reader.feed(tail) + self.reader.finish())  # type: ignore[union-attr]
        if delta:
            self.emit(delta)
        steps = [s for session in self.sessions for s in session.steps]
        tokens = sum(len(s.tokens) for s in self.sessions) + self.forced_marker
        summary = RunSummary.of(steps).to_dict()
        report = {"stop_reason": stop, "compile_s": self.plan.compile_s,
                  "kl": [_finite(s.kl) for s in steps],
                  **{k: _finite(v) if isinstance(v, float) else v for k, v in summary.items()}}
        self.emit(Finish(self.choice.index, _finish_reason(stop, self.mode), tokens, report))


def _finish_reason(stop: str, mode: str) -> str:
    if stop in ("budget", "context", "timeout"):
        return "length"
    return "tool_calls" if mode == "call" else "stop"


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: a KL of ∞ (no mass at all on the allowed tokens) is null."""
    return value if value is None or math.isfinite(value) else None


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")

"""OpenAI's response shapes, built from the worker's events (docs/serving.md).

:class:`Answer` is one request's answer: it gathers :class:`~tether.serve.choice.Delta`
and :class:`~tether.serve.choice.Finish` events into a ``chat.completion`` /
``text_completion`` response, or turns each event into stream chunks. Each choice
carries tether's report as an extension field, ``tether``: the stop reason, the per-step
KL (``null`` for forced tokens) and the run's summary (docs/generation.md).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from tether.serve.choice import Delta, Finish, TokenLogprob
from tether.serve.plan import Plan
from tether.serve.worker import Done


@dataclass
class _Choice:
    content: str = ""
    tool_name: str | None = None
    tool_arguments: str = ""
    tool_id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish: Finish | None = None


class Answer:
    """The answer to one request (``chat``: a chat completion, else a text completion)."""

    def __init__(self, model_id: str, chat: bool, plan: Plan, request: Any) -> None:
        self.model_id, self.chat, self.plan = model_id, chat, plan
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.logprobs = plan.top_logprobs is not None
        self.choices = {c.index: _Choice() for c in plan.choices}
        self.echo = dict(zip((c.index for c in plan.choices), plan.echo, strict=False))

    # -- one response ------------------------------------------------------------------------
    def add(self, event: Delta | Finish) -> None:
        choice = self.choices[event.index]
        if isinstance(event, Finish):
            choice.finish = event
            return
        choice.content += event.content
        choice.tool_name = event.tool_name or choice.tool_name
        choice.tool_arguments += event.tool_arguments
        choice.logprobs += event.logprobs

    def response(self, done: Done) -> dict[str, Any]:
        choices = [self._choice(index, c) for index, c in sorted(self.choices.items())]
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model_id, "choices": choices,
                "usage": _usage(done), "system_fingerprint": None}

    def _choice(self, index: int, c: _Choice) -> dict[str, Any]:
        finish = c.finish
        common = {"index": index, "finish_reason": finish.finish_reason if finish else "stop",
                  "tether": finish.tether if finish else None}
        if not self.chat:
            return {"text": self.echo.get(index, "") + c.content,
                    "logprobs": self._completion_logprobs(c.logprobs), **common}
        message: dict[str, Any] = {"role": "assistant", "content": c.content,
                                   "refusal": None}
        if c.tool_name is not None:
            message["content"] = None
            message["tool_calls"] = [{"id": c.tool_id, "type": "function",
                                      "function": {"name": c.tool_name,
                                                   "arguments": c.tool_arguments}}]
        return {"message": message, "logprobs": self._chat_logprobs(c.logprobs), **common}

    # -- a stream --------------------------------------------------------------------------
    def opening(self) -> list[dict[str, Any]]:
        """The chunks a stream starts with: the role of each chat choice, the echoed
        prompt of each completion."""
        if self.chat:
            return [self._chunk(i, {"role": "assistant", "content": ""}) for i in self.choices]
        return [self._chunk(i, {"text": text}) for i, text in self.echo.items()]

    def chunks(self, event: Delta | Finish) -> list[dict[str, Any]]:
        if isinstance(event, Finish):
            self.choices[event.index].finish = event
            return [self._chunk(event.index, {} if self.chat else {"text": ""},
                                finish_reason=event.finish_reason, tether=event.tether)]
        choice = self.choices[event.index]
        logprobs = ((self._chat_logprobs if self.chat else self._completion_logprobs)
                    (event.logprobs) if event.logprobs else None)
        if not self.chat:
            return [self._chunk(event.index, {"text": event.content}, logprobs=logprobs)]
        delta: dict[str, Any] = {}
        if event.content:
            delta["content"] = event.content
        calls: dict[str, Any] = {}
        if event.tool_name is not None:
            choice.tool_name = event.tool_name
            calls = {"index": 0, "id": choice.tool_id, "type": "function",
                     "function": {"name": event.tool_name, "arguments": ""}}
        if event.tool_arguments:
            calls.setdefault("index", 0)
            calls.setdefault("function", {})["arguments"] = event.tool_arguments
        if calls:
            delta["tool_calls"] = [calls]
        return [self._chunk(event.index, delta, logprobs=logprobs)]

    def usage_chunk(self, done: Done) -> dict[str, Any]:
        return {**self._envelope(), "choices": [], "usage": _usage(done)}

    def _chunk(self, index: int, delta: dict[str, Any], *, finish_reason: str | None = None,
               logprobs: Any = None, tether: dict[str, Any] | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "logprobs": logprobs,
                                  "finish_reason": finish_reason}
        if self.chat:
            choice["delta"] = delta
        else:
            choice.update(delta)
        if tether is not None:
            choice["tether"] = tether
        return {**self._envelope(), "choices": [choice]}

    def _envelope(self) -> dict[str, Any]:
        return {"id": self.id,
                "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.model_id, "system_fingerprint": None}

    # -- logprobs --------------------------------------------------------------------------
    def _chat_logprobs(self, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        return {"content": [{"token": e.token, "logprob": e.logprob, "bytes": e.bytes,
                             "top_logprobs": [{"token": t, "logprob": lp, "bytes": b}
                                              for t, lp, b in e.top]} for e in entries],
                "refusal": None}

    def _completion_logprobs(self, entries: list[TokenLogprob]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        offsets, at = [], 0
        for e in entries:
            offsets.append(at)
            at += len(e.token)
        return {"tokens": [e.token for e in entries],
                "token_logprobs": [e.logprob for e in entries],
                "top_logprobs": [{t: lp for t, lp, _ in e.top} for e in entries],
                "text_offset": offsets}


def _usage(done: Done) -> dict[str, int]:
    return {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens}

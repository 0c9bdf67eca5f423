"""Tool calls (OpenAI ``tools`` + ``tool_choice``), constrained by the tools' schemas.

How each ``tool_choice`` is generated (docs/serving.md):

- ``"none"`` (or no tools): plain text; the tools are not shown to the model.
- a named function: the output *is* the function's arguments, generated under its
  ``parameters`` schema (the generation policy of :mod:`tether.session.policy`).
- ``"required"``: the output is ``{"name": …, "arguments": …}`` under a schema whose
  ``anyOf`` has one branch per tool (the name a ``const``, the arguments that tool's
  parameters), so the arguments always match the named tool.
- ``"auto"``: the model's first words choose. Text that starts like
  :data:`CALL_OPEN` commits to a call: the rest of the marker is forced and the call is
  generated as under ``"required"``; any other start is a text answer.

The model learns the tools and the call format from a system message
(:func:`tool_instructions`); past calls in the conversation are shown in the same format.
:class:`CallReader` turns the generated JSON into OpenAI's ``tool_calls`` — incrementally
when streaming: the name as soon as it is complete, then the arguments as they come.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tether.serve.protocol import ApiError, ChatRequest, Message, NamedToolChoice, Tool

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
EMPTY_PARAMETERS = {"type": "object", "properties": {}}

# The start of a call object in schema order, up to where the arguments begin.
_CALL_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')
_CALL_TAIL = re.compile(r"\s*\}?\s*\Z")  # what may still be the call object's own end


@dataclass(frozen=True)
class ToolPlan:
    """How a request's tools are generated: ``mode`` is ``"named"``, ``"required"`` or
    ``"auto"``; ``name`` the named function; ``schema`` what the call is generated
    under (the named function's parameters, or the call object of :func:`call_schema`)."""

    mode: str
    tools: tuple[Tool, ...]
    name: str | None
    schema: dict[str, Any]
    param: str  # where a bad schema is reported


def tool_plan(request: ChatRequest) -> ToolPlan | None:
    """The plan for the request's tools, or ``None`` when the answer is plain text."""
    tools = tuple(request.tools or ())
    choice = request.tool_choice
    if choice is None:
        choice = "auto" if tools else "none"
    if choice == "none":
        return None
    if not tools:
        raise ApiError(400, f"tool_choice {_describe(choice)} needs tools", param="tool_choice")
    names = [t.function.name for t in tools]
    if len(set(names)) != len(names):
        raise ApiError(400, "two tools have the same name", param="tools")
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        if name not in names:
            raise ApiError(400, f"tool_choice names {name!r}, which is not among the tools",
                           param="tool_choice.function.name")
        index = names.index(name)
        return ToolPlan("named", tools, name, parameters(tools[index]),
                        f"tools.{index}.function.parameters")
    return ToolPlan(choice, tools, None, call_schema(tools), "tools")


def parameters(tool: Tool) -> dict[str, Any]:
    """A tool's parameter schema (none given: no arguments, ``{}``)."""
    schema = tool.function.parameters
    return EMPTY_PARAMETERS if schema is None else schema


def call_schema(tools: tuple[Tool, ...]) -> dict[str, Any]:
    """The schema of a call object to any of ``tools``: name and matching arguments."""
    branches = [{"type": "object",
                 "properties": {"name": {"const": t.function.name},
                                "arguments": parameters(t)},
                 "required": ["name", "arguments"], "additionalProperties": False}
                for t in tools]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def tool_instructions(plan: ToolPlan) -> str:
    """The system message that shows the model its tools and how to call them."""
    listing = "\n".join(json.dumps({"name": t.function.name,
                                    "description": t.function.description or "",
                                    "parameters": parameters(t)}, ensure_ascii=False)
                        for t in plan.tools)
    if plan.mode == "named":
        return (f"Call the function {plan.name}. Answer with its arguments as a JSON "
                f"object.\nFunctions:\n{listing}")
    how = (f'{CALL_OPEN}{{"name": <function name>, "arguments": <arguments object>}}'
           f"{CALL_CLOSE}")
    if plan.mode == "required":
        return (f"Call one of these functions. Answer with a JSON object: "
                f'{{"name": <function name>, "arguments": <arguments object>}}.\n'
                f"Functions:\n{listing}")
    return (f"You may call one of these functions. To call one, answer with {how} and "
            f"nothing else; otherwise answer in text.\nFunctions:\n{listing}")


def conversation(request: ChatRequest, plan: ToolPlan | None) -> list[dict[str, str]]:
    """The messages as the chat template takes them: text contents, past tool calls
    written in the call format, the tools' instructions in the system message."""
    messages = [{"role": _role(m), "content": _content(m)} for m in request.messages]
    if plan is not None:
        note = tool_instructions(plan)
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n\n{note}"
        else:
            messages.insert(0, {"role": "system", "content": note})
    return messages


def _role(message: Message) -> str:
    return "system" if message.role == "developer" else message.role


def _content(message: Message) -> str:
    calls = "".join(
        f'{CALL_OPEN}{{"name": {json.dumps(c.function.name)}, "arguments": '
        f"{c.function.arguments or '{}'}}}{CALL_CLOSE}" for c in message.tool_calls or ())
    return message.text() + calls


def _describe(choice: object) -> str:
    return repr(choice) if isinstance(choice, str) else "naming a function"


class CallReader:
    """Reads one call as it is generated: :meth:`feed` takes text as it comes and returns
    ``("name", name)`` once the name is known, then ``("arguments", piece)`` events;
    :meth:`finish` returns the rest. ``name`` given: the text is the bare arguments."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.text = ""
        self.wrapped = name is None  # the text is a call object, not bare arguments
        self._head: int | None = None if self.wrapped else 0  # where the arguments may start
        self._start: int | None = None  # where they start (their first non-blank)
        self._named = False  # whether the name was returned
        self._sent = 0  # characters of the arguments already returned

    def feed(self, delta: str) -> list[tuple[str, str]]:
        self.text += delta
        events: list[tuple[str, str]] = []
        if self._head is None:
            head = _CALL_HEAD.match(self.text)
            if head is None:
                return events
            self.name, self._head = json.loads(head.group(1)), head.end()
        if not self._named:
            self._named = True
            events.append(("name", self.name))  # type: ignore[arg-type]
        if self._start is None:
            rest = self.text[self._head:]
            if not rest.strip():
                return events
            self._start = self._head + len(rest) - len(rest.lstrip())
        body = self.text[self._start:]
        if self.wrapped:
            body = body[:_CALL_TAIL.search(body).start()]  # type: ignore[union-attr]
        return events + self._arguments_up_to(body)

    def finish(self) -> list[tuple[str, str]]:
        """The events the end of the text completes (the call object's brace dropped)."""
        if self._start is None:
            return []
        body = self.text[self._start:].rstrip()
        if self.wrapped and body.endswith("}"):
            body = body[:-1].rstrip()
        return self._arguments_up_to(body)

    def _arguments_up_to(self, body: str) -> list[tuple[str, str]]:
        if len(body) <= self._sent:
            return []
        piece, self._sent = body[self._sent:], len(body)
        return [("arguments", piece)]

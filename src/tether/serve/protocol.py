"""The OpenAI request bodies ``tether serve`` reads, and its error shape (docs/serving.md).

Requests are validated with pydantic models in strict mode: a field of the wrong type is
a 400 naming the field (``messages.0.content``), as OpenAI does; fields tether does not
know are ignored, as OpenAI ignores them. tether's own constraint fields sit beside
OpenAI's in the body (the ``openai`` client sends them with ``extra_body=``).

Errors leave the server in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``, raised as :class:`ApiError`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_N = 16  # choices per request
MAX_STOP = 4  # stop strings, as OpenAI
MAX_TOP_LOGPROBS = 20


class ApiError(Exception):
    """An error answered in OpenAI's shape with HTTP ``status``."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)


class Function(_Body):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"]
    function: Function


class FunctionName(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: FunctionName


class JsonSchemaFormat(_Body):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | bool = Field(default=True, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ContentPart(_Body):
    type: Literal["text"]
    text: str


class CalledFunction(_Body):
    name: str
    arguments: str


class ToolCall(_Body):
    id: str = ""
    type: Literal["function"] = "function"
    function: CalledFunction


class Message(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(_Body):
    include_usage: bool = False


class _Generation(_Body):
    """Fields both endpoints take: sampling, streaming and tether's constraints."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=MAX_N)
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    # tether's constraints and sampling
    regex: str | None = None
    grammar: str | None = None
    grammar_syntax: Literal["gbnf", "lark"] = "gbnf"
    choices: list[str] | None = None
    constraint_spec: dict[str, Any] | str | None = None
    sampling_program: str | None = None
    extra_properties: Literal["forbid", "spec"] = "forbid"

    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > MAX_STOP:
            raise ApiError(400, f"at most {MAX_STOP} stop strings", param="stop")
        if any(not s for s in stops):
            raise ApiError(400, "a stop string is empty", param="stop")
        return stops


class ChatRequest(_Generation):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None

    def token_budget(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None \
            else self.max_tokens


class CompletionRequest(_Generation):
    prompt: str | list[str]
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False

    def prompts(self) -> list[str]:
        prompts = [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)
        if not prompts:
            raise ApiError(400, "prompt is an empty list", param="prompt")
        if len(prompts) * self.n > MAX_N:
            raise ApiError(400, f"at most {MAX_N} completions per request (prompts × n)",
                           param="prompt")
        return prompts

    def token_budget(self) -> int | None:
        return self.max_tokens


def parse_request(model: type[_Body], body: Any) -> Any:
    """Validate a decoded JSON body as ``model``; a 400 naming the first bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as e:
        error = e.errors(include_url=False)[0]
        param = ".".join(str(part) for part in error["loc"] if _is_field(part))
        raise ApiError(400, f"{param or 'body'}: {error['msg']}", param=param or None,
                       code="invalid_type" if "type" in error["type"] else None) from None


def _is_field(part: int | str) -> bool:
    """Whether a part of a pydantic error location is a field or an index, not the
    branch of a union it tried (``str``, ``list[ContentPart]``, ``NamedToolChoice``)."""
    if isinstance(part, int):
        return True
    return part.isidentifier() and part[0].islower() and part not in _TYPE_NAMES


_TYPE_NAMES = {"str", "int", "float", "bool", "dict", "list", "none"}

"""From a validated request to what the model worker runs: the prompt's tokens and one
:class:`~tether.session.Session` per choice (docs/serving.md).

This is where a request's constraint is chosen (``response_format``, ``regex``,
``grammar``, ``choices``, ``constraint_spec``, or the tools — at most one), compiled under
the generation policy (:mod:`tether.session.policy`; compiled constraints are shared
through :func:`tether.compile`'s bounded cache), and where every bad input becomes a 400
naming the request field and the place inside it (a JSON pointer, a column, a
``line:column``). It runs on a compile thread, holding the server's engine lock while it
touches compiled constraints (:mod:`tether.serve.worker`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tether.code import (
    CodeContext,
    language_grammar,
    prompt_code,
    python_domains,
    python_scorers,
)
from tether.constraints import Choices, Constraint, Grammar, JsonSchema, Regex
from tether.engine.compiled import Compiled
from tether.errors import BudgetTooSmall, TetherError
from tether.fusion import Domain, FusionConfig, parse_constraint_spec
from tether.runtime.llama import LlamaModel
from tether.sampling import Pipeline, Program, parse_program
from tether.serve.protocol import ApiError, ChatRequest, CompletionRequest
from tether.serve.tools import ToolPlan, conversation, tool_plan
from tether.session import Session, build_session, decider, fused_domains
from tether.session.policy import compile_for_generation

DEFAULT_TEMPERATURE = 0.7
DEFAULT_MIN_P = 0.05  # cuts the long tail small models put mass on (as `tether generate`)


@dataclass
class ChoicePlan:
    """One choice to generate: its prompt, the session that starts it and its decider,
    and for tool calls the tool plan (and, under ``auto``, the compiled call to switch
    to)."""

    index: int
    prompt: list[int]
    session: Session
    decide: Any
    tool: ToolPlan | None = None
    call: Compiled | None = None


@dataclass
class Plan:
    """A request ready to run: its choices, and what the response reports."""

    choices: list[ChoicePlan]
    prompt_tokens: int
    stops: list[str]
    top_logprobs: int | None  # None: no logprobs
    echo: list[str] = field(default_factory=list)  # completions: prompts to echo
    compile_s: float = 0.0


def plan_chat(request: ChatRequest, lm: LlamaModel, lock: threading.Lock) -> Plan:
    tools = tool_plan(request)
    if tools is not None and _constraint_fields(request):
        raise ApiError(400, "tools with tool_choice other than 'none' cannot be combined "
                       f"with {_constraint_fields(request)[0]}", param="tool_choice")
    prompt = _fits(lm, lm.chat_tokens(conversation(request, tools)), "messages")
    top = (request.top_logprobs or 0) if request.logprobs else None
    if request.top_logprobs is not None and not request.logprobs:
        raise ApiError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    with lock:
        if tools is None:
            constraint, param = _constraint(request)
            compiled = _compile(constraint, param, request, lm)
            choices = [_choice(i, prompt, compiled, request, lm) for i in range(request.n)]
        else:
            call = _compile(JsonSchema(tools.schema), tools.param, request, lm)
            start = None if tools.mode == "auto" else call
            choices = [_choice(i, prompt, start, request, lm, tools=tools) for i in
                       range(request.n)]
            for choice in choices:
                choice.call = call
    return Plan(choices, len(prompt), request.stop_strings(), top)


def plan_completion(request: CompletionRequest, lm: LlamaModel, lock: threading.Lock) -> Plan:
    prompts = request.prompts()
    token_lists = [_fits(lm, lm.tokenize(p.encode("utf-8"), add_bos=True), "prompt")
                   for p in prompts]
    with lock:
        constraint, param = _constraint(request)
        compiled = _compile(constraint, param, request, lm)
        choices = [_choice(k * request.n + i, prompt, compiled, request, lm)
                   for k, prompt in enumerate(token_lists) for i in range(request.n)]
    return Plan(choices, sum(len(t) for t in token_lists), request.stop_strings(),
                request.logprobs, echo=[prompts[c.index // request.n] for c in choices]
                if request.echo else [])


def _constraint_fields(request: ChatRequest | CompletionRequest) -> list[str]:
    fields = [name for name in ("regex", "grammar", "choices")
              if getattr(request, name) is not None]
    if request.response_format is not None and request.response_format.type != "text":
        fields.insert(0, "response_format")
    return fields


def _constraint(request: ChatRequest | CompletionRequest) -> tuple[Constraint | None, str]:
    """The request's constraint and the field it came from."""
    fields = _constraint_fields(request)
    if len(fields) > 1:
        raise ApiError(400, f"give one constraint, not {' and '.join(fields)}",
                       param=fields[1])
    field = fields[0] if fields else ""
    try:
        if field == "regex":
            return Regex(request.regex), field  # type: ignore[arg-type]
        if field == "grammar":
            return Grammar(request.grammar, syntax=request.grammar_syntax), field  # type: ignore[arg-type]
        if field == "choices":
            return Choices(request.choices), field  # type: ignore[arg-type]
        if field == "response_format":
            return _response_format(request)
    except TetherError as e:
        raise ApiError(400, f"{field}: {e}", param=field, code="invalid_constraint") from None
    return None, field


def _response_format(request: ChatRequest | CompletionRequest) -> tuple[Constraint, str]:
    fmt = request.response_format
    assert fmt is not None
    if fmt.type == "json_object":
        return JsonSchema({"type": "object"}), "response_format"
    if fmt.json_schema is None:
        raise ApiError(400, "response_format of type json_schema needs json_schema",
                       param="response_format.json_schema")
    param = "response_format.json_schema.schema"
    try:
        return JsonSchema(fmt.json_schema.schema_, strict=fmt.json_schema.strict is not False), \
            param
    except TetherError as e:
        raise ApiError(400, f"{param}: {e}", param=param, code="invalid_schema") from None


def _compile(constraint: Constraint | None, param: str,
             request: ChatRequest | CompletionRequest, lm: LlamaModel) -> Compiled | None:
    if constraint is None:
        return None
    try:
        return compile_for_generation(constraint, lm.vocab, request.extra_properties)
    except TetherError as e:
        raise ApiError(400, f"{param}: {e}", param=param,
                       code="invalid_schema" if isinstance(constraint, JsonSchema)
                       else "invalid_constraint") from None


def _choice(index: int, prompt: list[int], compiled: Compiled | None,
            request: ChatRequest | CompletionRequest, lm: LlamaModel,
            tools: ToolPlan | None = None) -> ChoicePlan:
    """A choice's session: a fresh matcher, its own decider (seed + index), the budget."""
    seed = None if request.seed is None else request.seed + index
    decide = _decider(request, lm, seed)
    matcher = None
    if compiled is not None:
        matcher = compiled.matcher()
        matcher.mask()
    fused = _fused(request, lm, matcher)
    try:
        session = build_session(lm.vocab, lm, matcher, decide, max_tokens=request.token_budget(),
                                room=lm.n_ctx - len(prompt), fused=fused)
    except BudgetTooSmall as e:
        raise ApiError(400, str(e), param="max_tokens", code="budget_too_small") from None
    return ChoicePlan(index, prompt, session, decide, tools)


def _decider(request: ChatRequest | CompletionRequest, lm: LlamaModel, seed: int | None) -> Any:
    """The choice's decider: the request's sampling program, or a pipeline of its
    settings (temperature 0.7 and min-p 0.05 unless given)."""
    if request.sampling_program is not None:
        try:
            program = parse_program(request.sampling_program)
        except TetherError as e:
            raise ApiError(400, f"sampling_program: {e}", param="sampling_program") from None
        if program.pick == "beam":
            raise ApiError(400, "sampling_program: beam programs are not served (they "
                           "re-read the model per beam); use argmax or sample",
                           param="sampling_program")
        if request.temperature is not None or request.top_p is not None:
            raise ApiError(400, "give temperature/top_p in the sampling_program, not "
                           "beside it", param="temperature")
        sampling: Pipeline | Program = program
    else:
        temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
        sampling = Pipeline(temperature=temperature, top_p=request.top_p or 1.0,
                            min_p=DEFAULT_MIN_P,
                            presence_penalty=request.presence_penalty or 0.0,
                            frequency_penalty=request.frequency_penalty or 0.0)
    return decider(lm.vocab, sampling, seed=seed)


def _fused(request: ChatRequest | CompletionRequest, lm: LlamaModel, matcher: Any) -> Any:
    """The fused domains of ``constraint_spec`` (``None`` without one)."""
    if request.constraint_spec is None:
        return None
    try:
        spec = parse_constraint_spec(request.constraint_spec)
        syntax = spec.syntax if spec.language is None else language_grammar(spec.language)
        if syntax is not None:
            if matcher is not None:
                raise ApiError(400, "constraint_spec names a regex or a language: give no "
                               "other constraint", param="constraint_spec")
            matcher = compile_for_generation(syntax, lm.vocab).matcher()
        config: FusionConfig = spec.config
        code: dict = {}
        soft = None
        if spec.language is not None:
            text = _request_text(request)
            code = python_domains(lm.vocab, config, CodeContext.of_spec(spec, prompt_code(text)))
            soft = python_scorers(lm.vocab, config, text) or None
        return fused_domains(lm.vocab, lm, matcher, config, types=code.get(Domain.TYPES),
                             imports=code.get(Domain.IMPORTS), soft=soft)
    except TetherError as e:
        raise ApiError(400, f"constraint_spec: {e}", param="constraint_spec") from None


def _request_text(request: ChatRequest | CompletionRequest) -> str:
    """The text a request puts to the model (where the code domains look for code)."""
    if isinstance(request, ChatRequest):
        return "\n".join(m.text() for m in request.messages)
    return request.prompt if isinstance(request.prompt, str) else "\n".join(request.prompt)


def _fits(lm: LlamaModel, prompt: list[int], param: str) -> list[int]:
    if len(prompt) >= lm.n_ctx:
        raise ApiError(400, f"the prompt ({len(prompt)} tokens) does not fit the context "
                       f"window ({lm.n_ctx} tokens)", param=param,
                       code="context_length_exceeded")
    return prompt


"""The server's parts that need no model: stop strings over streamed text, reading a tool
call as it streams, request validation, admission."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("fastapi")

from tether.serve.choice import StopStrings  # noqa: E402
from tether.serve.protocol import ApiError, ChatRequest, parse_request  # noqa: E402
from tether.serve.tools import CallReader, call_schema, tool_plan  # noqa: E402


def pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@given(st.text("ab\nxy", max_size=30), st.lists(st.integers(0, 30), max_size=8),
       st.lists(st.text("ab\nx", min_size=1, max_size=3), min_size=1, max_size=3))
def test_stop_strings_cut_where_re_would(text, cuts, stops):
    scanner = StopStrings(stops)
    sent = ""
    for piece in pieces(text, cuts):
        sent += scanner.feed(piece)
        if scanner.hit:
            break
    if not scanner.hit:
        sent += scanner.flush()
    first = min((i for i in (text.find(s) for s in stops) if i >= 0), default=None)
    assert sent == (text if first is None else text[:first])


@given(st.lists(st.integers(0, 80), max_size=10), st.sampled_from(["", " ", "\n  "]))
def test_call_reader_streams_what_it_returns_whole(cuts, blank):
    arguments = '{"city": "Paris", "nested": {"a": [1, 2]}}'
    text = f'{{{blank}"name":{blank}"get_weather",{blank}"arguments":{blank}{arguments}{blank}}}'
    reader = CallReader()
    events = [e for piece in pieces(text, cuts) for e in reader.feed(piece)] + reader.finish()
    assert events[0] == ("name", "get_weather")
    assert "".join(v for k, v in events if k == "arguments") == arguments
    named = CallReader("get_weather")
    events = [e for piece in pieces(blank + arguments, cuts) for e in named.feed(piece)]
    events += named.finish()
    assert events[0] == ("name", "get_weather")
    assert "".join(v for k, v in events if k == "arguments") == arguments


def chat(**fields):
    return parse_request(ChatRequest, {"messages": [{"role": "user", "content": "hi"}],
                                       **fields})


@pytest.mark.parametrize(("fields", "param"), [
    ({"n": 0}, "n"), ({"n": "2"}, "n"), ({"top_p": 0}, "top_p"), ({"seed": -1}, "seed"),
    ({"stop": 3}, "stop"), ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"grammar_syntax": "ebnf"}, "grammar_syntax"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
])
def test_wrong_types_name_the_field(fields, param):
    with pytest.raises(ApiError) as caught:
        chat(**fields)
    assert caught.value.status == 400 and caught.value.param == param


def test_unknown_fields_are_ignored():
    request = chat(logit_bias={"1": 2}, metadata={"k": "v"}, reasoning_effort="low")
    assert request.n == 1


def test_stop_strings_are_bounded():
    with pytest.raises(ApiError):
        chat(stop=["a", "b", "c", "d", "e"]).stop_strings()
    with pytest.raises(ApiError):
        chat(stop=[""]).stop_strings()


def test_tool_plans():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}}}},
             {"type": "function", "function": {"name": "g"}}]
    assert tool_plan(chat()) is None
    assert tool_plan(chat(tools=tools, tool_choice="none")) is None
    assert tool_plan(chat(tools=tools)).mode == "auto"
    named = tool_plan(chat(tools=tools, tool_choice={"type": "function",
                                                      "function": {"name": "g"}}))
    assert named.mode == "named" and named.schema == {"type": "object", "properties": {}}
    with pytest.raises(ApiError):
        tool_plan(chat(tool_choice="required"))
    with pytest.raises(ApiError):
        tool_plan(chat(tools=[tools[0], tools[0]], tool_choice="required"))


def test_call_schema_ties_arguments_to_the_name():
    jsonschema = pytest.importorskip("jsonschema")
    request = chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
        {"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": {"y": {"type": "string"}}, "required": ["y"]}}}])
    schema = call_schema(tuple(request.tools))
    jsonschema.validate({"name": "f", "arguments": {"x": 1}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "f", "arguments": {"y": "s"}}, schema)
    assert json.dumps(schema)


def test_admission_is_bounded_and_given_back():
    from tether.serve.worker import ModelWorker

    worker = ModelWorker(lm=None, capacity=2)  # type: ignore[arg-type]
    try:
        first, second = worker.admit(), worker.admit()
        with pytest.raises(ApiError) as caught:
            worker.admit()
        assert caught.value.status == 429 and int(caught.value.headers["Retry-After"]) >= 1
        first.release()
        first.release()  # once only
        third = worker.admit()
        assert worker.admitted == 2
        second.release()
        third.release()
        assert worker.admitted == 0
    finally:
        worker.close()


def test_serve_refuses_an_address_it_cannot_listen_on(capsys):
    import socket

    from tether.cli import EXIT_ERROR, main

    assert main(["serve", "--port", "70000"]) == EXIT_ERROR
    assert "between 1 and 65535" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        taken.listen()
        assert main(["serve", "--port", str(port)]) == EXIT_ERROR
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    assert main(["serve", "--timeout", "0"]) == EXIT_ERROR


def test_the_server_keeps_its_languages_compiled() -> None:
    """The grammars of ``constraint_spec.language`` are kept resident: past the server's
    small compile-cache bound, a Python request does not compile the grammar again."""
    from tether import compiler
    from tether.code import language_grammar
    from tether.serve import keep_languages_resident

    try:
        keep_languages_resident()
        assert {language_grammar("python"), language_grammar("python-fenced")} <= \
            compiler._resident
    finally:
        compiler.clear_cache()

"""``tether serve`` end to end: a real uvicorn server on 127.0.0.1 with the embedded model,
driven by the official ``openai`` client (and raw HTTP where the client would refuse to
send the request). Outputs are checked with ``jsonschema``, ``re`` and the tools' own
schemas — never with tether."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("fastapi")

from serve_server import call_prompt, glaive_schemas, running_server  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30},
            "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                        "b": {"type": "number"}},
                       "required": ["a", "b"]}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What's the weather in Paris, in celsius?"}]


@pytest.fixture(scope="module")
def server(smollm2_gguf):
    with running_server() as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def person_format(schema: dict = PERSON) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema,
                                                   "strict": True}}


def post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, dict(response.headers), json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.load(e)


# -- the basics ---------------------------------------------------------------------------------
def test_health_and_models(server, client):
    with urllib.request.urlopen(f"{server.url}/health") as response:
        health = json.load(response)
    assert health["status"] == "ok"
    memory = health["memory_mb"]  # where the server's memory is (docs/serving.md)
    assert memory["rss"] > 100 and memory["python_blocks"] > 0
    assert 0 <= memory["compile_cache"] <= 16.5 and memory["shared_frames"] >= 0
    assert 0 <= memory["move_tables"] <= 64
    models = client.models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct"]


def test_json_schema_response_validates(client):
    messages = [{"role": "user", "content": "Describe a person named Ann, aged 31, as JSON."}]
    reply = client.chat.completions.create(model="any", messages=messages, max_tokens=64,
                                           response_format=person_format(), seed=3)
    choice = reply.choices[0]
    jsonschema.validate(json.loads(choice.message.content), PERSON)
    assert choice.finish_reason == "stop"
    report = choice.model_extra["tether"]
    assert report["stop_reason"] in ("constraint_complete", "eog")
    assert 0 < report["compile_s"] < 60
    assert len(report["kl"]) == reply.usage.completion_tokens
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_json_object_and_text(client):
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "A JSON object about a cat."}],
        response_format={"type": "json_object"}, max_tokens=80, seed=1)
    assert isinstance(json.loads(reply.choices[0].message.content), dict)
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Say hello."}],
        response_format={"type": "text"}, max_tokens=8, seed=1)
    assert reply.choices[0].message.content


def test_tether_constraint_fields(client):
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "When did Apollo 11 land?"}],
        extra_body={"regex": r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"},
        max_tokens=16, seed=1)
    assert re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
                        reply.choices[0].message.content)
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Is the sky blue?"}],
        extra_body={"choices": ["yes", "no"]}, max_tokens=4, seed=1)
    assert reply.choices[0].message.content in ("yes", "no")
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Count to three."}],
        extra_body={"grammar": 'root ::= "one" (", " word)*\nword ::= "two" | "three"'},
        max_tokens=12, seed=1)
    assert re.fullmatch(r"one(, (two|three))*", reply.choices[0].message.content)
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Pick a digit."}],
        extra_body={"constraint_spec": {"regex": "[0-9]", "intensity": "standard"},
                    "sampling_program": "temperature 0.5\ntop_k 5\nsample"},
        max_tokens=4, seed=1)
    assert re.fullmatch(r"[0-9]", reply.choices[0].message.content)


# -- tools ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("tool_choice", ["required", {"type": "function",
                                                      "function": {"name": "add"}}])
def test_tool_calls_validate(client, tool_choice):
    reply = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice=tool_choice, max_tokens=96, seed=2)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    if isinstance(tool_choice, dict):
        assert call.function.name == "add"
    assert call.type == "function" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_tool_choice_auto_and_none(client):
    for seed in range(3):
        reply = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                               tool_choice="auto", max_tokens=64, seed=seed)
        message = reply.choices[0].message
        if message.tool_calls:  # a call's arguments are constrained too
            call = message.tool_calls[0]
            jsonschema.validate(json.loads(call.function.arguments),
                                SCHEMAS[call.function.name])
        else:
            assert message.content
    reply = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice="none", max_tokens=16, seed=0)
    assert reply.choices[0].message.tool_calls is None


def test_tool_history_is_accepted(client):
    messages = [*ASK,
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees, sunny"}]
    reply = client.chat.completions.create(model="any", messages=messages, max_tokens=24,
                                           seed=0)
    assert reply.choices[0].message.content


# -- streaming -----------------------------------------------------------------------------------
def test_streamed_json_validates_and_reports_usage(client):
    messages = [{"role": "user", "content": "Describe a person named Bob, aged 40, as JSON."}]
    stream = client.chat.completions.create(
        model="any", messages=messages, max_tokens=64, response_format=person_format(),
        seed=5, stream=True, stream_options={"include_usage": True})
    text, finish, usage, pieces = "", None, None, 0
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            pieces += bool(choice.delta.content)
            finish = choice.finish_reason or finish
    jsonschema.validate(json.loads(text), PERSON)
    assert finish == "stop" and pieces > 3  # streamed, not sent whole
    assert usage is not None and usage.completion_tokens > 0
    whole = client.chat.completions.create(model="any", messages=messages, max_tokens=64,
                                           response_format=person_format(), seed=5)
    assert whole.choices[0].message.content == text


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function",
                                                      "function": {"name": "get_weather"}}])
def test_streamed_tool_call_validates(client, tool_choice):
    stream = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                            tool_choice=tool_choice, max_tokens=96, seed=4,
                                            stream=True)
    name, arguments, finish, ids = None, "", None, set()
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                assert call.index == 0
                ids.add(call.id) if call.id else None
                name = call.function.name or name
                arguments += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls" and len(ids) == 1
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    whole = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice=tool_choice, max_tokens=96, seed=4)
    assert whole.choices[0].message.tool_calls[0].function.arguments == arguments


# -- sampling settings ---------------------------------------------------------------------------
def test_seed_reproduces(client):
    messages = [{"role": "user", "content": "Write a short line about the sea."}]

    def run(seed):
        return client.chat.completions.create(model="any", messages=messages, max_tokens=24,
                                              temperature=1.0, seed=seed)
    first, again = run(11), run(11)
    assert first.choices[0].message.content == again.choices[0].message.content
    others = {run(s).choices[0].message.content for s in (12, 13, 14)}
    assert len(others | {first.choices[0].message.content}) > 1


def test_n_stop_logprobs(client):
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "List three fruits, one per line."}],
        n=2, max_tokens=40, seed=7, stop=["\n"], logprobs=True, top_logprobs=3)
    assert [c.index for c in reply.choices] == [0, 1]
    for choice in reply.choices:
        assert "\n" not in choice.message.content
        entries = choice.logprobs.content
        assert entries and all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in entries)
        top = entries[0].top_logprobs
        assert top[0].logprob >= top[1].logprob >= top[2].logprob


def test_completions_endpoint(client):
    reply = client.completions.create(model="any", prompt="The capital of France is",
                                      max_tokens=4, logprobs=2, seed=0,
                                      extra_body={"choices": [" Paris", " Lyon"]})
    choice = reply.choices[0]
    assert choice.text in (" Paris", " Lyon")
    assert choice.logprobs.tokens and len(choice.logprobs.top_logprobs[0]) == 2
    stream = client.completions.create(model="any", prompt="1, 2, 3,", max_tokens=16, seed=0,
                                       stream=True, extra_body={"regex": r"( \d+,){3}"})
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert re.fullmatch(r"( \d+,){3}", text)


def test_budget_is_kept(client):
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "A person as JSON."}],
        response_format=person_format(), max_tokens=30, seed=9)
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
    assert reply.usage.completion_tokens <= 30


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "param", "where"), [
    ({"response_format": person_format({"type": "object", "properties": {
        "a": {"type": "strin"}}})}, "response_format.json_schema.schema", "/properties/a/type"),
    ({"extra_body": {"regex": "ab(c"}}, "regex", "column 3"),
    ({"extra_body": {"grammar": 'root ::= "a" missing'}}, "grammar", "1:14"),
    ({"extra_body": {"grammar": "start: 'a' | ", "grammar_syntax": "lark"}}, "grammar", "1:"),
    ({"extra_body": {"sampling_program": "top_k x"}}, "sampling_program", "1:"),
    ({"extra_body": {"constraint_spec": {"intensity": "loud"}}}, "constraint_spec",
     "/intensity"),
    ({"response_format": person_format(), "max_tokens": 2}, "max_tokens", "max_tokens"),
])
def test_bad_constraints_are_400_naming_the_place(client, extra, param, where):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=ASK, **extra)
    error = caught.value.body
    assert error["param"] == param and where in error["message"], error
    assert error["type"] == "invalid_request_error"


def test_bad_tools_are_400(client):
    bad = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"minimum": "three"}}}}}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=ASK, tools=bad,
                                       tool_choice="required")
    assert "/properties/x/minimum" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                       tool_choice={"type": "function",
                                                    "function": {"name": "nope"}})
    assert caught.value.body["param"] == "tool_choice.function.name"


@pytest.mark.parametrize(("body", "status", "param"), [
    (b'{"messages": [{"role": "user", "content": 5}]}', 400, "messages.0.content"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "9"}', 400,
     "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 7}', 400,
     "temperature"),
    (b'{"messages": []}', 400, "messages"),
    (b'{"messages": [{"role": "user"', 400, None),
    (b'[' * 5000 + b']' * 5000, 400, None),
    (b'\xff\xfe', 400, None),
    (b'"just a string"', 400, None),
])
def test_malformed_requests_are_400(server, body, status, param):
    code, _, answer = post(f"{server.url}/v1/chat/completions", body)
    assert code == status and answer["error"]["param"] == param, answer
    assert answer["error"]["message"]


def test_unknown_fields_are_ignored(server):
    body = {"messages": [{"role": "user", "content": "hi", "flavour": 1}], "max_tokens": 2,
            "surprise": {"x": [1, 2]}, "user": "me", "store": False}
    code, _, answer = post(f"{server.url}/v1/chat/completions", json.dumps(body).encode())
    assert code == 200, answer


def test_body_limit_is_413(server):
    """A body over the limit is refused from its declared length, before it is read (a
    raw socket: an HTTP client would fail writing the rest of the body)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: application/json\r\n"
                           b"Content-Length: 9000000\r\n\r\n{\"messages\": ")
        answer = connection.makefile("rb").read()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert json.loads(body)["error"]["code"] == "body_too_large"


def test_unknown_route_and_method_keep_the_error_shape(server):
    code, _, answer = post(f"{server.url}/v1/nothing", b"{}")
    assert code == 404 and "error" in answer


# -- concurrency ----------------------------------------------------------------------------------
def test_disconnected_client_cancels_its_generation(server, client):
    stream = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Tell a very long story."}],
        max_tokens=3000, seed=0, stream=True)
    next(iter(stream))
    stream.close()
    started = time.monotonic()
    reply = client.chat.completions.create(model="any", messages=ASK, max_tokens=4, seed=0)
    assert reply.choices[0].message.content is not None
    assert time.monotonic() - started < 15  # not behind a 3,000-token story


def test_full_queue_is_429_with_retry_after(smollm2_gguf):
    with running_server("--max-requests", "1") as busy:
        long = json.dumps({"messages": [{"role": "user", "content": "A long story."}],
                           "max_tokens": 400, "seed": 0}).encode()
        first = threading.Thread(target=post, args=(f"{busy.url}/v1/chat/completions", long))
        first.start()
        time.sleep(1.0)
        code, headers, answer = post(f"{busy.url}/v1/chat/completions", long)
        first.join()
    assert code == 429 and int({k.lower(): v for k, v in headers.items()}["retry-after"]) >= 1
    assert answer["error"]["type"] == "rate_limit_error"


def test_timeout_ends_the_generation(smollm2_gguf):
    with running_server("--timeout", "2") as slow:
        client = openai.OpenAI(base_url=f"{slow.url}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(  # (a string that cannot end within 2 s)
            model="any", messages=[{"role": "user", "content": "A very long story."}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "story", "schema": {"type": "string", "minLength": 2000}}},
            max_tokens=3000, seed=0)
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].model_extra["tether"]["stop_reason"] == "timeout"


def test_concurrent_clients_with_distinct_schemas(server, client):
    """32 clients at once, each with its own schema: every output validates against its
    own schema (no request sees another's constraint). bench/serve_load.py runs the
    longer load (200 and 500 requests, throughput, latency, memory)."""
    schemas = glaive_schemas(32)
    if len(schemas) < 32:
        pytest.skip("needs ../shared/data/glaive")

    def call(item):
        name, schema = item
        try:
            reply = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": call_prompt(name)}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": name, "schema": schema}},
                max_tokens=256, temperature=0, seed=0)
        except openai.BadRequestError as e:  # a few Glaive schemas admit no value at all
            assert "unsatisfiable" in e.body["message"]
            return schema, None
        return schema, reply.choices[0].message.content

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, schemas))
    answered = [(schema, text) for schema, text in results if text is not None]
    assert len(answered) >= 28
    for schema, text in answered:
        jsonschema.validate(json.loads(text), schema)

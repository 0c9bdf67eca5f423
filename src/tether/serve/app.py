"""The OpenAI-compatible HTTP app of ``tether serve`` (FastAPI; docs/serving.md).

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
``POST /v1/completions``. A request's body is read with a size limit (413), parsed with
bounded nesting (:mod:`tether.json_input`) and validated (:mod:`tether.serve.protocol`);
it is admitted by the model worker (429 when full), planned — its constraint compiled —
on a compile thread (400 naming the place on bad input), and run by the worker. The
answer is one JSON response, or server-sent events with ``stream: true`` (chunks in
OpenAI's shape, ``data: [DONE]`` last). A client that goes away cancels its job.
Every error, bad input or not, is answered in OpenAI's error shape; a bug is a 500 that
says so, never a traceback to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tether import json_input
from tether.compiler import cached_bytes
from tether.engine.copied_reads import move_table_bytes
from tether.engine.shared_frames import shared_frame_bytes
from tether.errors import TetherError
from tether.runtime.llama import LlamaModel
from tether.serve import memory
from tether.serve.choice import Delta, Finish
from tether.serve.plan import Plan, plan_chat, plan_completion
from tether.serve.protocol import ApiError, ChatRequest, CompletionRequest, parse_request
from tether.serve.responses import Answer
from tether.serve.worker import Done, Failed, Job, ModelWorker

DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_CAPACITY = 64
COMPILE_THREADS = 2
DISCONNECT_POLL_S = 0.25


@dataclass(frozen=True)
class Settings:
    """What ``tether serve`` is told: request body limit (bytes), per-request timeout
    (seconds, from arrival to the last token), admitted requests at most."""

    max_body: int = DEFAULT_MAX_BODY
    timeout_s: float = DEFAULT_TIMEOUT_S
    capacity: int = DEFAULT_CAPACITY


def create_app(lm: LlamaModel, model_id: str, settings: Settings = Settings()) -> FastAPI:
    """The app serving ``lm`` under the name ``model_id``."""
    memory.limit_arenas()  # before the worker and compile threads start
    worker = ModelWorker(lm, capacity=settings.capacity)
    compile_pool = ThreadPoolExecutor(COMPILE_THREADS, thread_name_prefix="tether-compile")
    created = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.close()
        compile_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="tether", lifespan=lifespan)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> Response:
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        return JSONResponse(ApiError(error.status_code, str(error.detail)).body(),
                            status_code=error.status_code)

    @app.exception_handler(Exception)
    async def bug(request: Request, error: Exception) -> Response:
        message = f"internal error ({type(error).__name__}); this is a bug in tether"
        return JSONResponse(ApiError(500, message, type="server_error").body(),
                            status_code=500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_id, "requests": worker.admitted,
                "capacity": worker.capacity, "memory_mb": _memory_mb()}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_id, "object": "model",
                                            "created": created, "owned_by": "tether"}]}

    async def answer(request: Request, kind: type[Any],
                     plan: Callable[[Any], Plan], chat: bool) -> Response:
        body = parse_request(kind, await _read_json(request, settings.max_body))
        deadline = time.monotonic() + settings.timeout_s
        ticket = worker.admit()
        try:
            loop = asyncio.get_running_loop()
            planned = await loop.run_in_executor(compile_pool, _planning(plan, body))
        except BaseException:
            ticket.release()
            raise
        job = Job(planned, deadline, loop, ticket)
        worker.submit(job)  # the worker gives the ticket back when the job ends
        reply = Answer(model_id, chat, planned, body)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return EventSourceResponse(_stream(job, reply, include_usage), ping=600)
        return JSONResponse(await _collect(job, reply, request))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer(request, ChatRequest,
                            lambda body: plan_chat(body, lm, worker.lock), chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer(request, CompletionRequest,
                            lambda body: plan_completion(body, lm, worker.lock), chat=False)

    return app


def _memory_mb() -> dict[str, float]:
    """The process's memory (:func:`tether.serve.memory.usage`) and what tether's bounded
    caches hold, in MB."""
    return {**memory.usage(), "compile_cache": round(cached_bytes() / 2**20, 1),
            "shared_frames": round(shared_frame_bytes() / 2**20, 1),
            "move_tables": round(move_table_bytes() / 2**20, 1)}


def _planning(plan: Callable[[Any], Plan], body: Any) -> Callable[[], Plan]:
    """``plan(body)`` with tether's own errors (a bound, a bad setting) as 400s."""
    def run() -> Plan:
        started = time.perf_counter()
        try:
            planned = plan(body)
        except ApiError:
            raise
        except TetherError as e:
            raise ApiError(400, str(e)) from None
        planned.compile_s = time.perf_counter() - started
        return planned
    return run


async def _read_json(request: Request, limit: int) -> Any:
    """The request body as JSON: at most ``limit`` bytes (413), UTF-8, nesting bounded."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is larger than {limit} bytes",
                       code="body_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the request body is larger than {limit} bytes",
                           code="body_too_large")
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the request body is not UTF-8 (byte {e.start})") from None
    try:
        return json_input.parse(text, "the request body")
    except TetherError as e:
        raise ApiError(400, str(e), code="invalid_json") from None


async def _collect(job: Job, reply: Answer, request: Request) -> dict[str, Any]:
    """Wait for the job's events (cancelling it if the client goes away); the response."""
    try:
        while True:
            try:
                event = await asyncio.wait_for(job.events.get(), DISCONNECT_POLL_S)
            except TimeoutError:
                if await request.is_disconnected():
                    job.cancel()
                    raise ApiError(499, "the client closed the request") from None
                continue
            if isinstance(event, Failed):
                raise event.error
            if isinstance(event, Done):
                return reply.response(event)
            reply.add(event)
    finally:
        job.cancel()  # a no-op once the job is done


async def _stream(job: Job, reply: Answer, include_usage: bool
                  ) -> AsyncIterator[dict[str, str]]:
    """The job's events as server-sent events; cancelling the stream (the client went
    away) cancels the job."""
    try:
        for chunk in reply.opening():
            yield {"data": json.dumps(chunk, ensure_ascii=False)}
        while True:
            event = await job.events.get()
            if isinstance(event, Failed):
                yield {"data": json.dumps(event.error.body(), ensure_ascii=False)}
                break
            if isinstance(event, Done):
                if include_usage:
                    yield {"data": json.dumps(reply.usage_chunk(event), ensure_ascii=False)}
                break
            if isinstance(event, Delta | Finish):
                for chunk in reply.chunks(event):
                    yield {"data": json.dumps(chunk, ensure_ascii=False)}
        yield {"data": "[DONE]"}
    finally:
        job.cancel()

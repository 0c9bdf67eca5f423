"""The model worker: one thread that owns the model and runs requests one at a time, with
a bounded number of requests admitted (docs/serving.md, "Concurrency").

A request is admitted (:meth:`ModelWorker.admit`) before anything is compiled: at most
``capacity`` requests are compiling, waiting or generating at once (a request's
:class:`Ticket` is given back when its job ends), and one more is refused with HTTP 429
and a ``Retry-After`` estimated from recent jobs. Admitted requests are planned on a pool
of compile threads (:mod:`tether.serve.plan`) while the model generates for another
request, then queued for the worker thread, which runs their choices
(:class:`~tether.serve.choice.ChoiceRun`) and sends the events back to the request's
event loop.

The **engine lock** makes compiled constraints safe to share across requests: planning
holds it while it compiles and builds sessions; the worker holds it around each step's
session work (masks, decisions) and releases it for the model's forward pass, which is
most of a step. A job stops between two steps when its client has gone away
(:meth:`Job.cancel`) or its deadline has passed (``timeout``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tether.compiler
from tether.errors import TetherError
from tether.runtime.llama import LlamaModel
from tether.serve import memory
from tether.serve.choice import ChoiceRun, Finish
from tether.serve.plan import Plan
from tether.serve.protocol import ApiError


@dataclass
class Done:
    """The job is over; ``usage`` counts its tokens."""

    prompt_tokens: int
    completion_tokens: int


@dataclass
class Failed:
    """The job could not run to the end."""

    error: ApiError


class Ticket:
    """A request's place among the admitted ones; :meth:`release` gives it back (once)."""

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave: Callable[[], None] | None = leave
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            leave, self._leave = self._leave, None
        if leave is not None:
            leave()


@dataclass
class Job:
    """A planned request on its way through the worker; its events arrive on ``events``
    (an asyncio queue of the request's loop)."""

    plan: Plan
    deadline: float
    loop: asyncio.AbstractEventLoop
    ticket: Ticket
    events: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def emit(self, event: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the request's loop is closed
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)

    def cancel(self) -> None:
        self.cancelled.set()

    def interrupted(self) -> str | None:
        if self.cancelled.is_set():
            return "cancelled"
        return "timeout" if time.monotonic() > self.deadline else None


class ModelWorker:
    """Runs jobs on ``lm``, one at a time, in its own thread."""

    def __init__(self, lm: LlamaModel, *, capacity: int = 64) -> None:
        self.lm = lm
        self.capacity = capacity
        self.lock = threading.Lock()  # the engine lock (module docstring)
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._admitted = 0
        self._admitted_lock = threading.Lock()
        self._job_seconds = 1.0  # running mean of a job's time, for Retry-After
        self._thread = threading.Thread(target=self._serve, name="tether-model", daemon=True)
        self._thread.start()

    @property
    def admitted(self) -> int:
        return self._admitted

    def admit(self) -> Ticket:
        """A place for one request, held until the job ends (or planning fails), or a
        429 when every place is taken."""
        with self._admitted_lock:
            if self._admitted >= self.capacity:
                wait = math.ceil(self._job_seconds * self._admitted)
                raise ApiError(429, f"the server is busy ({self._admitted} requests in "
                               f"progress); retry in about {wait} s",
                               type="rate_limit_error", code="server_busy",
                               headers={"Retry-After": str(max(1, wait))})
            self._admitted += 1
        return Ticket(self._leave)

    def _leave(self) -> None:
        with self._admitted_lock:
            self._admitted -= 1

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            started = time.monotonic()
            try:
                self._run(job)
            finally:
                job.ticket.release()
            del job  # (what its constraints hold is freed before the trim)
            tether.compiler.shrink_cache()
            memory.trim()
            self._job_seconds = 0.8 * self._job_seconds + 0.2 * (time.monotonic() - started)

    def _run(self, job: Job) -> None:
        if job.cancelled.is_set():
            return
        if job.interrupted() == "timeout":
            job.emit(Failed(ApiError(503, "the request timed out waiting for the model",
                                     type="server_error", code="timeout",
                                     headers={"Retry-After": "1"})))
            return
        completion = 0
        try:
            for choice in job.plan.choices:
                finish: list[Finish] = []

                def emit(event: Any, finish: list[Finish] = finish) -> None:
                    if isinstance(event, Finish):
                        finish.append(event)
                    job.emit(event)

                ChoiceRun(self.lm, choice, job.plan, self.lock, job.interrupted, emit).run()
                completion += finish[0].completion_tokens if finish else 0
                if job.cancelled.is_set():
                    return
        except TetherError as e:
            job.emit(Failed(ApiError(500, f"generation failed: {e}", type="server_error")))
            return
        except Exception as e:  # noqa: BLE001 - a bug: answered, the server goes on
            job.emit(Failed(ApiError(500, f"internal error ({type(e).__name__}: {e}); this "
                                     "is a bug in tether", type="server_error")))
            return
        job.emit(Done(job.plan.prompt_tokens, completion))

"""Run MaskBench work items in worker processes so a hang or a crash costs one item.

Items are processed in batches, a fresh forked worker per batch (forked after the
tokenizers and engines are loaded, so a worker starts in milliseconds). The parent waits
at most ``timeout`` seconds for each item: past that the worker is killed and the item
counted as a timeout; a worker that dies (segfault, abort, out of memory) has its
current item counted as a crash. Either way a new worker takes the rest of the batch.
Each worker's address space is capped (``memory_gb`` beyond what it inherits) so a
runaway schema fails alone instead of exhausting the shared machine.
"""

from __future__ import annotations

import multiprocessing
import resource
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")


def run_items(items: Sequence[Item], work: Callable[[Item], dict[str, Any]],
              failure: Callable[[Item, str, str], dict[str, Any]], *, batch: int,
              timeout: float, memory_gb: float) -> Iterator[dict[str, Any]]:
    """Yield ``work(item)`` for every item, in order, each computed in a worker process;
    an item that times out or crashes yields ``failure(item, status, detail)`` instead
    (status ``"timeout"`` or ``"crash"``)."""
    context = multiprocessing.get_context("fork")
    limit = _address_space() + int(memory_gb * 2**30)
    for first in range(0, len(items), batch):
        pending = list(items[first:first + batch])
        while pending:
            done = 0
            for result in _one_worker(context, pending, work, failure, timeout, limit):
                yield result
                done += 1
            pending = pending[done:]


def _one_worker(context: Any, items: list[Item], work: Callable[[Item], dict[str, Any]],
                failure: Callable[[Item, str, str], dict[str, Any]], timeout: float,
                limit: int) -> Iterator[dict[str, Any]]:
    """Results from one worker, stopping after the first item that fails it."""
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_worker, args=(sender, items, work, limit), daemon=True)
    process.start()
    sender.close()
    try:
        for item in items:
            if not receiver.poll(timeout):
                process.kill()
                yield failure(item, "timeout", f"no result within {timeout:g} s")
                return
            try:
                yield receiver.recv()
            except EOFError:
                process.join()
                yield failure(item, "crash", _exit_description(process.exitcode))
                return
    finally:
        receiver.close()
        process.join()


def _worker(sender: Any, items: list[Item], work: Callable[[Item], dict[str, Any]],
            limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")  # engine warnings would bury the progress lines
    for item in items:
        sender.send(work(item))
    sender.close()


def _address_space() -> int:
    """This process's virtual memory size in bytes (what a forked worker starts with)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"

"""A real ``tether serve`` process on 127.0.0.1 for tests and benchmarks: started on a free
port with the embedded model, waited for on ``/health``, stopped at the end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

GLAIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "glaive"
START_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """A running server: its base URL (``http://127.0.0.1:PORT``) and process id."""

    url: str
    pid: int

    def rss_kb(self) -> int:
        """The server's resident memory, in kB (Linux)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


@contextlib.contextmanager
def running_server(*options: str, cpu: str | None = None) -> Iterator[Server]:
    """Start ``tether serve`` (extra ``options``; pinned to ``cpu`` with taskset, which
    runs it in its own process, if given) and yield it once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "tether", "serve", "--port", str(port), *options]
    if cpu is not None:
        command = ["taskset", "-c", cpu, *command]
    env = {**os.environ, "TETHER_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process)
        yield Server(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_up(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tether serve exited: {process.stderr.read()}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if json.load(response)["status"] == "ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("tether serve did not start in time")


def glaive_schemas(n: int | None = None) -> list[tuple[str, dict]]:
    """``(function name, parameter schema)`` of the shared Glaive set, by file name."""
    files = sorted(GLAIVE.glob("*.json"))[:n]
    return [(f.stem.rsplit("_", 1)[0], json.loads(f.read_text())) for f in files]


def call_prompt(name: str) -> str:
    """A user message asking for a call of ``name`` with realistic arguments (the schema
    is the request's constraint; a small model reads long prompts slowly)."""
    return f"Call the function {name} with realistic arguments, as a JSON object."

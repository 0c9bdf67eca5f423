"""``tether serve``: an OpenAI-compatible HTTP server over one local model (SPEC §10;
docs/serving.md).

The layers, one job each: :mod:`~tether.serve.protocol` (request bodies, OpenAI's error
shape), :mod:`~tether.serve.tools` (tool calls), :mod:`~tether.serve.plan` (a request's
constraint compiled and its sessions built), :mod:`~tether.serve.choice` (one choice
generated), :mod:`~tether.serve.worker` (the model's thread, admission, the engine lock),
:mod:`~tether.serve.responses` (OpenAI's response and chunk shapes) and
:mod:`~tether.serve.app` (the FastAPI routes). FastAPI, uvicorn and sse-starlette are the
``serve`` extra, imported when a server starts.
"""

from __future__ import annotations

import gc
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from tether.errors import ModelError, TetherError

if TYPE_CHECKING:
    from tether.runtime.llama import LlamaModel

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# What the compile cache may hold in a server: requests with new schemas do not reuse
# much, and each admitted request holds its own compiled constraint besides.
SERVER_CACHE_BYTES = 16 << 20


def model_name(path: Path) -> str:
    """The id a model file is served under: its file name without the quantisation
    suffix (``SmolLM2-135M-Instruct.Q4_1.gguf`` → ``SmolLM2-135M-Instruct``)."""
    return path.name.split(".")[0] or path.stem


def serve(model: str | os.PathLike[str] | None = None, *, host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT, max_body: int | None = None,
          timeout_s: float | None = None, capacity: int | None = None,
          log_level: str = "info") -> None:
    """Load ``model`` (default: the embedded one) and serve it until interrupted."""
    try:
        import uvicorn

        from tether.serve.app import Settings, create_app
    except ImportError as e:
        raise ModelError(f"tether serve needs the serve extra ({e.name} is missing): "
                         "pip install 'tether[serve,llama]'") from e
    from tether.runtime.generate import load_model

    check_address(host, port)
    from tether.compiler import clear_cache, limit_cache

    limit_cache(SERVER_CACHE_BYTES)
    lm = load_model(model)
    warm_up(lm)
    # What start-up loaded (the model's bindings, the vocabulary, kernels, FastAPI's
    # modules: ~150k objects) lives as long as the server: out of the garbage collector's
    # full passes, which run inside requests (~35 ms each over it, 0 once frozen). The
    # warm-up's own constraint does not: forgotten first (frozen, what it holds would
    # never be collected once a request evicted it).
    clear_cache()
    gc.collect()
    gc.freeze()
    keep_languages_resident()
    defaults = Settings()
    settings = Settings(max_body=max_body or defaults.max_body,
                        timeout_s=timeout_s or defaults.timeout_s,
                        capacity=capacity or defaults.capacity)
    app = create_app(lm, model_name(lm.path), settings)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level))
    server.run()
    if not server.started:
        raise TetherError(f"could not listen on {host}:{port}")


def keep_languages_resident() -> None:
    """Keep the grammars of ``constraint_spec.language`` compiled once a request has
    used them: the Python grammar costs ~1 s to compile and holds ~100 MB of pieces once
    used, more than the server's bound for everything else, which would evict it after
    every request (each Python request compiled again and read its masks cold)."""
    from tether.code import language_grammar
    from tether.compiler import keep_resident
    from tether.fusion.constraint_spec import LANGUAGES

    for language in LANGUAGES:
        keep_resident(language_grammar(language))


WARM_UP_SCHEMA = {  # strings, numbers, an enum, an array, a format, optional keys
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "ok": {"type": "boolean"},
                   "count": {"type": "integer", "minimum": 0}, "ratio": {"type": "number"},
                   "kind": {"enum": ["a", "b"]}, "when": {"type": "string", "format": "date"},
                   "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["name", "ok", "kind"]}
WARM_UP_TOKENS = 40
WARM_UP_CONTEXT = 512  # positions a request (prompt and answer) rarely passes


def warm_up(lm: LlamaModel) -> None:
    """Generate a few tokens under a small schema of each kind of value before listening:
    the compiled kernels, the vocabulary's lazily built tables, the first cached pieces and
    the lazily loaded modules are in memory before the first request (its latency). Then
    read a ``WARM_UP_CONTEXT``-token text: llama.cpp's buffers (its KV cache, the work
    memory of a batch) become resident as positions are first reached, so a request as
    long does not grow the server by ~20 MB. What memory grows by afterwards is what the
    bounded caches hold."""
    import tether

    tether.generate("Reply with JSON.", tether.JsonSchema(WARM_UP_SCHEMA), model=lm,
                    max_tokens=WARM_UP_TOKENS, temperature=0.0)
    filler = lm.tokenize(b" the" * WARM_UP_CONTEXT)[:min(WARM_UP_CONTEXT, lm.n_ctx)]
    lm.start(filler)
    lm.reset()


def check_address(host: str, port: int) -> None:
    """Raise a :class:`TetherError` now, before the model loads, if ``host:port`` cannot
    be listened on (a port out of range or in use, an unknown address)."""
    if not 0 < port < 65536:
        raise TetherError(f"--port must be between 1 and 65535, not {port}")
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise TetherError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None

"""`LlamaModel`: the llama-cpp-python adapter the generation loop drives (SPEC §10).

It keeps one sequence in llama.cpp's KV cache: ``eval`` appends tokens (one batch per
call), ``logits`` is a zero-copy float32 view of the last evaluated position's logits
(valid until the next ``eval``), ``reset`` empties the cache and ``truncate`` cuts it
back to a prefix (beam search moves between beams that way); ``start`` begins a sequence
from a prompt, reusing the cache only for the same prompt as the last ``start``:
llama.cpp's logits depend on how a prompt is split into batches (by up to ~0.5 here), so
a prompt is always evaluated whole, as a fresh run does, for seeded runs to repeat.
Prompts go through the model's own chat template (``tokenizer.chat_template`` in the
GGUF metadata), rendered with jinja2. ``llama_cpp`` is imported only when a model is loaded.

Threads default to 1 (``$TETHER_THREADS`` or ``n_threads=`` to change): on a shared
small machine one thread is several times faster than two that compete.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from tether.errors import ModelError
from tether.vocab import Vocabulary

DEFAULT_CONTEXT = 4096


class LlamaModel:
    """One GGUF model loaded with llama-cpp-python, holding one sequence."""

    def __init__(self, path: str | os.PathLike[str], *, n_threads: int | None = None,
                 n_ctx: int = DEFAULT_CONTEXT, **llama_kwargs: Any) -> None:
        llama_cpp = _import_llama_cpp()
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"no model file at {self.path}")
        threads = n_threads or int(os.environ.get("TETHER_THREADS", "1"))
        try:
            with _weights_unrepacked(llama_cpp, _cpu_has_amx()):
                self.llama = llama_cpp.Llama(
                    model_path=str(self.path), n_ctx=n_ctx, n_threads=threads,
                    n_threads_batch=threads, logits_all=False, verbose=False, **llama_kwargs)
        except (ValueError, RuntimeError, OSError) as e:
            raise ModelError(f"llama.cpp could not load {self.path}: {e}") from e
        self._llama_cpp = llama_cpp
        self.n_ctx: int = int(self.llama.n_ctx())
        self._n_vocab = int(self.llama.n_vocab())
        # the prompt of the last start() and its logits; the logits restored by it
        self._prompt: tuple[list[int], np.ndarray] | None = None
        self._restored: np.ndarray | None = None

    @cached_property
    def vocab(self) -> Vocabulary:
        """The model's vocabulary (built once per model)."""
        return Vocabulary.from_llama(self.llama)

    def tokenize(self, data: bytes, *, special: bool = False, add_bos: bool = False) -> list[int]:
        """Token ids of ``data``; ``special`` parses control-token text such as
        ``<|im_end|>``; ``add_bos`` adds BOS if the model asks for one."""
        if not data:
            return []
        return list(self.llama.tokenize(data, add_bos=add_bos, special=special))

    def eval(self, tokens: Sequence[int]) -> None:
        """Append ``tokens`` to the sequence in one forward pass."""
        if not tokens:
            return
        if self.llama.n_tokens + len(tokens) > self.n_ctx:
            raise ModelError(f"the context window ({self.n_ctx} tokens) is full")
        self._restored = None
        self.llama.eval(list(tokens))

    def logits(self) -> np.ndarray:
        """The logits at the last evaluated position (a read-only view; copy to keep)."""
        if self._restored is not None:
            return self._restored
        if self.llama.n_tokens == 0:
            raise ModelError("no token has been evaluated yet")
        pointer = self._llama_cpp.llama_get_logits_ith(self.llama.ctx, -1)
        view = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))
        view.flags.writeable = False
        return view

    def reset(self) -> None:
        """Forget the sequence (the KV cache is overwritten by the next ``eval``)."""
        self.llama.reset()
        self._prompt = None

    def start(self, prompt: Sequence[int]) -> None:
        """Make the sequence ``prompt``, its logits those after the prompt's last token.
        The same prompt as the previous ``start`` (the choices of one request, a repeated
        request) keeps its KV cache and logits: the model state is then exactly what a
        fresh evaluation gives, so a seeded run repeats exactly."""
        prompt = list(prompt)
        if self._prompt is not None and self._prompt[0] == prompt and self.truncate(len(prompt)):
            self._restored = self._prompt[1]
            return
        self.reset()
        self.eval(prompt)
        self._prompt = (prompt, np.array(self.logits()))

    def truncate(self, n: int) -> bool:
        """Keep only the first ``n`` evaluated tokens (and their KV cache), so that the
        next ``eval`` continues from there; False if llama.cpp cannot (then ``reset``).
        The logits are those of the last evaluated position only after an ``eval``."""
        if not 0 <= n <= self.llama.n_tokens:
            return False
        if self._prompt is not None and n < len(self._prompt[0]):
            self._prompt = None  # the prompt's positions are about to be overwritten
        if n < self.llama.n_tokens:
            self._restored = None
            memory = self._llama_cpp.llama_get_memory(self.llama.ctx)
            if not self._llama_cpp.llama_memory_seq_rm(memory, 0, n, -1):
                return False
            self.llama.n_tokens = n
        return True

    def close(self) -> None:
        """Free the model and its context now (llama.cpp's own finalizer can fail when it
        runs during interpreter shutdown)."""
        self.llama.close()

    def chat_prompt(self, prompt: str, system: str | None = None) -> list[int]:
        """The prompt as a chat turn, with the generation prompt of the assistant."""
        messages = ([{"role": "system", "content": system}] if system else [])
        return self.chat_tokens([*messages, {"role": "user", "content": prompt}])

    def chat_tokens(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """A conversation (``role``/``content`` dicts) through the model's chat template,
        with the generation prompt of the assistant; without a template, the contents
        one per line."""
        template = self.llama.metadata.get("tokenizer.chat_template")
        if not template:
            text = "\n".join(m["content"] for m in messages)
            return self.tokenize(text.encode("utf-8"), add_bos=True)
        bos, eos = (self._token_text(i) for i in (self.llama.token_bos(), self.llama.token_eos()))
        text = _render_chat(template, [dict(m) for m in messages], bos_token=bos,
                            eos_token=eos)
        return self.tokenize(text.encode("utf-8"), special=True,
                             add_bos=not (bos and text.startswith(bos)))

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llama.detokenize([token], special=True).decode("utf-8", errors="replace")


def _render_chat(template: str, messages: list[dict[str, str]], **tokens: str) -> str:
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:
        raise ModelError("chat templates need jinja2: pip install 'tether[llama]'") from e

    def raise_exception(message: str) -> None:
        raise ModelError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                                **tokens)
    except TemplateError as e:
        raise ModelError(f"the model's chat template failed: {e}") from e


_LOADING = threading.Lock()


@contextmanager
def _weights_unrepacked(llama_cpp: Any, unrepacked: bool) -> Iterator[None]:
    """While a model loads: if ``unrepacked``, without llama.cpp's extra weight buffer
    types (the repacked and AMX layouts). On CPUs with AMX, llama.cpp builds with AMX
    kernels that crash the process on the first forward pass (SIGSEGV, measured with
    llama-cpp-python 0.3.35 and 0.3.36 on a Sapphire Rapids VM); the plain layout runs.
    ``Llama`` takes the model's parameters from ``llama_model_default_params``: that is
    where the switch goes."""
    low = getattr(llama_cpp, "llama_cpp", None)
    defaults = getattr(low, "llama_model_default_params", None)
    if not unrepacked or defaults is None:
        yield
        return

    def plain_defaults() -> Any:
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    with _LOADING:
        low.llama_model_default_params = plain_defaults
        try:
            yield
        finally:
            low.llama_model_default_params = defaults


def _cpu_has_amx() -> bool:
    """Whether the CPU advertises AMX tiles (Linux: /proc/cpuinfo's flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " amx_tile" in line for line in f)
    except OSError:
        return False


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as e:
        raise ModelError("running a GGUF model needs llama-cpp-python: "
                         "pip install 'tether[llama]'") from e
    return llama_cpp

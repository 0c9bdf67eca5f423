"""`generate`: a model driving a :class:`~tether.session.Session` (SPEC §1, §9, §10).

The session holds everything about the sequence that is not the model — constraint or
fused domains, budget, jump-forward, decisions, diagnostics; this module loads the model,
compiles the constraint under the generation policy (:mod:`tether.session.policy`),
evaluates the prompt, and runs the loop: the session's forced tokens are evaluated in one
batch with the next forward pass, and each forward pass's logits go to the session to
decide one token. End-of-generation tokens stop the run when the constraint allows them
(exactly when the text is complete).

The decision is made by a :class:`~tether.sampling.Pipeline` or a sampling-DSL
:class:`~tether.sampling.Program` (``sampling=``; a string is parsed as a program), or
by the :class:`~tether.sampling.DeterministicDecoder` (``deterministic=True``), whose
runs also report a mean log-prob confidence. A run that ends on an end-of-generation
token stops with ``eog``. A program ending in ``beam k`` runs beam search over forked
matchers instead of the token loop (the model re-reads each beam's tokens).

Defaults: the embedded SmolLM2 model, its chat template, and
``Pipeline(temperature=0.7, min_p=0.05)`` — mild randomness, with min-p cutting the
long tail that small models put mass on.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tether.code import CodeContext, prompt_code, python_domains, python_scorers
from tether.constraints import Constraint, Grammar
from tether.engine.compiled import Compiled
from tether.engine.matcher import Matcher
from tether.errors import TetherError
from tether.fusion import Domain, FusionConfig, Scorer
from tether.runtime.embedded import embedded_model_path
from tether.runtime.loop import ModelLoop
from tether.sampling import DeterministicDecoder, Pipeline, Program, beam_search
from tether.sampling.smc import SMC, SMCResult
from tether.session.build import build_session, constraint_matcher, fused_domains
from tether.session.deciders import (
    DEFAULT_SAMPLING,
    Deterministic,
    check_sampler,
    decider,
)
from tether.session.diagnostics import RunSummary, StepInfo
from tether.session.policy import generation_constraint
from tether.session.session import STOP_REASONS, Session
from tether.vocab import Vocabulary

if TYPE_CHECKING:
    from tether.runtime.llama import LlamaModel

__all__ = ["DEFAULT_SAMPLING", "STOP_REASONS", "GenerationResult", "Model", "ModelSource",
           "generate", "load_model"]


class Model(Protocol):
    """What the loop needs from a model (see :class:`~tether.runtime.llama.LlamaModel`)."""

    vocab: Vocabulary
    n_ctx: int

    def tokenize(self, data: bytes, *, special: bool = False,
                 add_bos: bool = False) -> list[int]: ...

    def eval(self, tokens: Sequence[int]) -> None: ...

    def logits(self) -> np.ndarray: ...

    def reset(self) -> None: ...

    def chat_prompt(self, prompt: str, system: str | None = None) -> list[int]: ...


@dataclass
class GenerationResult:
    """The generated text and how it came about.

    ``tokens`` are the tokens of ``text`` (the final end-of-generation token excluded);
    ``kl`` has one :class:`StepInfo` per token, plus one for that end token when the run
    stopped on it. Timings are in seconds; ``tokens_per_s`` counts generated tokens over
    the decoding time (prompt evaluation and compilation excluded). Deterministic runs
    set ``confidence`` (the mean full-softmax log-prob of the decided tokens) and
    ``suppressed`` (it fell below the decoder's floor; the text is kept).
    """

    text: str
    tokens: list[int]
    stop_reason: str
    kl: list[StepInfo] = field(default_factory=list)
    prompt_tokens: int = 0
    compile_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    confidence: float | None = None
    suppressed: bool = False
    smc: SMCResult | None = None

    @property
    def summary(self) -> RunSummary:
        """The per-run diagnostics (Σ KL, mean/max KL, fights, log p(L) estimate)."""
        return RunSummary.of(self.kl)

    @property
    def kl_total(self) -> float:
        """Sum of the per-step ``KL(p_constrained ‖ p)`` over sampled steps."""
        return self.summary.kl_total

    @property
    def kl_max(self) -> float:
        return self.summary.kl_max

    @property
    def log_p_estimate(self) -> float:
        """Σ log Z over sampled steps: an estimate of log p(L) along this path."""
        return self.summary.log_p_estimate

    @property
    def n_forced(self) -> int:
        return self.summary.n_forced

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.decode_s if self.decode_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text, "tokens": self.tokens, "stop_reason": self.stop_reason,
            "kl": [s.to_dict() for s in self.kl], **self.summary.to_dict(),
            "tokens_per_s": self.tokens_per_s, "prompt_tokens": self.prompt_tokens,
            "compile_s": self.compile_s, "prefill_s": self.prefill_s,
            "decode_s": self.decode_s, "confidence": self.confidence,
            "suppressed": self.suppressed,
            **({} if self.smc is None else {"smc": {
                "particles": self.smc.particles, "log_marginal": self.smc.log_marginal,
                "ess": list(self.smc.ess), "resampled": self.smc.resampled,
                "model_calls": self.smc.model_calls}}),
        }


_models: dict[Path, LlamaModel] = {}
_models_lock = threading.Lock()


def load_model(path: str | os.PathLike[str] | None = None) -> LlamaModel:
    """The :class:`LlamaModel` for a GGUF file (default: the embedded model), loaded once
    per path and kept for later calls (closed at exit)."""
    from tether.runtime.llama import LlamaModel

    resolved = Path(path or embedded_model_path()).resolve()
    with _models_lock:
        if resolved not in _models:
            if not _models:
                atexit.register(_close_models)
            _models[resolved] = LlamaModel(resolved)
        return _models[resolved]


def _close_models() -> None:
    with _models_lock:
        for model in _models.values():
            model.close()
        _models.clear()


def generate(
    prompt: str,
    constraint: Constraint | Compiled | str | None = None,
    model: Model | str | os.PathLike[str] | None = None,
    max_tokens: int = 256,
    sampling: Pipeline | Program | str | None = None,
    seed: int | None = None,
    temperature: float | None = None,
    system: str | None = None,
    chat: bool = True,
    on_text: Callable[[str], None] | None = None,
    deterministic: bool | DeterministicDecoder = False,
    fusion: FusionConfig | None = None,
    types: Any = None,
    imports: Any = None,
    soft: Mapping[Domain, Scorer] | None = None,
    phase: str = "off",
    extra_properties: str = "forbid",
    sampler: str = "mask",
    particles: int = 16,
    code_context: str | CodeContext = "",
) -> GenerationResult:
    """Generate a completion of ``prompt`` that satisfies ``constraint``.

    ``constraint``: a :class:`~tether.Regex` / :class:`~tether.Choices` (a plain ``str``
    is a regex), an already compiled constraint, or ``None`` for free text. ``model``: a
    loaded model, a GGUF path, or ``None`` for the embedded one. ``max_tokens`` counts
    every generated token, forced ones included, and is a budget the constraint is
    completed within (docs/generation.md): a token is taken only if the constraint can
    still be completed in the tokens left after it, and a budget below the constraint's
    shortest completion raises :class:`~tether.errors.BudgetTooSmall` before generating.
    ``sampling``: a :class:`~tether.sampling.Pipeline`, a
    :class:`~tether.sampling.Program` or the text of one. ``temperature`` overrides a
    pipeline's. ``deterministic``: decode with
    :class:`~tether.sampling.DeterministicDecoder` (``True`` for its defaults) instead
    of sampling. ``chat`` wraps the prompt (and ``system``) in the model's chat
    template. ``on_text`` receives the text as it is produced (streaming).

    Fusion (SPEC §7; any of these switches it on): ``types`` / ``imports`` are extra
    hard domains (anything ``constraint`` takes, or a hard-domain plug-in such as
    :func:`~tether.fusion.forbid_words`), ``soft`` maps ControlFlow / Semantics to
    scorer plug-ins, ``fusion`` is the :class:`~tether.fusion.FusionConfig` (default:
    the smallest intensity that consults every domain given). ``phase="auto"`` leaves
    the model's reasoning (prose, ``<think>…</think>``) free and starts the constraint
    after the delimiter that opens the structured part (``fusion.delimiters``).
    With a ``fusion`` config and :func:`tether.grammars.python` as the constraint, the
    code domains the intensity consults join in (docs/code-domains.md): Imports knows
    the module-level names of the prompt's code and of ``code_context`` (source, or a
    :class:`~tether.code.CodeContext` that also limits the modules to import);
    ControlFlow's rules and Semantics' preference for the prompt's identifiers at
    ``full``.

    ``extra_properties`` (JSON Schema only, :mod:`tether.session.policy`): ``"forbid"``
    (default) generates objects that declare properties closed and in schema order,
    each key once; ``"spec"`` gives the model the freedom the schema allows.

    ``sampler="smc"`` draws from the model's own distribution restricted to the
    constraint (at ``temperature``) by sequential Monte Carlo over ``particles`` forked
    matchers instead of masking token by token (docs/faithful-sampling.md); the result's
    ``smc`` holds its estimate of log p(L), ESS history and model calls.
    """
    if max_tokens < 0:
        raise TetherError(f"max_tokens must be ≥ 0, not {max_tokens}")
    generation_constraint(constraint, extra_properties)  # checks extra_properties
    check_sampler(sampler, particles, constraint, sampling, temperature, deterministic,
                  fusion is not None or types is not None or imports is not None
                  or bool(soft) or phase != "off")
    lm = model if _is_model(model) else load_model(model)
    decide = decider(lm.vocab, sampling, temperature, deterministic, seed)
    started = time.perf_counter()
    matcher = constraint_matcher(constraint, lm.vocab, extra_properties)
    if fusion is not None and isinstance(constraint, Grammar) and \
            constraint.language == "python":
        context = code_context if isinstance(code_context, CodeContext) else \
            CodeContext(code_context)
        code = python_domains(lm.vocab, fusion, context.with_source(prompt_code(prompt)))
        types = code.get(Domain.TYPES) if types is None else types
        imports = code.get(Domain.IMPORTS) if imports is None else imports
        if soft is None:
            soft = python_scorers(lm.vocab, fusion, prompt) or None
    fused = fused_domains(lm.vocab, lm, matcher, fusion, types, imports, soft, phase)
    if fused is not None and isinstance(decide, Program):
        raise TetherError("a beam program cannot run with fusion (fusion=, types=, "
                          "imports=, soft=, phase=)")
    compiled_at = time.perf_counter()
    prompt_ids = (lm.chat_prompt(prompt, system) if chat
                  else lm.tokenize(prompt.encode("utf-8"), add_bos=True))
    if len(prompt_ids) >= lm.n_ctx:
        raise TetherError(f"the prompt ({len(prompt_ids)} tokens) does not fit the "
                          f"context window ({lm.n_ctx} tokens)")
    room = lm.n_ctx - len(prompt_ids)
    if sampler == "smc":
        run: _ModelRun | _BeamRun | _SMCRun = _SMCRun(
            lm, matcher, prompt_ids, particles, DEFAULT_SAMPLING.temperature
            if temperature is None else temperature, seed, on_text)
    elif isinstance(decide, Program):
        run = _BeamRun(lm, matcher, decide, prompt_ids, on_text)
    else:
        single_line = isinstance(decide, Deterministic) and decide.decoder.single_line
        session = build_session(lm.vocab, lm, matcher, decide, max_tokens=max_tokens,
                                room=room, fused=fused, single_line=single_line,
                                on_text=on_text)
        run = _ModelRun(lm, session)
    lm.reset()
    lm.eval(prompt_ids)
    prefilled_at = time.perf_counter()
    stop_reason = run.run(max_tokens, room)
    run.flush()
    finished_at = time.perf_counter()
    confidence = decide.confidence if isinstance(decide, Deterministic) else None
    return GenerationResult(
        text=run.text(), tokens=run.tokens, stop_reason=stop_reason,
        kl=run.steps, prompt_tokens=len(prompt_ids), compile_s=compiled_at - started,
        prefill_s=prefilled_at - compiled_at, decode_s=finished_at - prefilled_at,
        confidence=None if confidence is None else confidence.mean,
        suppressed=confidence is not None and confidence.suppressed,
        smc=run.result if isinstance(run, _SMCRun) else None)


def _is_model(model: object) -> bool:
    return model is not None and not isinstance(model, str | os.PathLike)


class _ModelRun:
    """The token loop (:class:`~tether.runtime.loop.ModelLoop`) run to the end."""

    def __init__(self, lm: Model, session: Session) -> None:
        self.loop, self.session = ModelLoop(lm, session), session
        self.tokens, self.steps = session.tokens, session.steps

    def run(self, max_tokens: int, room: int) -> str:
        return self.loop.run()

    def text(self) -> str:
        return self.session.text()

    def flush(self) -> None:
        self.session.flush()


class ModelSource:
    """The model as beam search and SMC see it (a
    :class:`~tether.sampling.LogitsSource`): logits after the prompt and given tokens. It
    keeps what the model holds in common with the request (cutting the KV cache back
    where the model can ``truncate``, else re-reading from the start) and evaluates the
    rest, replaying one token when the request is a prefix of what it holds. The model
    must hold exactly the prompt when the source is made (``lm.reset();
    lm.eval(prompt_ids)``)."""

    def __init__(self, lm: Model, prompt_ids: Sequence[int]) -> None:
        self.lm, self.prompt = lm, list(prompt_ids)
        self.held = list(prompt_ids)  # the sequence the model has evaluated

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray:
        wanted = self.prompt + list(tokens)
        common = 0
        for a, b in zip(self.held, wanted, strict=False):
            if a != b:
                break
            common += 1
        if common < len(self.held) or common < len(wanted):
            keep = min(common, len(wanted) - 1)
            truncate = getattr(self.lm, "truncate", None)
            if truncate is None or not truncate(keep):
                self.lm.reset()
                keep = 0
            self.lm.eval(wanted[keep:])
            self.held = wanted
        return np.array(self.lm.logits(), dtype=np.float32)


class _WholeRun:
    """A run that decides its whole text before streaming it (beam search, SMC)."""

    def __init__(self, lm: Model, matcher: Matcher | None, prompt_ids: Sequence[int],
                 on_text: Callable[[str], None] | None) -> None:
        self.lm, self.matcher, self.on_text = lm, matcher, on_text
        self.source = ModelSource(lm, prompt_ids)
        self.tokens: list[int] = []
        self.steps: list[StepInfo] = []

    def text(self) -> str:
        return b"".join(self.lm.vocab.token_bytes(t) for t in self.tokens).decode(
            "utf-8", errors="replace")

    def flush(self) -> None:
        if self.on_text is not None and self.tokens:
            self.on_text(self.text())


class _BeamRun(_WholeRun):
    """A run decided by a ``beam k`` program: the best hypothesis of a beam search."""

    def __init__(self, lm: Model, matcher: Matcher | None, program: Program,
                 prompt_ids: Sequence[int], on_text: Callable[[str], None] | None) -> None:
        super().__init__(lm, matcher, prompt_ids, on_text)
        self.program = program

    def run(self, max_tokens: int, room: int) -> str:
        budget = min(max_tokens, room)
        best = beam_search(self.source, self.lm.vocab, self.program.beam_width,
                           matcher=self.matcher, sampling=self.program, max_tokens=budget)[0]
        self.tokens = list(best.tokens)
        self.steps = [StepInfo(token=s.token, forced=False, kl=s.kl, feasible=s.feasible,
                               logprob=s.logprob) for s in best.steps]
        if best.stop_reason == "budget" and budget < max_tokens:
            return "context"
        return best.stop_reason


class _SMCRun(_WholeRun):
    """A run decided by sequential Monte Carlo (:class:`~tether.sampling.smc.SMC`): the
    text of one particle drawn by weight, streamed once chosen."""

    def __init__(self, lm: Model, matcher: Matcher, prompt_ids: Sequence[int],
                 particles: int, temperature: float, seed: int | None,
                 on_text: Callable[[str], None] | None) -> None:
        super().__init__(lm, matcher, prompt_ids, on_text)
        self.particles, self.temperature, self.seed = particles, temperature, seed
        self.result: SMCResult | None = None

    def run(self, max_tokens: int, room: int) -> str:
        smc = SMC(self.source, self.lm.vocab, self.matcher, particles=self.particles,
                  max_tokens=min(max_tokens, room), temperature=self.temperature)
        self.result = smc.sample(self.seed)
        self.tokens = list(self.result.tokens)
        for i, token in enumerate((*self.tokens, self._end(smc))):
            node = smc.tree.node(self.result.tokens[:i])
            at = int(np.searchsorted(node.ids, token))
            self.steps.append(StepInfo(token=token, forced=False, kl=-node.log_z,
                                       feasible=int(node.ids.size),
                                       logprob=float(node.logp[at] - node.log_z)))
        return "eog"

    def _end(self, smc: SMC) -> int:
        """The end-of-generation token the chosen particle drew (the most likely one)."""
        node = smc.tree.node(tuple(self.tokens))
        ends = self.lm.vocab.end_of_generation[node.ids]
        return int(node.ids[ends][np.argmax(node.logp[ends])])

"""`generate`: the generation loop — one decision per token, in one direction (SPEC §1, §9).

Each step: stop when the constraint is finished; otherwise, when the constraint forces
bytes (jump-forward), tokenize them and append those tokens without sampling, evaluated
in one batch with the next forward pass; otherwise read the logits, decide under the
matcher's mask, and consume the token. End-of-generation tokens stop the run when the
matcher allows them (exactly when the text is complete). Without a constraint the same
loop runs with a mask that only removes control tokens other than end of generation.

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
import codecs
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tether.compiler import compile as compile_constraint
from tether.constraints import Constraint, JsonSchema
from tether.engine import bitmask
from tether.engine.compiled import Compiled
from tether.engine.matcher import Matcher
from tether.errors import CompileError, TetherError
from tether.fusion import Domain, FusionConfig, HardDomain, IntensityLevel, Scorer
from tether.fusion.regex_preference import RegexPreference
from tether.runtime.diagnostics import RunSummary, StepInfo
from tether.runtime.embedded import embedded_model_path
from tether.runtime.fused import Choice, Decide, FreeText, FusedConstraint
from tether.sampling import (
    DeterministicDecoder,
    Pipeline,
    Program,
    beam_search,
    parse_program,
)
from tether.sampling.deterministic import Confidence
from tether.vocab import Vocabulary

if TYPE_CHECKING:
    from tether.runtime.llama import LlamaModel

DEFAULT_SAMPLING = Pipeline(temperature=0.7, min_p=0.05)
EXTRA_PROPERTIES = ("spec", "avoid", "forbid")
# With extra_properties="avoid", the logit bonus of tokens the closed schema allows.
AVOID_WEIGHT = 8.0

PHASE_MODES = ("off", "auto")
STOP_REASONS = ("eog", "newline", "constraint_complete", "budget", "context")


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
    extra_properties: str = "avoid",
) -> GenerationResult:
    """Generate a completion of ``prompt`` that satisfies ``constraint``.

    ``constraint``: a :class:`~tether.Regex` / :class:`~tether.Choices` (a plain ``str``
    is a regex), an already compiled constraint, or ``None`` for free text. ``model``: a
    loaded model, a GGUF path, or ``None`` for the embedded one. ``max_tokens`` counts
    every generated token, forced ones included. ``sampling``: a
    :class:`~tether.sampling.Pipeline`, a :class:`~tether.sampling.Program` or the text
    of one. ``temperature`` overrides a pipeline's. ``deterministic``: decode with
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

    ``extra_properties`` (JSON Schema only, SPEC §5): ``"spec"`` lets the model add the
    undeclared properties the schema allows; ``"avoid"`` (default) keeps them legal but
    steers away from them (a soft preference for the closed schema,
    :func:`~tether.schema.closed.closed_schema`); ``"forbid"`` compiles the closed schema.
    Masks accept an object's properties in any order (``JsonSchema.property_order``,
    default ``"any"``), but with ``"avoid"`` and ``"forbid"`` the preference is the closed
    schema in schema order, so generated objects follow the schema's order.
    """
    if extra_properties not in EXTRA_PROPERTIES:
        raise TetherError(f"extra_properties must be one of {EXTRA_PROPERTIES}, "
                          f"not {extra_properties!r}")
    if max_tokens < 0:
        raise TetherError(f"max_tokens must be ≥ 0, not {max_tokens}")
    lm = model if _is_model(model) else load_model(model)
    decide = _chooser(lm.vocab, sampling, temperature, deterministic, seed)
    started = time.perf_counter()
    constraint, soft = _closed_properties(constraint, extra_properties, soft, lm.vocab)
    matcher = _matcher(constraint, lm.vocab)
    fused = _fused(lm, matcher, fusion, types, imports, soft, phase)
    if fused is not None and isinstance(decide, Program):
        raise TetherError("a beam program cannot run with fusion (fusion=, types=, "
                          "imports=, soft=, phase=)")
    compiled_at = time.perf_counter()
    prompt_ids = (lm.chat_prompt(prompt, system) if chat
                  else lm.tokenize(prompt.encode("utf-8"), add_bos=True))
    if len(prompt_ids) >= lm.n_ctx:
        raise TetherError(f"the prompt ({len(prompt_ids)} tokens) does not fit the "
                          f"context window ({lm.n_ctx} tokens)")
    lm.reset()
    lm.eval(prompt_ids)
    prefilled_at = time.perf_counter()
    single_line = isinstance(decide, _Deterministic) and decide.decoder.single_line
    if isinstance(decide, Program):
        decoder: _Decoder | _BeamRun = _BeamRun(lm, matcher, decide, prompt_ids, on_text)
    elif fused is not None:
        decoder = _FusedDecoder(lm, fused, decide, on_text, single_line=single_line)
    else:
        decoder = _Decoder(lm, matcher, decide, on_text, single_line=single_line)
    stop_reason = decoder.run(max_tokens, lm.n_ctx - len(prompt_ids))
    decoder.flush()
    finished_at = time.perf_counter()
    confidence = decide.confidence if isinstance(decide, _Deterministic) else None
    return GenerationResult(
        text=decoder.text(), tokens=decoder.tokens, stop_reason=stop_reason,
        kl=decoder.steps, prompt_tokens=len(prompt_ids), compile_s=compiled_at - started,
        prefill_s=prefilled_at - compiled_at, decode_s=finished_at - prefilled_at,
        confidence=None if confidence is None else confidence.mean,
        suppressed=confidence is not None and confidence.suppressed)


def _closed_properties(constraint: Any, mode: str, soft: Mapping[Domain, Scorer] | None,
                       vocab: Vocabulary) -> tuple[Any, Mapping[Domain, Scorer] | None]:
    """The constraint and soft domains that implement ``extra_properties`` — and the
    preference for schema order: masks accept properties in any order (by default), the
    soft preference is the closed schema in schema order."""
    if mode == "spec" or not isinstance(constraint, JsonSchema):
        return constraint, soft
    from tether.schema.closed import closed_schema

    closed = closed_schema(constraint.schema)
    steer_order = constraint.property_order != "schema" and _orders_properties(closed)
    options = {k: getattr(constraint, k) for k in
               ("whitespace", "max_whitespace", "property_order", "strict")}
    hard = constraint
    if mode == "forbid" and closed != constraint.schema:
        hard = JsonSchema(closed, registry=constraint.registry, **options)
    # A preference steers away from undeclared properties ("avoid" with an open schema)
    # and towards schema order (when the masks allow any).
    if not steer_order and (mode == "forbid" or closed == constraint.schema):
        return hard, soft
    if soft is not None and Domain.SEMANTICS in soft:
        return hard, soft  # the caller's own Semantics scorer wins
    preferred = JsonSchema(closed, registry=constraint.registry,
                           **{**options, "property_order": "schema"})
    try:
        compiled = compile_constraint(preferred, vocab)
    except CompileError:
        return hard, soft
    preference = RegexPreference(compiled, score=1.0, weight=AVOID_WEIGHT)
    return hard, {**(soft or {}), Domain.SEMANTICS: preference}


def _orders_properties(schema: Any) -> bool:
    """Whether some object schema in ``schema`` declares two properties or more (so
    there is a schema order to prefer)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict) and len(node["properties"]) > 1:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _is_model(model: object) -> bool:
    return model is not None and not isinstance(model, str | os.PathLike)


def _matcher(constraint: Constraint | Compiled | str | None, vocab: Vocabulary) -> Matcher | None:
    if constraint is None:
        return None
    compiled = (constraint if isinstance(constraint, Compiled)
                else compile_constraint(constraint, vocab))
    if compiled.vocab.fingerprint != vocab.fingerprint:
        raise TetherError("the constraint was compiled for another vocabulary than the model's")
    matcher = compiled.matcher()
    matcher.mask()  # time to first mask counts as compilation, not decoding
    return matcher


def _free_mask(vocab: Vocabulary) -> np.ndarray:
    """Free text: every token but control tokens other than end of generation."""
    return bitmask.from_bool(~vocab.special | vocab.end_of_generation)


def _fused(lm: Model, matcher: Matcher | None, config: FusionConfig | None, types: Any,
           imports: Any, soft: Mapping[Domain, Scorer] | None,
           phase: str) -> FusedConstraint | None:
    """The run's fused domains, or ``None`` when no fusion argument is given."""
    if phase not in PHASE_MODES:
        raise TetherError(f"phase must be one of {PHASE_MODES}, not {phase!r}")
    if config is None and types is None and imports is None and soft is None \
            and phase == "off":
        return None
    vocab = lm.vocab
    hard = {d: _hard_domain(spec, vocab) for d, spec in
            ((Domain.TYPES, types), (Domain.IMPORTS, imports)) if spec is not None}
    soft = dict(soft or {})
    if config is None:
        config = FusionConfig(intensity=_smallest_intensity(set(hard) | set(soft)))
    free = _free_mask(vocab)
    syntax = matcher if matcher is not None else FreeText(free)
    return FusedConstraint(config, vocab, lm, syntax, hard, soft, free,
                           phased=phase == "auto")


def _hard_domain(spec: Any, vocab: Vocabulary) -> HardDomain:
    """A hard-domain plug-in as given, or the matcher of a constraint."""
    if isinstance(spec, HardDomain):
        return spec
    return _matcher(spec, vocab)


def _smallest_intensity(domains: set[Domain]) -> IntensityLevel:
    for level in (IntensityLevel.SYNTAX_ONLY, IntensityLevel.STANDARD,
                  IntensityLevel.FULL_HARD, IntensityLevel.FULL):
        if domains <= level.domains:
            return level
    return IntensityLevel.FULL


class _Sampler:
    """Decisions by a pipeline or a (non-beam) program."""

    def __init__(self, sampling: Pipeline | Program, vocab: Vocabulary,
                 rng: np.random.Generator) -> None:
        self.sampling, self.vocab, self.rng = sampling, vocab, rng

    def __call__(self, logits: np.ndarray, mask: np.ndarray | None,
                 history: Sequence[int]) -> Choice:
        step = self.sampling.sample(logits, mask, history=history, rng=self.rng)
        info = StepInfo(token=step.token, forced=False, kl=step.kl, feasible=step.feasible,
                        logprob=step.logprob)
        return step.token, info, "eog" if self.vocab.is_eos(step.token) else None


class _Deterministic:
    """Decisions by the deterministic decoder, with the run's confidence."""

    def __init__(self, decoder: DeterministicDecoder, vocab: Vocabulary) -> None:
        self.decoder, self.vocab = decoder, vocab
        self.confidence: Confidence = decoder.confidence()

    def __call__(self, logits: np.ndarray, mask: np.ndarray | None,
                 history: Sequence[int]) -> Choice:
        decision = self.decoder.decide(logits, self.vocab, mask)
        if decision.token is None:
            return None, None, decision.stop
        self.confidence.add(decision.logprob)
        info = StepInfo(token=decision.token, forced=False, kl=decision.kl,
                        feasible=decision.feasible, logprob=decision.logprob)
        return decision.token, info, decision.stop


def _chooser(vocab: Vocabulary, sampling: Pipeline | Program | str | None,
             temperature: float | None, deterministic: bool | DeterministicDecoder,
             seed: int | None) -> _Sampler | _Deterministic | Program:
    """What makes the decisions: a sampler, the deterministic decoder, or a beam
    program (run whole by :class:`_BeamRun`)."""
    if deterministic:
        if sampling is not None or temperature is not None:
            raise TetherError("deterministic decoding takes no sampling settings "
                              "(sampling= or temperature=)")
        decoder = (deterministic if isinstance(deterministic, DeterministicDecoder)
                   else DeterministicDecoder())
        return _Deterministic(decoder, vocab)
    if isinstance(sampling, str):
        sampling = parse_program(sampling)
    chosen = sampling or DEFAULT_SAMPLING
    if temperature is not None:
        if not isinstance(chosen, Pipeline):
            raise TetherError("temperature= applies to a Pipeline; write `temperature t` "
                              "in the sampling program instead")
        chosen = replace(chosen, temperature=temperature)
    if isinstance(chosen, Program) and chosen.pick == "beam":
        return chosen
    return _Sampler(chosen, vocab, np.random.default_rng(seed))


class _Decoder:
    """The state of one run: the tokens so far, tokens not yet evaluated, diagnostics."""

    def __init__(self, lm: Model, matcher: Matcher | None,
                 decide: Decide,
                 on_text: Callable[[str], None] | None, *, single_line: bool = False) -> None:
        self.lm, self.matcher, self.decide = lm, matcher, decide
        self.on_text = on_text
        self.single_line = single_line  # forced text stops before a line break too
        self.tokens: list[int] = []
        self.steps: list[StepInfo] = []
        self.pending: list[int] = []  # generated but not yet evaluated by the model
        self.chunks: list[bytes] = []
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.free_mask = _free_mask(lm.vocab) if matcher is None else None

    def run(self, max_tokens: int, room: int) -> str:
        """Generate until a stop condition; return the stop reason."""
        budget = min(max_tokens, room)
        while True:
            if self.matcher is not None and self.matcher.is_finished():
                return "constraint_complete"
            if len(self.tokens) >= budget:
                return "budget" if budget == max_tokens else "context"
            if self._jump_forward(budget - len(self.tokens)):
                continue
            stop = self._decide_one()
            if stop is not None:
                return stop

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def flush(self) -> None:
        """Stream what the incremental decoder still holds (a cut-off UTF-8 sequence)."""
        rest = self.utf8.decode(b"", final=True)
        if rest and self.on_text is not None:
            self.on_text(rest)

    def _jump_forward(self, room: int) -> bool:
        """Append the tokens of the forced bytes, holding back the last one (it may
        merge with what follows) unless the constraint is finished after it or the
        budget ends with it. In single-line mode only the bytes before a line break
        are forced (the decoder then stops with ``newline``)."""
        if self.matcher is None:
            return False
        forced = self.matcher.forced().bytes
        if self.single_line:
            forced = re.split(rb"[\r\n]", forced, maxsplit=1)[0]
        if not forced:
            return False
        taken: list[int] = []
        for token in self.lm.tokenize(forced, special=False)[:room]:
            if not self.matcher.allowed(token):
                break
            self.matcher.consume(token)
            taken.append(token)
        if taken and len(taken) < room and not self.matcher.is_finished():
            self.matcher.rollback(1)
            taken.pop()
        for token in taken:
            self._append(token, self._forced_step(token))
        return bool(taken)

    def _decide_one(self) -> str | None:
        """Decide and consume one token; the stop reason if the generation ends."""
        self.lm.eval(self.pending)
        self.pending = []
        token, info, stop = self._choose(self.lm.logits())
        if token is None or info is None:
            return stop
        if self.matcher is not None:
            self.matcher.consume(token)
        if self.lm.vocab.is_eos(token):
            self.steps.append(info)
            return stop
        self._append(token, info)
        return stop

    def _forced_step(self, token: int) -> StepInfo:
        return StepInfo(token=token, forced=True)

    def _choose(self, logits: np.ndarray) -> Choice:
        mask = self.free_mask if self.matcher is None else self.matcher.mask()
        return self.decide(logits, mask, self.tokens)

    def _append(self, token: int, info: StepInfo) -> None:
        self.tokens.append(token)
        self.pending.append(token)
        self.steps.append(info)
        piece = self.lm.vocab.token_bytes(token)
        self.chunks.append(piece)
        if self.on_text is not None:
            text = self.utf8.decode(piece)
            if text:
                self.on_text(text)


class _FusedDecoder(_Decoder):
    """The token loop over fused domains: the same steps, each decision made by the
    :class:`~tether.runtime.fused.FusedConstraint` (which acts as the matcher)."""

    matcher: FusedConstraint

    def __init__(self, lm: Model, fused: FusedConstraint, decide: Decide,
                 on_text: Callable[[str], None] | None, *, single_line: bool = False) -> None:
        super().__init__(lm, fused, decide, on_text, single_line=single_line)

    def _choose(self, logits: np.ndarray) -> Choice:
        return self.matcher.decide(self.decide, logits, self.tokens)

    def _forced_step(self, token: int) -> StepInfo:
        return StepInfo(token=token, forced=True, phase=self.matcher.phase.value)


class _ModelSource:
    """The model as beam search sees it: logits after the prompt and given tokens. It
    keeps what the model holds in common with the request (cutting the KV cache back
    where the model can ``truncate``, else re-reading from the start) and evaluates the
    rest, replaying one token when the request is a prefix of what it holds."""

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


class _BeamRun:
    """A run decided by a ``beam k`` program: the best hypothesis of a beam search."""

    def __init__(self, lm: Model, matcher: Matcher | None, program: Program,
                 prompt_ids: Sequence[int], on_text: Callable[[str], None] | None) -> None:
        self.lm, self.matcher, self.program, self.on_text = lm, matcher, program, on_text
        self.source = _ModelSource(lm, prompt_ids)
        self.tokens: list[int] = []
        self.steps: list[StepInfo] = []

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

    def text(self) -> str:
        return b"".join(self.lm.vocab.token_bytes(t) for t in self.tokens).decode(
            "utf-8", errors="replace")

    def flush(self) -> None:
        if self.on_text is not None and self.tokens:
            self.on_text(self.text())

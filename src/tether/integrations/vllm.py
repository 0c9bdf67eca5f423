"""A vLLM (v1 engine) logits processor that applies tether's masks, one session per request.

Start vLLM with it and give each request its constraint under ``extra_args["tether"]``::

    vllm serve MODEL --logits-processors tether.integrations.vllm:TetherLogitsProcessor
    # OpenAI API: {"vllm_xargs": {"tether": {"json_schema": {...}}}, ...}

    llm = LLM(model=..., logits_processors=[TetherLogitsProcessor])
    llm.generate(prompts, SamplingParams(extra_args={"tether": {"regex": r"\\d+"}}))

A request's spec (:func:`parse_spec`) names exactly one constraint — ``json_schema`` (an
object, or its JSON text), ``regex``, ``choices`` (a list of strings), ``grammar`` (with
``grammar_syntax`` ``"gbnf"``, the default, or ``"lark"``) — and optionally
``extra_properties`` (``"forbid"``, the default generation policy, or ``"spec"``; see
:mod:`tether.session.policy`). Requests without ``tether`` are left alone. A malformed spec
fails its request at admission (``validate_params``: HTTP 400 from the server); a
constraint that only fails to compile in the worker (a schema keyword tether does not
support) is logged and the request runs unconstrained, so one request never takes the
engine down.

Each request row holds a :class:`~tether.session.Session` (budget: the request's
``max_tokens``) and a reference to the list of tokens vLLM generated for it (the
``added`` entries of a ``BatchUpdate`` carry it and vLLM keeps appending to it).
``apply`` first feeds every session the tokens added to its list since the previous
step, then writes the masks of all constrained rows into one preallocated word array,
unpacks it once with numpy and applies it to the logits with one ``masked_fill``.
The vocabulary comes from the model's tokenizer, built once per process; compiled
constraints are shared through :func:`tether.compile`'s cache.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from tether.constraints import Choices, Constraint, Grammar, JsonSchema, Regex
from tether.engine import bitmask
from tether.errors import BudgetTooSmall, TetherError
from tether.session import Session
from tether.session.policy import EXTRA_PROPERTIES, compile_for_generation
from tether.vocab import Vocabulary

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

log = logging.getLogger(__name__)

KEY = "tether"  # the key of SamplingParams.extra_args (the server's vllm_xargs)
CONSTRAINT_KEYS = ("json_schema", "regex", "choices", "grammar")
OPTION_KEYS = ("grammar_syntax", "extra_properties")


# -- request specs ------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """A request's parsed spec: the constraint and the JSON Schema generation policy."""

    constraint: Constraint
    extra_properties: str = "forbid"


def parse_spec(spec: Any) -> Spec:
    """Read a request's ``extra_args["tether"]``; :class:`ValueError` saying what is
    wrong. The constraint is compiled here under the generation policy for a vocabulary
    of bytes (no tokenizer needed, cached like any compile), so that a bad regex or
    grammar, or a schema tether refuses (an unsupported keyword, one no value
    satisfies), fails the request at admission, not in the worker."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"extra_args[{KEY!r}] must be an object, not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(CONSTRAINT_KEYS) - set(OPTION_KEYS))
    if unknown:
        raise ValueError(f"extra_args[{KEY!r}]: unknown key(s) {unknown}; expected one of "
                         f"{list(CONSTRAINT_KEYS)} and optionally {list(OPTION_KEYS)}")
    named = [k for k in CONSTRAINT_KEYS if spec.get(k) is not None]
    if len(named) != 1:
        raise ValueError(f"extra_args[{KEY!r}] must name exactly one of "
                         f"{list(CONSTRAINT_KEYS)} (got {named or 'none'})")
    extra = spec.get("extra_properties", "forbid")
    if extra not in EXTRA_PROPERTIES:
        raise ValueError(f"extra_args[{KEY!r}]['extra_properties'] must be one of "
                         f"{list(EXTRA_PROPERTIES)}, not {extra!r}")
    if spec.get("grammar_syntax") is not None and named[0] != "grammar":
        raise ValueError(f"extra_args[{KEY!r}]['grammar_syntax'] goes with 'grammar' only")
    try:
        constraint = _constraint(named[0], spec[named[0]], spec)
        compile_for_generation(constraint, _BYTES, extra)
    except TetherError as e:
        raise ValueError(f"extra_args[{KEY!r}][{named[0]!r}]: {e}") from None
    return Spec(constraint, extra)


def _constraint(kind: str, value: Any, spec: Mapping[str, Any]) -> Constraint:
    if kind == "json_schema":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as e:
                raise TetherError(f"not JSON ({e})") from None
        if not isinstance(value, dict | bool):
            raise TetherError("a JSON Schema is an object (or its JSON text)")
        return JsonSchema(value)
    if kind == "regex":
        return Regex(value)
    if kind == "choices":
        if not isinstance(value, list | tuple):
            raise TetherError("choices is a list of strings")
        return Choices(value)
    return Grammar(value, syntax=spec.get("grammar_syntax") or "gbnf")


_BYTES = Vocabulary.of_bytes()


# -- the vocabulary -------------------------------------------------------------------------
_vocabs: dict[tuple[str, str | None], Vocabulary] = {}
_vocabs_lock = threading.Lock()


def model_vocabulary(vllm_config: VllmConfig) -> Vocabulary:
    """The vocabulary of the model's tokenizer, built once per process."""
    config = vllm_config.model_config
    name = str(config.tokenizer)
    revision = getattr(config, "tokenizer_revision", None)
    with _vocabs_lock:
        vocab = _vocabs.get((name, revision))
        if vocab is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(
                name, revision=revision,
                trust_remote_code=bool(getattr(config, "trust_remote_code", False)))
            vocab = _vocabs[(name, revision)] = Vocabulary.from_tokenizer(tokenizer)
    return vocab


# -- the processor --------------------------------------------------------------------------
@dataclass
class _Row:
    """One constrained request in the batch."""

    session: Session | None  # None: the constraint failed to compile (row left alone)
    output: list[int]  # vLLM's list of the request's generated tokens (a live reference)
    spec: Spec
    max_tokens: int | None
    # End-of-generation tokens (to tether) that vLLM does not stop this request on: a
    # finished constraint must not pick one (SmolLM2's <|endoftext|> ends text for tether,
    # but vLLM stops on <|im_end|> only, and would go on generating unconstrained).
    refused: tuple[int, ...] = ()
    seen: int = 0  # tokens of ``output`` the session has consumed


class TetherLogitsProcessor(LogitsProcessor):
    """Mask each request's logits to its tether constraint (module docstring)."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        spec = (sampling_params.extra_args or {}).get(KEY)
        if spec is not None:
            parse_spec(spec)

    def __init__(self, vllm_config: VllmConfig, device: torch.device,
                 is_pin_memory: bool) -> None:
        self.vocab = model_vocabulary(vllm_config)
        self.rows: dict[int, _Row] = {}
        max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        # Reused every step: the mask words of the rows being constrained.
        self._words = np.zeros((max_rows, bitmask.n_words(self.vocab.size)), dtype=np.uint32)

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes the greedy pick

    # -- batch bookkeeping ----------------------------------------------------------------
    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            row = self._new_row(params, output)
            if row is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b

    def _new_row(self, params: SamplingParams, output: list[int]) -> _Row | None:
        raw = (params.extra_args or {}).get(KEY)
        if raw is None:
            return None
        try:
            spec = parse_spec(raw)
        except ValueError as e:  # validate_params rejects these; never crash the engine
            log.warning("tether: request left unconstrained: %s", e)
            return None
        stops = params.all_stop_token_ids
        refused = tuple(sorted(self.vocab.eos_ids - stops)) if stops else ()
        row = _Row(None, output, spec, params.max_tokens, refused)
        row.session = self._session(row)
        return row

    def _session(self, row: _Row) -> Session | None:
        """A fresh session of the row's constraint (``None`` if it does not compile)."""
        try:
            compiled = compile_for_generation(row.spec.constraint, self.vocab,
                                              row.spec.extra_properties)
            matcher = compiled.matcher()
        except TetherError as e:
            log.warning("tether: request left unconstrained, its constraint does not "
                        "compile: %s", e)
            return None
        try:
            return Session(self.vocab, matcher, max_tokens=row.max_tokens)
        except BudgetTooSmall as e:  # constrain anyway; the output will be cut
            log.warning("tether: %s", e)
            return Session(self.vocab, compiled.matcher())

    # -- each step ------------------------------------------------------------------------
    def _catch_up(self, row: _Row) -> None:
        """Feed the row's session the tokens vLLM added to its output since last step."""
        output = row.output
        if len(output) < row.seen:  # tokens taken back (preemption): start again
            row.seen = 0
            row.session = self._session(row)
        session = row.session
        while session is not None and row.seen < len(output):
            token = output[row.seen]
            if token < 0:  # a placeholder for a token still being copied
                break
            row.seen += 1
            if session.matcher.is_stopped:  # type: ignore[union-attr]
                continue
            try:
                session.advance(token)
            except TetherError as e:  # a token the mask did not allow (another stage)
                log.warning("tether: request left unconstrained after token %d: %s",
                            token, e)
                row.session = session = None

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        batch, width = int(logits.shape[0]), int(logits.shape[1])
        indices: list[int] = []
        words = self._words
        for index, row in self.rows.items():
            if index >= batch:
                continue
            self._catch_up(row)
            session = row.session
            if session is None:
                continue
            if session.matcher.is_stopped:  # type: ignore[union-attr]
                continue  # took an end vLLM does not stop on (not refused): left alone
            k = len(indices)
            words[k] = session.mask()
            for token in row.refused:
                words[k, token >> 5] &= ~np.uint32(1 << (token & 31))
            indices.append(index)
        if not indices:
            return logits
        size = min(width, self.vocab.size)
        allowed = torch.from_numpy(bitmask.to_bool(words[:len(indices)], size))
        if width > size:  # ids past the tokenizer's vocabulary (a padded head)
            pad = torch.zeros((len(indices), width - size), dtype=torch.bool)
            allowed = torch.cat([allowed, pad], dim=1)
        allowed = allowed.to(logits.device, non_blocking=True)
        if indices == list(range(batch)):  # every row constrained: in place
            logits.masked_fill_(~allowed, float("-inf"))
            return logits
        rows = torch.tensor(indices, device=logits.device)
        logits[rows] = logits[rows].masked_fill(~allowed, float("-inf"))
        return logits

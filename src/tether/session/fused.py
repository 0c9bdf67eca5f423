"""Fusion in the generation loop (SPEC §7): the run's domains, seen by the decoder as
one matcher.

:class:`FusedConstraint` holds a :class:`~tether.fusion.DomainSet` (Syntax — the main
constraint, or free text —, optional Types / Imports hard domains and soft scorers) and,
with ``phase="auto"``, a :class:`~tether.fusion.PhaseDetector` over the generated text.
While the model reasons the text is free (control tokens excluded, and end of
generation too unless the structured part is free text: the output must reach it) and
no domain exists yet; the domains start at the first byte after the
delimiter (``PhaseDetector.structured_start``). A token that completes the delimiter and
carries bytes past it hands those bytes to the new domains; if Syntax rejects them the
token is excluded and the step decided again, so the structured part is never entered
on an illegal byte.

Each structured step fuses the domains' masks and scores; soft adjustments are added to
the logits of feasible tokens only, and the step's KL is still computed against the
model's own distribution (raw logits, the fused feasible set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import Forced
from tether.errors import ConstraintViolation
from tether.fusion import (
    Domain,
    DomainSet,
    FusionConfig,
    HardDomain,
    Phase,
    PhaseDetector,
    Scorer,
    StepReport,
)
from tether.sampling.engine import context
from tether.session.diagnostics import StepInfo
from tether.vocab import Vocabulary

Choice = tuple[int | None, StepInfo | None, str | None]  # token, diagnostics, stop reason
_Live = tuple[DomainSet, HardDomain]  # domains and their Syntax plug-in
Decide = Callable[[np.ndarray, np.ndarray | None, Sequence[int]], Choice]
_NOTHING_FORCED = Forced(b"", ())
# Spare tokens in the budget (about what settling one more owed name takes) from which
# Syntax's completion need not be read for what it breaks or owes in Imports and Types
# (other completions are assumed to exist; FusedConstraint._settled_fit_after)
WITNESS_ROOM = 16


class Tokenizer(Protocol):
    def tokenize(self, data: bytes, *, special: bool = False,
                 add_bos: bool = False) -> list[int]: ...


class FreeText:
    """The Syntax domain when only Types/Imports/soft domains are given: any text,
    control tokens other than end of generation excluded."""

    def __init__(self, free_mask: np.ndarray) -> None:
        self.free_mask = free_mask

    def mask(self) -> np.ndarray:
        return self.free_mask

    def consume(self, token_id: int) -> None:
        if not bitmask.is_allowed(self.free_mask, token_id):
            raise ConstraintViolation(f"token {token_id} is a control token")

    def rollback(self, n: int = 1) -> None:
        pass

    def fork(self) -> FreeText:
        return self

    def forced(self) -> Forced:
        return _NOTHING_FORCED

    def is_finished(self) -> bool:
        return False

    def is_accepting(self) -> bool:
        return False  # free text has no end of its own: a budget cuts it

    def completes_within(self, k: int) -> bool:
        return True

    def completion_tokens(self) -> int:
        return 0

    def completes_after(self, token_id: int, k: int) -> bool:
        return True

    def budget_mask(self, k: int) -> np.ndarray:
        return self.free_mask


class FusedConstraint:
    """The domains of one run (see the module docstring), with the matcher methods the
    decoder uses: ``is_finished``, ``forced``, ``allowed``, ``consume``, ``rollback``."""

    def __init__(self, config: FusionConfig, vocab: Vocabulary, tokenizer: Tokenizer,
                 syntax: HardDomain, hard: Mapping[Domain, HardDomain],
                 soft: Mapping[Domain, Scorer], free_mask: np.ndarray, *,
                 phased: bool) -> None:
        self.config, self.vocab, self.tokenizer = config, vocab, tokenizer
        self._syntax, self._hard, self._soft = syntax, dict(hard), dict(soft)
        self.free_mask = free_mask
        # Reasoning must lead to the structured part: no end of generation before it
        # (unless the structured part is free text too).
        self.reasoning_mask = free_mask if isinstance(syntax, FreeText) else (
            free_mask & ~bitmask.from_ids(sorted(vocab.eos_ids), vocab.size))
        self.detector = PhaseDetector(config) if phased else None
        self.domains: DomainSet | None = None
        self.syntax: HardDomain | None = None  # the live Syntax plug-in of ``domains``
        self._opening: tuple[int, _Live] | None = None  # checked by _opens_cleanly
        self._debt: tuple[tuple[bytes, ...], int] | None = None  # last settlements, tokens
        self._excess: tuple[tuple, tuple[int, ...]] | None = None  # see _witness_excess
        if self.phase is not Phase.REASONING:
            self.domains, self.syntax = self._new_domains()

    @property
    def phase(self) -> Phase:
        return Phase.STRUCTURED_OUTPUT if self.detector is None else self.detector.phase

    # -- what the decoder asks ---------------------------------------------------------
    def is_finished(self) -> bool:
        """Syntax is complete and every active hard domain accepts the end (else the
        next step decides, relaxing if it must, and says so)."""
        if not (self._syntax_active() and self.syntax.is_finished()):
            return False
        return any(self.allowed(t) for t in self.vocab.eos_ids)

    def forced(self) -> Forced:
        return self.syntax.forced() if self._syntax_active() else _NOTHING_FORCED

    @property
    def structured(self) -> bool:
        """Whether the domains are live (not in the reasoning phase)."""
        return self.domains is not None

    def is_accepting(self) -> bool:
        """Syntax accepts the text and the hard domains allow the end."""
        if not (self._syntax_active() and self.syntax.is_accepting()):
            return False
        return any(self.allowed(t) for t in self.vocab.eos_ids)

    def completes_within(self, k: int) -> bool:
        """Whether Syntax can be completed within ``k`` tokens, the settlement of owed
        names aside (while reasoning: yes; the budget does not yet reserve room for the
        structured part)."""
        return not self._syntax_active() or self.syntax.completes_within(k - self.debt())

    def completion_tokens(self) -> int:
        if not self._syntax_active():
            return 0
        return self.syntax.completion_tokens() + self.debt()

    def completes_after(self, token_id: int, k: int) -> bool:
        """Whether Syntax can be completed within ``k`` tokens after ``token_id``, the
        settlements of what is owed after it aside."""
        if not self._syntax_active():
            return True
        trials = self._owing_after(token_id)
        k -= self.debt(*trials) if trials else self.debt()
        return self.syntax.completes_after(token_id, k) and \
            self._settled_fit_after(token_id, k, trials)

    def _owing_after(self, token_id: int) -> tuple[Any, Any] | None:
        """The live Imports and Types domains (each ``None`` if absent) forked and moved
        on by ``token_id``; ``None`` when neither is live (or for a special token)."""
        imports, types = self._live_imports(), self._live(Domain.TYPES)
        if (imports is None and types is None) or self.vocab.is_special(token_id):
            return None
        trials = []
        for domain in (imports, types):
            if domain is not None:
                domain = domain.fork()
                domain.consume(token_id)
            trials.append(domain)
        return trials[0], trials[1]

    def _settled_fit_after(self, token_id: int, k: int,
                           trials: tuple[Any, Any] | None) -> bool:
        """Near the budget's end — when Syntax's completion after ``token_id`` leaves
        fewer than ``WITNESS_ROOM`` of ``k`` tokens spare —, whether that completion
        reads (up to the closing fence, what the settlements will write taken as
        written) with no more violations of Imports or Types (``trials``: those domains
        after the token) than Syntax's completion from here adds, and, if it owes new
        names, whether their settlement fits too. A token whose completion in the budget
        would break them (``def`` with room for no more than a name glued to it:
        ``defA``; an ``and`` whose right operand cannot be the ``bool`` a return expects)
        or owe a name there is no room to settle (``(*`` then ``A)``) is judged not to
        fit, and the next decision picks another; with more room, other completions are
        assumed to exist. (Where the completion from here already breaks them — an
        argument of the wrong type whose call only Syntax's completion closes —, tokens
        that break no more still fit: else none would.)"""
        if trials is None:
            return True
        syntax = self.syntax
        syntax.consume(token_id)
        try:
            needed = syntax.completion_tokens()
            if needed + WITNESS_ROOM <= k:
                return True
            text = syntax.completion_witness()
        finally:
            syntax.rollback(1)
        if not text:
            return True
        imports, types = trials
        here = self._witness_excess(syntax.completion_witness())
        extra = 0
        for domain, before in zip(trials, here, strict=True):
            if domain is None:
                continue
            after, tracker = self._read_witness(domain, domain is types, text)
            if domain.count(tracker) - domain.count(after) > before:
                return False
            if domain is imports and not set(tracker.owed_names()) <= set(after.owed_names()):
                extra = (self._tokens_of(imports.settlement_of(tracker))
                         - self._tokens_of(imports.settlement_of(after)))
        return needed + extra <= k

    def _witness_excess(self, text: bytes) -> tuple[int, ...]:
        """The violations Syntax's completion from here, ``text``, adds to the live
        Imports and Types (0 for an absent one), read as :meth:`_settled_fit_after` reads
        it; kept for the states and text it was read from (a step asks once per token it
        tries)."""
        domains = (self._live_imports(), self._live(Domain.TYPES))
        key = (text,) + tuple(None if d is None else d.state for d in domains)
        cached = self._excess
        if cached is not None and cached[0][0] == text and all(
                a is b for a, b in zip(cached[0][1:], key[1:], strict=True)):
            return cached[1]
        excess = []
        for domain in domains:
            if domain is None or not text:
                excess.append(0)
                continue
            after, tracker = self._read_witness(domain, domain is domains[1], text)
            excess.append(domain.count(tracker) - domain.count(after))
        self._excess = (key, tuple(excess))
        return self._excess[1]

    @staticmethod
    def _read_witness(domain: Any, types: bool, text: bytes) -> tuple[Any, Any]:
        """``domain``'s tracker as the settlements leave it, and that tracker after
        ``text`` up to its closing fence."""
        fence = text.rfind(b"```")
        text = text[:fence] if fence >= 0 else text
        after = domain.state.settled(types=types)
        tracker = after.copy()
        tracker.feed(text)
        return after, tracker

    def _tokens_of(self, text: bytes) -> int:
        return len(self.tokenizer.tokenize(text, special=False)) if text else 0

    def budget_mask(self, k: int, settle: bool = True) -> np.ndarray:
        """Syntax's tokens after which it can be completed within ``k`` tokens, the
        settlement of owed names aside (``settle=False``: Syntax alone)."""
        if not self._syntax_active():
            return self.free_mask
        return self.syntax.budget_mask(k - (self.debt() if settle else 0))

    def closing_mask(self) -> np.ndarray:
        """Syntax's tokens on a shortest completion: after them it completes in fewer
        tokens than now, or they begin its shortest completion's text (what a budget's
        last resort tries first)."""
        if not self._syntax_active():
            return self.free_mask
        syntax = self.syntax
        on_witness = self.vocab.prefix_tokens(syntax.completion_witness())
        return syntax.budget_mask(syntax.completion_tokens() - 1) | \
            bitmask.from_ids(on_witness, self.vocab.size)

    # -- what the code owes at the end (Imports, Types) ----------------------------------
    def settlement(self) -> bytes:
        """What binds the names the code still owes, the first due: what the innermost
        comprehension must bind before it closes, else the module's definitions
        (``b""``: none, or no Imports domain following the text)."""
        imports, types = self._live_imports(), self._live(Domain.TYPES)
        return ((imports.comprehension_settlement() if imports is not None else b"")
                or (types.settlement() if types is not None else b"")
                or (imports.settlement() if imports is not None else b""))

    def debt(self, imports: Any = None, types: Any = None) -> int:
        """The tokens the settlements take — the comprehension's, the missing return's
        and the module's — (reserved by the budget); ``imports``, ``types``: domains to
        ask instead of the live ones."""
        imports = imports if imports is not None else self._live_imports()
        types = types if types is not None else self._live(Domain.TYPES)
        texts = (b"" if imports is None else imports.comprehension_settlement(here=False),
                 b"" if types is None else types.settlement(here=False),
                 b"" if imports is None else imports.settlement())
        if not any(texts):
            return 0
        cached = self._debt
        if cached is None or cached[0] != texts:
            cached = self._debt = (texts, sum(self._tokens_of(t) for t in texts))
        split = bool(texts[0]) and not imports.comprehension_settlement()
        # (a comprehension's settlement not writable here is written inside Syntax's
        # completion, whose token across that place it splits in two: ``']`` into ``'``
        # and ``]``)
        return cached[1] + split

    def _live_imports(self) -> Any:
        return self._live(Domain.IMPORTS)

    def _live(self, domain: Domain) -> Any:
        """The live hard ``domain`` if it settles what it is owed at a budget's end."""
        if self.domains is None or not self._syntax_active():
            return None
        hard = self.domains.hard(domain)
        return hard if hasattr(hard, "settlement") else None

    def relaxed_for_budget(self) -> tuple[str, ...]:
        """The hard domains besides Syntax a step consults (those a step relaxes when
        only Syntax's budget mask is left)."""
        active = self.config.domains_for(self.phase)
        return tuple(d.value for d in self._hard if d in active)

    def allowed(self, token_id: int) -> bool:
        """Whether every active hard domain allows ``token_id`` (without relaxation)."""
        result = self.domains.step(self.phase).result
        return result.unconstrained or (not result.dropped and
                                        bitmask.is_allowed(result.feasible, token_id))

    def consume(self, token_id: int) -> None:
        if self.domains is not None:
            self.domains.consume(token_id)
        if self.detector is None:
            return
        self.detector.feed(self.vocab.token_bytes(token_id))
        if self.phase is Phase.REASONING:
            self.domains = self.syntax = None  # a reasoning prefix matched
        elif self.domains is None:
            opening, self._opening = self._opening, None
            self.domains, self.syntax = (opening[1] if opening is not None
                                         and opening[0] == token_id else self._open())

    def rollback(self, n: int = 1) -> None:
        self.domains.rollback(n)
        if self.detector is not None:
            self.detector.rollback(n)

    def decide(self, decide: Decide, logits: np.ndarray, history: Sequence[int]) -> Choice:
        """One decision: free in the reasoning phase, fused otherwise."""
        if self.domains is None:
            return self._decide_reasoning(decide, logits, history)
        report = self.domains.step(self.phase)
        result = report.result
        if result.unconstrained:
            token, info, stop = decide(logits, self.free_mask, history)
        else:
            token, info, stop = self._decide_fused(decide, logits, history, result)
        if info is None:
            return token, info, stop
        return token, _with_report(info, report), stop

    # -- internals -------------------------------------------------------------------------
    def _syntax_active(self) -> bool:
        return (self.domains is not None
                and Domain.SYNTAX in self.config.domains_for(self.phase))

    def _new_domains(self) -> _Live:
        syntax = self._syntax.fork()
        hard = {Domain.SYNTAX: syntax}
        hard.update((d, h.fork()) for d, h in self._hard.items())
        soft = {d: s.fork() for d, s in self._soft.items()}
        return DomainSet(self.config, self.vocab, hard, soft), syntax

    def _open(self, detector: PhaseDetector | None = None) -> _Live:
        """New domains that have consumed the text after the delimiter (raises
        ``ConstraintViolation`` if Syntax rejects it). When the delimiter is a code fence
        Syntax itself may start with (a fenced grammar), the domains read the fence line
        too, so that it is not written twice."""
        detector = detector or self.detector
        text = detector.text
        start = detector.structured_start
        rest = text[start:]
        fence = text.rfind(b"```", 0, start)
        if fence >= 0 and b"\n" not in text[fence:start].rstrip(b"\r\n"):
            try:
                return self._domains_after(text[fence:start] + rest)
            except ConstraintViolation:
                pass
        return self._domains_after(rest)

    def _domains_after(self, data: bytes) -> _Live:
        """New domains that have consumed ``data`` (``ConstraintViolation`` if Syntax
        rejects it)."""
        live = self._new_domains()
        for token in self.tokenizer.tokenize(data, special=False) if data else ():
            live[0].consume(token)  # in the structured phase, a new set's default
        return live

    def _opens_cleanly(self, token_id: int) -> bool:
        """Whether a reasoning-phase token may be taken: it stays in the reasoning
        phase, or the bytes it carries past the delimiter are legal."""
        trial = self.detector.fork()
        if trial.feed(self.vocab.token_bytes(token_id)) is Phase.REASONING:
            return True
        try:
            self._opening = (token_id, self._open(trial))
        except ConstraintViolation:
            return False
        return True

    def _decide_reasoning(self, decide: Decide, logits: np.ndarray,
                          history: Sequence[int]) -> Choice:
        mask = self.reasoning_mask
        while True:
            token, info, stop = decide(logits, mask, history)
            if token is None or self._opens_cleanly(token):
                phase = Phase.REASONING.value
                return token, None if info is None else replace(info, phase=phase), stop
            mask = mask.copy()
            mask[token >> 5] &= ~np.uint32(1 << (token & 31))

    def _decide_fused(self, decide: Decide, logits: np.ndarray, history: Sequence[int],
                      result: Any) -> Choice:
        if not result.terms:
            return decide(logits, result.feasible, history)
        adjusted = result.apply(np.asarray(logits, dtype=np.float32), masked=False)
        token, info, stop = decide(adjusted, result.feasible, history)
        if info is None:
            return token, info, stop
        log_z = context(np.asarray(logits, dtype=np.float32), result.feasible).log_z()
        return token, replace(info, kl=-log_z), stop


def _with_report(info: StepInfo, report: StepReport) -> StepInfo:
    """The step's diagnostics with the fusion report's (domains the cascade dropped come
    first, then any the budget relaxed, already in ``info``)."""
    dropped = tuple(d.value for d in report.result.dropped)
    return replace(
        info, phase=report.phase.value,
        dropped=dropped + tuple(d for d in info.dropped if d not in dropped),
        skipped=tuple(d.value for d in report.skipped),
        domain_us={d.value: ns / 1000 for d, ns in report.timings_ns.items()})


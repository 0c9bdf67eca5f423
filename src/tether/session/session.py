"""`Session`: the model-independent state of one generated sequence (SPEC §1, §9, §10).

A session holds what decides the next token — the constraint's matcher, or the fused
domains with their phases (:class:`~tether.session.fused.FusedConstraint`), the decider,
the budget — and what has happened so far: the tokens, per-step diagnostics, the text.
Every runtime is a thin adapter that feeds it logits::

    session = Session(vocab, matcher, decide, max_tokens=256, tokenize=model.tokenize)
    while (stop := session.stop_reason()) is None:
        if session.jump_forward():     # forced tokens, consumed without the model
            continue
        stop = session.decide(model.logits_after(session.tokens))  # one decided token
        if stop is not None:
            break

Adapters that pick tokens themselves (a transformers logits processor) read
:meth:`Session.mask` and report the token with :meth:`Session.advance`.

**Budget** (docs/generation.md): with ``max_tokens`` known, a token is taken only if the
constraint can still be completed in the tokens left after it
(:meth:`~tether.engine.matcher.Matcher.completes_within`). A budget below the shortest
completion from the start raises :class:`~tether.errors.BudgetTooSmall` before anything
is generated; otherwise a run never ends cut by the budget: when the budget is spent the
text is complete (``constraint_complete``). Deciding, the session asks the decider
first and checks the token it picked: a token that does not fit is taken out of the mask
and the decider asked again, which samples exactly from the budget's mask without
computing it; after ``MAX_REJECTIONS`` the budget's mask is computed whole (fused
tokens still checked as many times again). Budgets count Syntax, and what the code still
owes the Imports and Types domains (their *settlements*: a comprehension's own names,
a missing return, the module's undefined names — reserved in the budget and written,
forced, when little room is left: docs/code-domains.md); when fused hard domains still
leave no token that completes Syntax in time, they are relaxed for the step, as the
relaxation cascade would, and the step reports them ``dropped``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import Matcher
from tether.errors import BudgetTooSmall, ConstraintViolation, TetherError
from tether.session.diagnostics import StepInfo
from tether.session.fused import Choice, Decide, FusedConstraint
from tether.vocab import Vocabulary

MAX_REJECTIONS = 32  # tokens refused by the budget in one step before its mask is computed
_SETTLE_ROOM = 3  # spare tokens beside Syntax's completion when owed names are settled

STOP_REASONS = ("eog", "newline", "constraint_complete", "budget", "context")


def free_mask(vocab: Vocabulary) -> np.ndarray:
    """Free text: every token but control tokens other than end of generation."""
    return bitmask.from_bool(~vocab.special | vocab.end_of_generation)


class Session:
    """One sequence: constraint (or fused domains), decider, budget, diagnostics.

    ``constraint``: a matcher, fused domains, or ``None`` for free text. ``decide``
    picks a token from logits under a mask (:mod:`tether.session.deciders`).
    ``max_tokens`` counts every token of the text, forced ones included (end of
    generation excluded); ``room`` is what the context window leaves, if less.
    ``tokenize`` turns forced bytes into the model's own tokens (default: longest
    tokens first). In ``single_line`` mode forced text stops before a line break.
    ``on_text`` receives the text as it is produced. With a budget, ``needed`` is a
    number of tokens that completes the constraint from the start (at most the budget:
    a smaller budget raises :class:`~tether.errors.BudgetTooSmall` here).
    """

    def __init__(self, vocab: Vocabulary, constraint: Matcher | FusedConstraint | None,
                 decide: Decide | None = None, *, max_tokens: int | None = None,
                 room: int | None = None,
                 tokenize: Callable[[bytes], list[int]] | None = None,
                 single_line: bool = False,
                 on_text: Callable[[str], None] | None = None) -> None:
        self.vocab = vocab
        self.matcher = constraint
        self._decide = decide
        self.max_tokens = max_tokens
        limits = [n for n in (max_tokens, room) if n is not None]
        self.budget: int | None = min(limits) if limits else None
        self._tokenize = tokenize
        self.single_line = single_line
        self.on_text = on_text
        self.tokens: list[int] = []
        self.steps: list[StepInfo] = []
        self._chunks: list[bytes] = []
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._free = free_mask(vocab) if constraint is None else None
        self.needed = self._check_budget()

    # -- the budget ----------------------------------------------------------------------
    def _check_budget(self) -> int | None:
        """The tokens the constraint's shortest completion takes, if there is a budget
        (raises if the budget is smaller than that)."""
        if self.matcher is None or self.budget is None:
            return None
        needed = self.matcher.completion_tokens()
        if self.matcher.completes_within(self.budget):
            return min(needed, self.budget)
        what = ("max_tokens" if self.budget == self.max_tokens
                else "the room left in the context window")
        raise BudgetTooSmall(
            f"{what} ({self.budget} tokens) is below the shortest completion of the "
            f"constraint ({needed} tokens): no output could be complete; raise max_tokens",
            needed=needed)

    @property
    def tokens_left(self) -> int | None:
        """Tokens the budget still allows (``None``: no budget)."""
        return None if self.budget is None else self.budget - len(self.tokens)

    def _fits(self, token: int) -> bool:
        """Whether the constraint can still be completed after ``token`` within the
        budget (end of generation always fits)."""
        left = self.tokens_left
        if left is None or self.matcher is None:
            return True
        if isinstance(self.matcher, FusedConstraint) and not self.matcher.structured:
            return True
        return self.matcher.completes_after(token, left - 1)

    def _budget_filter(self, words: np.ndarray) -> np.ndarray:
        """``words`` less the tokens after which the constraint cannot be completed in
        the tokens left."""
        return words & self.matcher.budget_mask(self.tokens_left - 1)  # type: ignore[union-attr,operator]

    # -- what a runtime asks --------------------------------------------------------------
    def stop_reason(self) -> str | None:
        """Why the run must end before the next step (``None``: it goes on)."""
        m = self.matcher
        if m is not None and m.is_finished():
            return "constraint_complete"
        left = self.tokens_left
        if left is not None and left <= 0:
            if m is not None and m.is_accepting():
                return "constraint_complete"
            return "budget" if self.budget == self.max_tokens else "context"
        return None

    def mask(self) -> np.ndarray:
        """The tokens allowed next, the budget included (Bitmask words; plain matchers
        and free text — fused domains decide through :meth:`decide`)."""
        if isinstance(self.matcher, FusedConstraint):
            raise TetherError("a session with fused domains decides its own tokens: "
                              "call decide(logits)")
        if self.matcher is None:
            return self._free  # type: ignore[return-value]
        left = self.tokens_left
        return self.matcher.mask() if left is None else self.matcher.mask_within(left)

    def jump_forward(self) -> list[int]:
        """Consume the tokens of the bytes the constraint forces (jump-forward) and
        return them, holding back the last one (it may merge with what follows) unless
        the constraint is finished after it or the budget ends with it."""
        m = self.matcher
        if m is None:
            return []
        forced = m.forced().bytes
        if self.single_line:
            forced = re.split(rb"[\r\n]", forced, maxsplit=1)[0]
        left = self.tokens_left
        settling = False
        if not forced and left is not None and isinstance(m, FusedConstraint):
            forced = self._settlement_due(m, left)
            settling = bool(forced)  # written whole: its last token is not held back
        if not forced or (left is not None and left <= 0):
            return []
        taken: list[int] = []
        # The model's own tokens for the forced text; if they do not leave room to
        # complete the constraint, the fewest tokens; if those do not either, nothing
        # (the next decision picks a token that fits).
        for tokens in ((self._tokenize(forced) if self._tokenize else None), None):
            taken = self._take(tokens, forced)
            if not taken or left is None or m.completes_within(left - len(taken)):
                break
            m.rollback(len(taken))
            taken = []
        if taken and (left is None or len(taken) < left) and not m.is_finished() and \
                not settling:
            m.rollback(1)
            taken.pop()
        for token in taken:
            self._append(token, self._forced_step(token))
        return taken

    def _settlement_due(self, fused: FusedConstraint, left: int) -> bytes:
        """The first settlement of what the code owes (a comprehension's own names, a
        missing return, the module's undefined names), once the budget has room for
        little more than the settlements and Syntax can take it here (the budget
        reserved their tokens): what a budget's end writes rather than leave a name
        undefined or a return missing."""
        text = fused.settlement()
        if not text or left - fused.debt() > fused.syntax.completion_tokens() + _SETTLE_ROOM:
            return b""
        trial = fused.syntax.fork()
        try:
            for token in (self._tokenize(text) if self._tokenize else
                          self.vocab.segment(text) or []):
                trial.consume(token)
        except ConstraintViolation:
            return b""
        return text

    def _take(self, tokens: list[int] | None, data: bytes) -> list[int]:
        """Consume ``tokens`` (default: ``data`` segmented) while allowed and in budget."""
        if tokens is None:
            tokens = self.vocab.segment(data) or []
        left = self.tokens_left
        taken: list[int] = []
        for token in tokens[:left]:
            if not self.matcher.allowed(token):  # type: ignore[union-attr]
                break
            self.matcher.consume(token)  # type: ignore[union-attr]
            taken.append(token)
        return taken

    def decide(self, logits: np.ndarray) -> str | None:
        """Decide one token from ``logits`` (the model's, after every token so far) and
        consume it; the stop reason if the run ends with it."""
        if self._decide is None:
            raise TetherError("this session has no decider: pick tokens with mask() and "
                              "advance()")
        decide = self._within_budget(self._decide)
        if isinstance(self.matcher, FusedConstraint):
            token, info, stop = self.matcher.decide(decide, logits, self.tokens)
        else:
            mask = self._free if self.matcher is None else self.matcher.mask()
            token, info, stop = decide(logits, mask, self.tokens)
        if token is None or info is None:
            return stop
        if self.matcher is not None:
            self.matcher.consume(token)
        if self.vocab.is_eos(token):
            self.steps.append(info)
        else:
            self._append(token, info)
        return stop

    def advance(self, token: int) -> None:
        """Take ``token``, picked outside the session (it must be in :meth:`mask`)."""
        if self.matcher is not None:
            self.matcher.consume(token)
        info = StepInfo(token=token, forced=False)
        if self.vocab.is_eos(token):
            self.steps.append(info)
        else:
            self._append(token, info)

    def _within_budget(self, decide: Decide) -> Decide:
        """``decide`` asked again without each token that does not fit the budget."""
        if self.tokens_left is None or self.matcher is None:
            return decide

        def within(logits: np.ndarray, mask: np.ndarray | None,
                   history: Sequence[int]) -> Choice:
            allowed = mask
            for _ in range(MAX_REJECTIONS):
                token, info, stop = decide(logits, mask, history)
                if token is None or self._fits(token):
                    return token, info, stop
                mask = mask.copy()  # type: ignore[union-attr]
                mask[token >> 5] &= ~np.uint32(1 << (token & 31))
                if not mask.any():
                    break  # no allowed token fits: relaxed below
            if isinstance(self.matcher, FusedConstraint):
                # Fused tokens within Syntax's budget are checked as many times again for
                # what their completion breaks or owes (:meth:`_fits` reserves the
                # settlements owed after each token, which may settle or split less than
                # what is owed now); then those on a shortest completion of Syntax (they
                # open nothing new).
                loose = mask & self.matcher.budget_mask(
                    self.tokens_left - 1, settle=False)  # type: ignore[operator]
                closing = loose & self.matcher.closing_mask()
                for candidates in (loose, closing):
                    choice = self._first_fit(decide, logits, candidates, history)
                    if choice is not None:
                        return choice
            fitting = self._budget_filter(mask)  # type: ignore[arg-type]
            if fitting.any():
                # The budget's mask (Syntax's, the settlements reserved) decides.
                return decide(logits, fitting, history)
            if not isinstance(self.matcher, FusedConstraint):
                return decide(logits, allowed, history)  # see below
            # Syntax's own budget, keeping room for the settlement of owed names if it can.
            relaxed = self.matcher.budget_mask(self.tokens_left - 1)
            if not relaxed.any():
                relaxed = self.matcher.budget_mask(self.tokens_left - 1, settle=False)
            if not relaxed.any():
                # No token completes in the budget (the bound was wrong: a bug, never an
                # input's fault): the allowed tokens, and the run may end cut by it.
                relaxed = allowed
            token, info, stop = decide(logits, relaxed, history)
            if info is not None:
                info = replace(info, dropped=info.dropped + self.matcher.relaxed_for_budget())
            return token, info, stop

        return within

    def _first_fit(self, decide: Decide, logits: np.ndarray, candidates: np.ndarray,
                   history: Sequence[int]) -> Choice | None:
        """``decide`` among ``candidates`` until its token fits, ``MAX_REJECTIONS`` tries
        at most (``None``: none did)."""
        for _ in range(MAX_REJECTIONS):
            if not candidates.any():
                return None
            token, info, stop = decide(logits, candidates, history)
            if token is None or self._fits(token):
                return token, info, stop
            candidates = candidates.copy()
            candidates[token >> 5] &= ~np.uint32(1 << (token & 31))
        return None

    # -- the text --------------------------------------------------------------------------
    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", errors="replace")

    def flush(self) -> None:
        """Stream what the incremental decoder still holds (a cut-off UTF-8 sequence)."""
        rest = self._utf8.decode(b"", final=True)
        if rest and self.on_text is not None:
            self.on_text(rest)

    def _forced_step(self, token: int) -> StepInfo:
        phase = (self.matcher.phase.value if isinstance(self.matcher, FusedConstraint)
                 else None)
        return StepInfo(token=token, forced=True, phase=phase)

    def _append(self, token: int, info: StepInfo) -> None:
        self.tokens.append(token)
        self.steps.append(info)
        piece = self.vocab.token_bytes(token)
        self._chunks.append(piece)
        if self.on_text is not None:
            text = self._utf8.decode(piece)
            if text:
                self.on_text(text)

"""The deterministic decoder (SPEC §9, seed 001 without its bugs, SPEC §13): exclusions
(control tokens out, end of generation in), ties, the candidate pool after exclusions,
full-softmax log-probs, confidence, newlines (LF and CR) in single-line mode; then the
embedded model through ``generate(deterministic=True)``."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tether
from tether.engine import bitmask
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling import Confidence, DeterministicDecoder, engine

EOS, CONTROL, EOT = 0, 1, 2
TOKENS = [b"", b"<ctl>", b"", b"a", b"b", b"\n", b"\r", b"x\ny", b"z\r", b"\r\n", b"c", b" "]
LF, CR, MIXED_LF, MIXED_CR, CRLF = 5, 6, 7, 8, 9
NEWLINES = {LF, CR, MIXED_LF, MIXED_CR, CRLF}


@pytest.fixture(scope="module")
def vocab() -> tether.Vocabulary:
    return tether.Vocabulary(TOKENS, special_ids=[CONTROL], eos_ids=[EOS, EOT])


def logits_with(**values: float) -> np.ndarray:
    """-10 everywhere but where given (``t3=2.0``: token 3 has logit 2)."""
    x = np.full(len(TOKENS), -10.0, dtype=np.float32)
    for name, value in values.items():
        x[int(name[1:])] = value
    return x


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - np.logaddexp.reduce(x)


def test_control_tokens_are_excluded_but_eog_can_fire(vocab):
    decoder = DeterministicDecoder()
    d = decoder.decide(logits_with(t1=50.0, t3=5.0), vocab)
    assert d.token == 3 and d.stop is None  # the control token lost despite its logit
    d = decoder.decide(logits_with(t1=50.0, t2=9.0, t3=5.0), vocab)
    assert d.token == EOT and d.stop == "eog"  # end of generation is not excluded
    masked = decoder.decide(logits_with(t2=9.0, t3=5.0), vocab, bitmask.from_ids([3, 4], 12))
    assert masked.token == 3  # …unless the constraint does not allow it yet


def test_ties_go_to_the_lowest_id(vocab):
    decoder = DeterministicDecoder(pool=4)
    d = decoder.decide(logits_with(t4=3.0, t10=3.0, t3=3.0, t11=3.0, t1=3.0), vocab)
    assert d.token == 3 and d.candidates == (3, 4, 10, 11)


def test_pool_is_taken_after_the_exclusions(vocab):
    """Seed 001 took the top-K before excluding control tokens, so a step could come
    back empty although admissible tokens existed."""
    x = logits_with(t1=90.0, t5=80.0, t6=70.0, t7=60.0, t3=-5.0, t4=-6.0)
    d = DeterministicDecoder(pool=2, single_line=True).decide(x, vocab)
    assert d.token == 3 and d.candidates == (3, 4)
    d = DeterministicDecoder(pool=50).decide(x, vocab)
    assert d.candidates[:4] == (5, 6, 7, 3) and CONTROL not in d.candidates
    assert len(d.candidates) == 11  # every admissible token, best first


def test_logprob_comes_from_the_full_softmax(vocab):
    x = np.random.default_rng(0).normal(0, 2, len(TOKENS)).astype(np.float32)
    mask = bitmask.from_ids([3, 4, 10], 12)
    d = DeterministicDecoder().decide(x, vocab, mask)
    assert d.logprob == pytest.approx(log_softmax(x)[d.token], abs=1e-6)
    legal = np.logaddexp.reduce(x[[3, 4, 10]].astype(np.float64))
    assert d.log_z == pytest.approx(legal - np.logaddexp.reduce(x.astype(np.float64)), abs=1e-6)
    assert d.feasible == 3 and d.kl == -d.log_z


@pytest.mark.parametrize("token", sorted(NEWLINES))
def test_cr_and_lf_both_count_as_newlines(vocab, token):
    assert vocab.has_newline[token]
    x = logits_with(**{f"t{token}": 10.0, "t4": 1.0})
    assert DeterministicDecoder().decide(x, vocab).token == token
    d = DeterministicDecoder(single_line=True).decide(x, vocab)
    assert d.token == 4 and d.stop is None  # masked, not a stop: the line goes on


def test_single_line_stops_only_when_a_newline_is_required(vocab):
    decoder = DeterministicDecoder(single_line=True)
    only_newlines = bitmask.from_ids([LF, CR], 12)
    d = decoder.decide(logits_with(t5=1.0), vocab, only_newlines)
    assert d.token is None and d.stop == "newline"
    with pytest.raises(NoLegalContinuation):
        decoder.decide(logits_with(), vocab, bitmask.from_ids([CONTROL], 12))
    with pytest.raises(NoLegalContinuation):
        DeterministicDecoder().decide(logits_with(), vocab, bitmask.from_ids([], 12))


def test_a_token_is_returned_even_when_every_admissible_logit_is_minus_inf(vocab):
    x = np.full(len(TOKENS), -np.inf, dtype=np.float32)
    x[1] = 5.0
    x[7] = np.nan
    d = DeterministicDecoder().decide(x, vocab, bitmask.from_ids([4, 7, 10], 12))
    assert d.token == 4 and d.logprob == -math.inf and d.feasible == 3


@settings(max_examples=300, deadline=None)
@given(logits=hnp.arrays(np.float32, len(TOKENS), elements=st.one_of(
           st.floats(-30, 30, width=32), st.just(np.float32(-np.inf)))),
       allowed=hnp.arrays(bool, len(TOKENS)), single_line=st.booleans(),
       pool=st.integers(0, 6))
def test_a_token_whenever_an_admissible_one_exists(vocab, logits, allowed, single_line, pool):
    decoder = DeterministicDecoder(pool=pool, single_line=single_line)
    mask = bitmask.from_bool(allowed)
    admissible = bitmask.to_bool(decoder.admissible(vocab, mask), len(TOKENS))
    if not admissible.any():
        if single_line and bitmask.popcount(decoder.admissible_with_newlines(vocab, mask)):
            assert decoder.decide(logits, vocab, mask).stop == "newline"
            return
        with pytest.raises(NoLegalContinuation):
            decoder.decide(logits, vocab, mask)
        return
    d = decoder.decide(logits, vocab, mask)
    assert d.token is not None and admissible[d.token]
    assert not vocab.is_special(d.token) or vocab.is_eos(d.token)
    assert not (single_line and vocab.has_newline[d.token])
    live = np.flatnonzero(admissible)
    best = live[np.argmax(logits[live])] if np.isfinite(logits[live]).any() else live[0]
    assert d.token == best
    assert len(d.candidates) == min(max(pool, 1), np.isfinite(logits[live]).sum() or 1)


def test_large_vocabulary_window_gives_the_full_row_answer(monkeypatch):
    size = 60000
    tokens = [b"x%d" % i for i in range(size - 3)] + [b"", b"\n", b"<c>"]
    big = tether.Vocabulary(tokens, special_ids=[size - 1], eos_ids=[size - 3])
    rng = np.random.default_rng(4)
    for case in range(20):
        x = rng.normal(0, 3, size).astype(np.float32)
        x[size - 1] = 40.0  # a control token on top
        allowed = rng.random(size) < [1.0, 0.5, 0.05, 0.001][case % 4]
        allowed[rng.integers(size)] = True
        mask = bitmask.from_bool(allowed)
        decoder = DeterministicDecoder(pool=8)
        fast = decoder.decide(x, big, mask)
        monkeypatch.setattr(engine, "WINDOWS", ())
        full = decoder.decide(x, big, mask)
        monkeypatch.undo()
        assert fast.token == full.token and fast.candidates == full.candidates
        assert fast.logprob == pytest.approx(full.logprob, abs=1e-5)
        assert fast.log_z == pytest.approx(full.log_z, abs=1e-5)
        assert fast.feasible == full.feasible


def test_confidence_missing_logprobs_never_inflate():
    c = Confidence(floor=-2.0)
    assert c.mean is None and not c.suppressed
    c.add(-1.0)
    c.add(-1.5)
    assert c.mean == pytest.approx(-1.25) and not c.suppressed
    c.add(None)  # seed 001 counted it with log-prob 0, raising the mean
    assert c.mean == -math.inf and c.suppressed
    c = Confidence(floor=-2.0)
    c.add(-3.0)
    c.add(float("nan"))
    assert c.suppressed
    c = Confidence()
    c.add(-50.0)
    assert not c.suppressed  # no floor, no suppression


def test_invalid_pool():
    with pytest.raises(TetherError):
        DeterministicDecoder(pool=-1)


# -- generate(deterministic=True) with a fake model --------------------------------------------
class ScriptModel:
    """A model over ``TOKENS`` whose logits come from ``script(history)``."""

    def __init__(self, vocab, script) -> None:
        self.vocab, self.script, self.n_ctx = vocab, script, 64
        self.history: list[int] = []

    def tokenize(self, data, *, special=False, add_bos=False):
        return [TOKENS.index(bytes([b])) for b in data if bytes([b]) in TOKENS]

    def eval(self, tokens):
        self.history.extend(tokens)

    def logits(self):
        return self.script(self.history)

    def reset(self):
        self.history = []

    def chat_prompt(self, prompt, system=None):
        return [3]


def test_generate_deterministic_stop_reasons(vocab):
    def script(history):
        step = len(history) - 1
        x = logits_with(t1=99.0, t3=2.0, t6=1.0)  # a control token always on top
        if step == 3:
            x[CR] = 5.0  # the model wants a line break…
        if step == 6:
            x[EOS] = 9.0
        return x

    model = ScriptModel(vocab, script)
    result = tether.generate("q", None, model=model, deterministic=True)
    assert result.text == "aaa\raa" and result.stop_reason == "eog"
    assert result.kl[-1].token == EOS and CONTROL not in result.tokens
    one_line = tether.generate("q", None, model=model,
                               deterministic=DeterministicDecoder(single_line=True))
    assert one_line.text == "aaaaaa" and one_line.stop_reason == "eog"  # …masked
    assert tether.generate("q", None, model=model, deterministic=True,
                           max_tokens=2).stop_reason == "budget"
    assert one_line.confidence is not None and one_line.confidence < 0
    newline_only = tether.generate("q", tether.Regex("a\r"), model=model,
                                   deterministic=DeterministicDecoder(single_line=True))
    assert newline_only.text == "a" and newline_only.stop_reason == "newline"
    complete = tether.generate("q", tether.Regex("ab"), model=model, deterministic=True)
    assert complete.text == "ab" and complete.stop_reason == "constraint_complete"
    floor = DeterministicDecoder(confidence_floor=-0.01)
    assert tether.generate("q", None, model=model, deterministic=floor).suppressed
    with pytest.raises(TetherError, match="deterministic"):
        tether.generate("q", None, model=model, deterministic=True, temperature=0.5)


# -- the embedded model -----------------------------------------------------------------------
@pytest.mark.model
def test_embedded_model_is_byte_identical_across_runs():
    pytest.importorskip("llama_cpp")
    runs = [tether.generate("Describe the sea in one sentence.", None, max_tokens=40,
                            deterministic=True) for _ in range(10)]
    assert len({r.text.encode() for r in runs}) == 1
    assert len({tuple(r.tokens) for r in runs}) == 1
    assert runs[0].text and runs[0].confidence is not None


@pytest.mark.model
def test_embedded_model_stops_on_eog_and_never_emits_control_tokens():
    pytest.importorskip("llama_cpp")
    model = tether.runtime.load_model()
    result = tether.generate("Say hello.", None, max_tokens=200, deterministic=True)
    assert result.stop_reason == "eog"
    assert model.vocab.is_eos(result.kl[-1].token)
    assert not any(model.vocab.is_special(t) for t in result.tokens)
    assert "<|" not in result.text


@pytest.mark.model
def test_embedded_model_single_line_and_constraints():
    pytest.importorskip("llama_cpp")
    model = tether.runtime.load_model()
    poem = tether.generate("Write a four-line poem about rain.", None, max_tokens=40,
                           deterministic=DeterministicDecoder(single_line=True))
    assert "\n" not in poem.text and "\r" not in poem.text
    assert not any(model.vocab.has_newline[t] for t in poem.tokens)
    pattern = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    date = tether.generate("When did the Apollo 11 landing happen? Answer with a date.",
                           tether.Regex(pattern), deterministic=DeterministicDecoder(pool=5))
    assert re.fullmatch(pattern, date.text) and date.stop_reason == "constraint_complete"
    assert all(s.logprob is not None for s in date.kl if not s.forced)

"""Faithful sampling (docs/faithful-sampling.md): the exact enumerator against brute
force, resampling, reproducibility, and SMC drawing from the target where masking does
not."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

import tether
from tether.errors import LimitExceeded, TetherError
from tether.sampling.exact import divergence, empirical, exact_distributions
from tether.sampling.smc import SMC, effective_sample_size, systematic_resample
from tether.sampling.synthetic import SyntheticSource

TOKENS = [b"a", b"b", b"c", b"y", b"e", b"s", b"n", b"o", b"ab", b"ba", b"ye", b"yes",
          b"no", b"bc"]
VOCAB = tether.Vocabulary([*TOKENS, b""], eos_ids=[len(TOKENS)])
EOS = len(TOKENS)

# (constraint, its language)
FINITE = [
    (tether.Regex("(yes|no|ab)"), {b"yes", b"no", b"ab"}),
    (tether.Regex("[ab]{1,3}"), {bytes(p) for n in (1, 2, 3)
                                 for p in itertools.product(b"ab", repeat=n)}),
    (tether.Choices(["abc", "bc", "ba", "c"]), {b"abc", b"bc", b"ba", b"c"}),
]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - np.logaddexp.reduce(x)


def _brute_force(source: SyntheticSource, language: set[bytes]) -> tuple[dict, dict]:
    """Target and masking distributions from every token sequence of the language,
    with masks computed from the language itself."""
    prefixes = {w[:i] for w in language for i in range(len(w) + 1)}

    def allowed(data: bytes) -> list[int]:
        ids = [t for t, tok in enumerate(TOKENS) if data + tok in prefixes]
        return ids + [EOS] * (data in language)

    target: dict[bytes, float] = {}
    masking: dict[bytes, float] = {}
    longest = max(map(len, language))
    for n in range(1, longest + 1):
        for seq in itertools.product(range(len(TOKENS)), repeat=n):
            data = b"".join(TOKENS[t] for t in seq)
            if data not in language:
                continue
            p = q = 1.0
            for i, token in enumerate((*seq, EOS)):
                lp = _log_softmax(source.next_logits(seq[:i]))
                here = b"".join(TOKENS[t] for t in seq[:i])
                z = sum(math.exp(lp[t]) for t in allowed(here))
                p *= math.exp(lp[token])
                q *= math.exp(lp[token]) / z
            target[data] = target.get(data, 0.0) + p
            masking[data] = masking.get(data, 0.0) + q
    total = sum(target.values())
    return {x: v / total for x, v in target.items()}, masking


@pytest.mark.parametrize(("constraint", "language"), FINITE, ids=lambda c: str(c)[:24])
def test_enumeration_agrees_with_brute_force(constraint, language) -> None:
    source = SyntheticSource(VOCAB.size, seed=3, scale=1.5)
    exact = exact_distributions(source, VOCAB, tether.compile(constraint, VOCAB).matcher())
    target, masking = _brute_force(source, language)
    assert set(exact.target) == language
    for x in language:
        assert exact.target[x] == pytest.approx(target[x], rel=1e-6)
        assert exact.masking[x] == pytest.approx(masking[x], rel=1e-6)
    assert sum(exact.masking.values()) == pytest.approx(1.0)


def test_systematic_resampling_keeps_proportions() -> None:
    rng = np.random.default_rng(0)
    weights = np.array([0.5, 0.0, 0.25, 0.125, 0.125])
    for _ in range(50):
        picked = systematic_resample(weights, rng)
        counts = np.bincount(picked, minlength=weights.size)
        assert counts.sum() == weights.size
        expected = weights / weights.sum() * weights.size
        assert np.all(counts >= np.floor(expected)) and np.all(counts <= np.ceil(expected))
    assert counts[1] == 0
    with pytest.raises(TetherError):
        systematic_resample(np.zeros(3), rng)


def test_effective_sample_size() -> None:
    assert effective_sample_size(np.zeros(8)) == pytest.approx(8.0)
    assert effective_sample_size(np.array([0.0, -np.inf, -np.inf])) == pytest.approx(1.0)
    assert effective_sample_size(np.full(4, -np.inf)) == 0.0


def test_a_seed_makes_smc_reproducible() -> None:
    compiled = tether.compile(tether.Regex("[ab]{1,3}"), VOCAB)
    source = SyntheticSource(VOCAB.size, seed=1)
    first = [SMC(source, VOCAB, compiled.matcher(), particles=8).sample(s) for s in range(20)]
    again = [SMC(source, VOCAB, compiled.matcher(), particles=8).sample(s) for s in range(20)]
    assert first == again
    assert len({r.tokens for r in first}) > 1
    for r in first:
        data = b"".join(VOCAB.token_bytes(t) for t in r.tokens)
        assert re.fullmatch(rb"[ab]{1,3}", data)
        assert len(r.ess) >= 1 and r.particles == 8


def test_smc_draws_from_the_target_where_masking_does_not() -> None:
    compiled = tether.compile(tether.Regex("(yes|no|ab)"), VOCAB)
    source = SyntheticSource(VOCAB.size, seed=0, scale=1.5)
    exact = exact_distributions(source, VOCAB, compiled.matcher())
    masking_tv = divergence(exact.target, exact.masking).tv
    assert masking_tv > 0.1  # the case SMC is for
    found = {}
    for n, lookahead in ((1, 0), (32, 0), (32, 32)):
        smc = SMC(source, VOCAB, compiled.matcher(), particles=n, lookahead=lookahead)
        draws = [b"".join(VOCAB.token_bytes(t) for t in smc.sample(s).tokens)
                 for s in range(3000)]
        found[n, lookahead] = divergence(exact.target, empirical(draws)).tv
    assert found[1, 0] == pytest.approx(masking_tv, abs=0.05)  # plain masking
    assert found[32, 0] < masking_tv / 3
    assert found[32, 32] < masking_tv / 3


def test_the_marginal_likelihood_estimate_is_unbiased() -> None:
    compiled = tether.compile(tether.Regex("[ab]{1,3}"), VOCAB)
    source = SyntheticSource(VOCAB.size, seed=2)
    exact = exact_distributions(source, VOCAB, compiled.matcher())
    for lookahead in (0, 32):
        smc = SMC(source, VOCAB, compiled.matcher(), particles=4, lookahead=lookahead)
        mean = np.mean([math.exp(smc.sample(s).log_marginal) for s in range(2000)])
        assert mean == pytest.approx(math.exp(exact.log_mass), rel=0.1)


def test_bad_settings_and_infinite_languages_are_refused() -> None:
    compiled = tether.compile(tether.Regex("a+"), VOCAB)
    source = SyntheticSource(VOCAB.size)
    with pytest.raises(TetherError, match="particles"):
        SMC(source, VOCAB, compiled.matcher(), particles=0)
    with pytest.raises(TetherError, match="ess_threshold"):
        SMC(source, VOCAB, compiled.matcher(), ess_threshold=2.0)
    with pytest.raises(LimitExceeded):
        exact_distributions(source, VOCAB, compiled.matcher(), max_tokens=8)
    no_end = tether.Vocabulary(TOKENS)
    with pytest.raises(TetherError, match="end-of-generation"):
        SMC(source, no_end, tether.compile(tether.Regex("a"), no_end).matcher())


def test_budget_aware_masks_keep_particles_within_max_tokens() -> None:
    compiled = tether.compile(tether.Regex("a{3}|b"), VOCAB)
    source = SyntheticSource(VOCAB.size, seed=5)
    for s in range(30):
        r = SMC(source, VOCAB, compiled.matcher(), particles=8, max_tokens=1).sample(s)
        assert r.tokens == (VOCAB.tokens.index(b"b"),)
    with pytest.raises(tether.errors.BudgetTooSmall):
        SMC(source, VOCAB, tether.compile(tether.Regex("a{3}"), VOCAB).matcher(),
            max_tokens=2)


def test_lookahead_sums_small_languages_exactly() -> None:
    compiled = tether.compile(tether.Regex("[ab]{1,3}"), VOCAB)
    source = SyntheticSource(VOCAB.size, seed=4, scale=1.5)
    exact = exact_distributions(source, VOCAB, compiled.matcher())
    small = SMC(source, VOCAB, compiled.matcher(), lookahead=3)
    assert small.tree.future((), 3) is None  # more prefixes below than that
    smc = SMC(source, VOCAB, compiled.matcher(), particles=1, lookahead=512)
    assert smc.tree.future((), 512) == pytest.approx(exact.log_mass)
    draws = [b"".join(VOCAB.token_bytes(t) for t in smc.sample(s).tokens)
             for s in range(4000)]
    assert divergence(exact.target, empirical(draws)).tv < 0.04  # one particle, exact
    assert smc.sample(0).log_marginal == pytest.approx(exact.log_mass)


# -- generate(sampler="smc") and the command line ---------------------------------------------
def test_generate_with_smc() -> None:
    from test_generate import FakeModel

    model = FakeModel(lambda history: np.random.default_rng(len(history)).normal(
        0, 2, model.vocab.size).astype(np.float32))
    for seed in range(3):
        result = tether.generate("q?", tether.Regex("(yes|no|abc)"), model=model, seed=seed,
                                 sampler="smc", particles=8, temperature=1.0)
        assert result.text in ("yes", "no", "abc") and result.stop_reason == "eog"
        assert result.smc is not None and result.smc.particles == 8
        assert len(result.kl) == len(result.tokens) + 1  # the end token's step too
        assert result.to_dict()["smc"]["model_calls"] >= 1


@pytest.mark.parametrize("settings", [
    {"sampler": "beam"}, {"sampler": "smc", "particles": 0},
    {"sampler": "smc", "particles": "16"},
    {"sampler": "smc", "deterministic": True}, {"sampler": "smc", "sampling": "sample"},
    {"sampler": "smc", "temperature": 0.0}, {"sampler": "smc", "phase": "auto"},
], ids=str)
def test_smc_settings_it_cannot_run_with_are_refused(settings) -> None:
    from test_generate import FakeModel

    with pytest.raises(TetherError):
        tether.generate("q?", tether.Regex("a"), model=FakeModel(), **settings)
    with pytest.raises(TetherError, match="constraint"):
        tether.generate("q?", None, model=FakeModel(), sampler="smc")


def test_cli_refuses_smc_settings_before_loading_the_model(capsys) -> None:
    from tether.cli import main

    assert main(["generate", "--regex", "a", "--sampler", "smc", "--deterministic",
                 "--model", "/no/such/model.gguf", "q"]) == 2
    assert "sampler 'smc'" in capsys.readouterr().err


@pytest.mark.model
def test_smc_with_the_embedded_model() -> None:
    result = tether.generate("Pick a number from 1 to 9.", tether.Regex("[1-9]"),
                             sampler="smc", particles=4, seed=0, temperature=1.0)
    assert re.fullmatch("[1-9]", result.text) and result.smc is not None


class _BatchSource:
    """A synthetic source that also answers in batches, counting both kinds of call."""

    def __init__(self) -> None:
        self.inner = SyntheticSource(VOCAB.size, seed=6)
        self.single = self.batches = 0

    def next_logits(self, tokens):
        self.single += 1
        return self.inner.next_logits(tokens)

    def next_logits_batch(self, prefixes):
        self.batches += 1
        return np.stack([self.inner.next_logits(p) for p in prefixes])


def test_a_step_goes_to_a_batching_source_in_one_call() -> None:
    compiled = tether.compile(tether.Regex("[abc]{2,4}"), VOCAB)
    batched, plain = _BatchSource(), SyntheticSource(VOCAB.size, seed=6)
    one = SMC(batched, VOCAB, compiled.matcher(), particles=16, lookahead=0).sample(1)
    two = SMC(plain, VOCAB, compiled.matcher(), particles=16, lookahead=0).sample(1)
    assert one == two or one.tokens == two.tokens  # the same draw either way
    assert batched.batches >= 1 and batched.single <= 1  # the root alone, at most


@pytest.mark.model
@pytest.mark.slow
def test_smc_with_a_transformers_model() -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from tether.errors import ModelError
    from tether.integrations.transformers_source import TransformersSource
    from tether.runtime.hf_export import export_embedded

    try:
        folder = export_embedded()
    except ModelError:
        pytest.skip("the embedded model is not installed")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    vocab = tether.Vocabulary.from_tokenizer(tokenizer)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Pick a number from 1 to 9."}], tokenize=False,
        add_generation_prompt=True)
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    source = TransformersSource(model.eval(), prompt, pad_id=tokenizer.eos_token_id)
    rows = source.next_logits_batch([[], [tokenizer.convert_tokens_to_ids("7")]])
    assert np.allclose(rows[0], source.next_logits([]), atol=1e-3)  # padding changes nothing
    compiled = tether.compile(tether.Regex("[1-9]"), vocab)
    result = SMC(source, vocab, compiled.matcher(), particles=8).sample(0)
    assert re.fullmatch(rb"[1-9]", b"".join(vocab.token_bytes(t) for t in result.tokens))

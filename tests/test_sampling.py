"""The sampling pipeline against straightforward reference implementations (SPEC §9)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tether.engine import bitmask
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling import Pipeline, engine
from tether.sampling.rows import Row

NEG_INF = np.float32(-np.inf)


# -- reference implementations: full sorts and Python loops, no cleverness -------------------
def ref_apply(logits, allowed, pipeline: Pipeline, history=()):
    x = np.array(logits, dtype=np.float32)
    x[~allowed] = NEG_INF
    if pipeline.temperature not in (0, 1):
        x = x / np.float32(pipeline.temperature)
    for token in set(history):
        if not 0 <= token < len(x):
            continue
        v = float(x[token])
        if pipeline.repetition_penalty != 1:
            v = v / pipeline.repetition_penalty if v > 0 else v * pipeline.repetition_penalty
        v -= pipeline.presence_penalty + pipeline.frequency_penalty * list(history).count(token)
        x[token] = np.float32(v)
    if pipeline.top_k and pipeline.top_k < len(x):
        kth = np.sort(x)[::-1][pipeline.top_k - 1]
        if kth > NEG_INF:
            x[x < kth] = NEG_INF
    if pipeline.top_p < 1:
        w = np.exp(x - x.max())
        ordered = np.sort(w[w > 0])[::-1]
        cumulative = np.cumsum(ordered, dtype=np.float64)
        target = pipeline.top_p * float(w[w > 0].sum(dtype=np.float64))
        cut = next((i for i, c in enumerate(cumulative) if c >= target), len(ordered) - 1)
        x[w < ordered[cut]] = NEG_INF
    if pipeline.min_p > 0:
        probs = np.exp(x.astype(np.float64) - float(x.max()))
        x[probs < pipeline.min_p] = NEG_INF
    return x


def softmax(x):
    e = np.exp(np.asarray(x, dtype=np.float64) - np.max(x))
    return e / e.sum()


def random_case(seed: int, size: int, density: float):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, size).astype(np.float32)
    allowed = rng.random(size) < density
    allowed[rng.integers(size)] = True
    return logits, allowed


PIPELINES = [
    Pipeline(),
    Pipeline(temperature=0.5),
    Pipeline(temperature=1.7, top_k=5),
    Pipeline(top_p=0.8),
    Pipeline(temperature=0.8, top_k=50, top_p=0.9),
    Pipeline(min_p=0.1),
    Pipeline(temperature=0.7, min_p=0.05, top_p=0.95),
    Pipeline(repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.25),
    Pipeline(temperature=0),
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=repr)
@pytest.mark.parametrize("density", [1.0, 0.3, 0.01])
def test_apply_matches_reference(pipeline, density):
    for seed in range(5):
        logits, allowed = random_case(seed, 3000, density)
        history = [1, 2, 2, 7, int(np.argmax(logits))]
        mask = bitmask.from_bool(allowed)
        got = pipeline.apply(logits, mask, history)
        want = ref_apply(logits, allowed, pipeline, history)
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
        np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)], rtol=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    logits=hnp.arrays(np.float32, st.integers(1, 80),
                      elements=st.floats(-30, 30, width=32)),
    data=st.data(),
    temperature=st.sampled_from([0.0, 0.3, 1.0, 2.5]),
    top_k=st.integers(0, 10),
    top_p=st.sampled_from([1.0, 0.95, 0.5, 0.1]),
    min_p=st.sampled_from([0.0, 0.05, 0.5]),
)
def test_apply_matches_reference_hypothesis(logits, data, temperature, top_k, top_p, min_p):
    allowed = data.draw(hnp.arrays(bool, logits.shape[0]))
    allowed[data.draw(st.integers(0, logits.shape[0] - 1))] = True
    pipeline = Pipeline(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    got = pipeline.apply(logits, bitmask.from_bool(allowed))
    want = ref_apply(logits, allowed, pipeline)
    assert np.isfinite(got).any()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)], rtol=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    logits=hnp.arrays(np.float32, st.integers(1, 70), elements=st.floats(-20, 20, width=32)),
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
    pipeline=st.sampled_from(PIPELINES),
)
def test_never_samples_a_masked_token(logits, data, seed, pipeline):
    allowed = data.draw(hnp.arrays(bool, logits.shape[0]))
    allowed[data.draw(st.integers(0, logits.shape[0] - 1))] = True
    step = pipeline.sample(logits, bitmask.from_bool(allowed), rng=np.random.default_rng(seed))
    assert allowed[step.token]
    assert step.feasible == int(allowed.sum())
    assert math.isfinite(step.logprob) and step.logprob <= 1e-9
    assert math.isfinite(step.kl) and step.kl >= 0


@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.999])
def test_wide_nucleus_matches_reference(top_p):
    rng = np.random.default_rng(14)
    logits = rng.normal(0, 0.7, 20000).astype(np.float32)  # flat: thousands in the nucleus
    logits[:50] = np.float32(-np.inf)
    allowed = np.ones(20000, dtype=bool)
    pipeline = Pipeline(top_p=top_p)
    got = pipeline.apply(logits, bitmask.from_bool(allowed))
    want = ref_apply(logits, allowed, pipeline)
    assert np.isfinite(want).sum() > 1000
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))


def test_sample_frequencies_follow_processed_distribution():
    logits, allowed = random_case(3, 40, 0.5)
    pipeline = Pipeline(temperature=1.5, top_k=8)
    probs = softmax(pipeline.apply(logits, bitmask.from_bool(allowed)))
    rng = np.random.default_rng(0)
    n = 20000
    counts = np.bincount([pipeline.sample(logits, bitmask.from_bool(allowed), rng=rng).token
                          for _ in range(n)], minlength=40)
    assert counts[probs == 0].sum() == 0
    sd = np.sqrt(probs * (1 - probs) / n)
    assert np.all(np.abs(counts / n - probs) <= 5 * sd + 1e-9)


def test_draw_covers_many_blocks():
    rng = np.random.default_rng(1)
    logits = np.zeros(5000, dtype=np.float32)
    tokens = {Pipeline().sample(logits, rng=rng).token for _ in range(3000)}
    assert min(tokens) < 500 and max(tokens) > 4500 and len(tokens) > 2000


def test_logprob_is_under_processed_distribution():
    logits, allowed = random_case(5, 100, 0.4)
    pipeline = Pipeline(temperature=0.6, top_p=0.9)
    mask = bitmask.from_bool(allowed)
    probs = softmax(pipeline.apply(logits, mask))
    step = pipeline.sample(logits, mask, rng=np.random.default_rng(2))
    assert step.logprob == pytest.approx(math.log(probs[step.token]), abs=1e-5)


def test_kl_is_minus_log_legal_mass():
    logits, allowed = random_case(7, 500, 0.2)
    step = Pipeline(temperature=0.3, top_k=3).sample(logits, bitmask.from_bool(allowed))
    legal_mass = softmax(logits)[allowed].sum()
    assert step.log_z == pytest.approx(math.log(legal_mass), abs=1e-5)
    assert step.kl == pytest.approx(-math.log(legal_mass), abs=1e-5)


def test_no_mask_means_no_kl():
    logits, _ = random_case(8, 300, 1.0)
    step = Pipeline().sample(logits, rng=np.random.default_rng(0))
    assert step.kl == 0.0 and step.feasible == 300


def test_full_mask_is_identity():
    logits, _ = random_case(9, 300, 1.0)
    mask = bitmask.from_bool(np.ones(300, dtype=bool))
    pipeline = Pipeline(temperature=0.9, top_p=0.9)
    np.testing.assert_array_equal(pipeline.apply(logits, mask), pipeline.apply(logits))
    a = pipeline.sample(logits, mask, rng=np.random.default_rng(4))
    b = pipeline.sample(logits, rng=np.random.default_rng(4))
    assert a.token == b.token
    assert a.kl == pytest.approx(0.0, abs=1e-6)


def test_one_token_mask_forces_it():
    logits, _ = random_case(10, 1000, 1.0)
    worst = int(np.argmin(logits))
    mask = bitmask.from_ids([worst], 1000)
    for pipeline in PIPELINES:
        step = pipeline.sample(logits, mask, rng=np.random.default_rng(0))
        assert step.token == worst and step.feasible == 1
        assert step.logprob == pytest.approx(0.0, abs=1e-9)
        assert step.kl > 5


@pytest.mark.parametrize("pipeline", PIPELINES, ids=repr)
def test_empty_mask_raises(pipeline):
    logits, _ = random_case(11, 100, 1.0)
    with pytest.raises(NoLegalContinuation):
        pipeline.sample(logits, bitmask.from_ids([], 100))
    with pytest.raises(NoLegalContinuation):
        pipeline.apply(logits, bitmask.from_ids([], 100))


def test_all_minus_inf_or_nan_raises():
    with pytest.raises(NoLegalContinuation):
        Pipeline().sample(np.full(10, -np.inf, dtype=np.float32))
    with pytest.raises(NoLegalContinuation):
        Pipeline().sample(np.full(10, np.nan, dtype=np.float32))


def test_nan_logits_are_never_chosen():
    logits = np.array([np.nan, 1.0, np.nan, 0.5], dtype=np.float32)
    for seed in range(50):
        step = Pipeline().sample(logits, bitmask.from_ids([0, 1, 3], 4),
                                 rng=np.random.default_rng(seed))
        assert step.token in (1, 3) and math.isfinite(step.kl)


def test_padded_logits_are_disallowed_under_a_mask():
    logits = np.zeros(70, dtype=np.float32)
    logits[64:] = 100.0  # a padded head: ids past the vocabulary (size 60)
    mask = bitmask.from_ids([3, 59], 60)
    for seed in range(20):
        assert Pipeline().sample(logits, mask, rng=np.random.default_rng(seed)).token in (3, 59)
    assert Pipeline().apply(logits, mask)[60:].max() == -np.inf


def test_greedy_ties_go_to_lowest_id():
    logits = np.array([0.0, 2.0, 1.0, 2.0, 2.0], dtype=np.float32)
    assert Pipeline(temperature=0).sample(logits).token == 1
    assert Pipeline().argmax(logits).token == 1
    assert Pipeline().argmax(logits, bitmask.from_ids([0, 3, 4], 5)).token == 3


def test_temperature_zero_is_argmax_of_masked_logits():
    logits, allowed = random_case(12, 2000, 0.1)
    step = Pipeline(temperature=0).sample(logits, bitmask.from_bool(allowed))
    assert step.token == int(np.flatnonzero(allowed)[np.argmax(logits[allowed])])


def test_penalties_change_the_argmax():
    logits = np.array([3.0, 2.9, 0.0], dtype=np.float32)
    assert Pipeline(temperature=0, repetition_penalty=1.5).sample(logits, history=[0]).token == 1
    assert Pipeline(temperature=0, presence_penalty=1.0).sample(logits, history=[0]).token == 1
    assert Pipeline(temperature=0, frequency_penalty=0.05).sample(logits, history=[0]).token == 0
    assert Pipeline(temperature=0, frequency_penalty=0.05).sample(
        logits, history=[0, 0, 0]).token == 1


def test_seeded_sampling_is_reproducible():
    logits, allowed = random_case(13, 5000, 0.5)
    mask = bitmask.from_bool(allowed)
    pipeline = Pipeline(temperature=1.2)
    a = [pipeline.sample(logits, mask, rng=np.random.default_rng(s)).token for s in range(20)]
    b = [pipeline.sample(logits, mask, rng=np.random.default_rng(s)).token for s in range(20)]
    assert a == b and len(set(a)) > 5


@pytest.mark.parametrize("kwargs", [{"temperature": -1}, {"top_k": -2}, {"top_p": 0},
                                    {"top_p": 1.5}, {"min_p": 2}, {"repetition_penalty": 0}])
def test_invalid_settings_are_typed_errors(kwargs):
    with pytest.raises(TetherError):
        Pipeline(**kwargs)


# -- backends and batches ------------------------------------------------------------------------
def test_torch_backend_equals_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(30)
    for pipeline in PIPELINES:
        for density in (1.0, 0.3, 0.01):
            logits, allowed = random_case(int(rng.integers(1000)), 3000, density)
            history = [1, 2, 2, 7, int(np.argmax(logits))]
            mask = bitmask.from_bool(allowed)
            want = pipeline.apply(logits, mask, history)
            got = pipeline.apply(torch.from_numpy(logits), torch.from_numpy(mask.view(np.int32)),
                                 history)
            assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
            np.testing.assert_array_equal(np.isfinite(got.numpy()), np.isfinite(want))
            np.testing.assert_allclose(got.numpy()[np.isfinite(want)], want[np.isfinite(want)],
                                       rtol=1e-6)
            greedy_np = pipeline.argmax(logits, mask, history)
            greedy_t = pipeline.argmax(torch.from_numpy(logits), mask, history)
            assert greedy_np.token == greedy_t.token and greedy_t.feasible == greedy_np.feasible
            assert greedy_t.logprob == pytest.approx(greedy_np.logprob, abs=1e-4)
            assert greedy_t.log_z == pytest.approx(greedy_np.log_z, abs=1e-4)
            step = pipeline.sample(torch.from_numpy(logits), mask, history,
                                   rng=np.random.default_rng(3))
            assert allowed[step.token] and np.isfinite(want[step.token])


def test_batches_equal_rows_numpy_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(31)
    logits = rng.normal(0, 3, (5, 2000)).astype(np.float32)
    allowed = rng.random((5, 2000)) < 0.4
    allowed[:, 0] = True
    masks = bitmask.from_bool(allowed)
    histories = [[int(t) for t in rng.integers(0, 2000, 6)] for _ in range(5)]
    pipeline = Pipeline(temperature=0.7, top_k=100, top_p=0.9, repetition_penalty=1.3)
    rows = np.stack([pipeline.apply(logits[r], masks[r], histories[r]) for r in range(5)])
    np.testing.assert_array_equal(pipeline.apply(logits, masks, histories), rows)
    got = pipeline.apply(torch.from_numpy(logits), torch.from_numpy(masks.view(np.int32)),
                         torch.tensor(histories))
    np.testing.assert_array_equal(np.isfinite(got.numpy()), np.isfinite(rows))
    np.testing.assert_allclose(got.numpy()[np.isfinite(rows)], rows[np.isfinite(rows)],
                               rtol=1e-6)
    shared = pipeline.apply(logits, masks[0])  # one mask (and history) for every row
    np.testing.assert_array_equal(shared[2], pipeline.apply(logits[2], masks[0]))
    steps = pipeline.sample(logits, masks, histories, rng=np.random.default_rng(0))
    assert len(steps) == 5 and all(allowed[r, s.token] for r, s in enumerate(steps))
    torch_steps = pipeline.sample(torch.from_numpy(logits), masks, histories)
    assert all(allowed[r, s.token] for r, s in enumerate(torch_steps))
    with pytest.raises(TetherError):
        pipeline.apply(logits, masks[:3])
    with pytest.raises(NoLegalContinuation):
        pipeline.sample(torch.from_numpy(logits), bitmask.from_bool(allowed & False))



@pytest.mark.parametrize("size", [1, 31, 257, 40_000])
def test_row_summary_and_window_match_numpy(size):
    """The vectorised passes over a row (maxima, masses, the window's tokens) against
    numpy, with NaN (either sign) and -inf logits and a row that is not a whole number
    of blocks."""
    rng = np.random.default_rng(size)
    x = rng.normal(0, 3, size).astype(np.float32)
    allowed = rng.random(size) < 0.3
    allowed[-1] = True
    if size > 30:
        x[rng.choice(size, 6, replace=False)] = [np.nan, -np.nan, -np.inf, -np.inf, np.nan, 9]
    ctx = engine.context(x, bitmask.from_bool(allowed))
    clean = np.where(np.isnan(x), -np.inf, x)
    assert ctx.peak == clean.max() and ctx.legal_peak == clean[allowed].max()
    assert ctx.has_nan == bool(np.isnan(x).any()) and ctx.feasible == allowed.sum()
    legal = np.log(np.exp(clean[allowed].astype(np.float64) - clean.max()).sum())
    total = np.log(np.exp(clean.astype(np.float64) - clean.max()).sum())
    assert ctx.log_z() == pytest.approx(min(legal - total, 0.0), abs=1e-6)
    for window in (0.0, 2.5, 100.0):
        row = Row.build(ctx, masked=True, window=window)
        cut = np.float32(ctx.legal_peak - window)
        np.testing.assert_array_equal(row.ids, np.flatnonzero(allowed & (x >= cut)))

# -- large vocabularies: the window near the top gives the full row's answer ---------------------
LARGE = [Pipeline(temperature=0.7, min_p=0.05), Pipeline(temperature=0.8, top_p=0.95),
         Pipeline(top_k=40), Pipeline(temperature=0), Pipeline(temperature=1.3, top_p=0.5),
         Pipeline(temperature=0.9, top_k=200, repetition_penalty=1.5, presence_penalty=0.4,
                  min_p=0.02)]


@pytest.mark.parametrize("pipeline", LARGE, ids=repr)
def test_window_equals_full_row(pipeline, monkeypatch):
    rng = np.random.default_rng(32)
    size = 40000
    for case in range(6):
        logits = rng.normal(0, 3, size).astype(np.float32)
        logits[rng.choice(size, 20)] += rng.exponential(5, 20).astype(np.float32)
        if case >= 4:
            logits[rng.choice(size, 30)] = [np.nan, -np.inf][case % 2]  # NaN and -inf logits
        allowed = rng.random(size) < [1.0, 0.7, 0.2][case % 3]
        allowed[rng.integers(size)] = True
        mask = bitmask.from_bool(allowed) if case % 2 else None
        history = [int(t) for t in rng.integers(0, size, 10)] + [int(np.argmax(logits))]
        fast = (pipeline.apply(logits, mask, history), pipeline.argmax(logits, mask, history))
        monkeypatch.setattr(engine, "WINDOWS", ())
        full = (pipeline.apply(logits, mask, history), pipeline.argmax(logits, mask, history))
        monkeypatch.undo()
        np.testing.assert_array_equal(fast[0], full[0])
        assert fast[1].token == full[1].token and fast[1].feasible == full[1].feasible
        assert fast[1].logprob == pytest.approx(full[1].logprob, abs=1e-5)
        assert fast[1].log_z == pytest.approx(full[1].log_z, abs=1e-5)


def test_window_draws_follow_the_full_distribution():
    """Without truncation a draw may land outside the window: frequencies must still be
    those of the whole row."""
    rng = np.random.default_rng(33)
    size = 30000
    logits = rng.normal(0, 1, size).astype(np.float32)
    logits[:5] = [9.0, 8.5, 8.0, 7.0, 6.0]  # a top that holds about half the mass
    allowed = np.ones(size, dtype=bool)
    allowed[1] = False
    mask = bitmask.from_bool(allowed)
    probs = softmax(np.where(allowed, logits, -np.inf))
    draws = np.array([Pipeline().sample(logits, mask, rng=rng).token for _ in range(6000)])
    assert allowed[draws].all()
    for token in (0, 2, 3, 4):
        p = probs[token]
        assert abs((draws == token).mean() - p) <= 5 * math.sqrt(p * (1 - p) / 6000)
    tail = probs[5:].sum()
    assert abs((draws >= 5).mean() - tail) <= 5 * math.sqrt(tail * (1 - tail) / 6000)


def test_sparse_mask_window_equals_full_row(monkeypatch):
    """With a mask allowing few tokens the outside is visited token by token: the same
    results as the full row, and draws landing outside follow the full distribution."""
    rng = np.random.default_rng(34)
    size = 40000
    logits = rng.normal(0, 3, size).astype(np.float32)
    logits[rng.choice(size, 30)] = np.nan
    allowed = rng.random(size) < 0.03
    mask = bitmask.from_bool(allowed)
    for pipeline in (Pipeline(temperature=0.8, top_p=0.95), Pipeline(temperature=1.3, top_p=0.5),
                     Pipeline(temperature=0.7, min_p=0.05)):
        fast = pipeline.apply(logits, mask)
        monkeypatch.setattr(engine, "WINDOWS", ())
        full = pipeline.apply(logits, mask)
        monkeypatch.undo()
        np.testing.assert_array_equal(fast, full)
    tail = np.full(size, -8.5, dtype=np.float32)  # ~1,200 allowed tokens below the window…
    tail[np.flatnonzero(allowed)[:2]] = 0.0  # …and 2 at the top: the tail holds ~11 %
    low = softmax(np.where(allowed, tail, -np.inf))[tail < 0].sum()
    draws = np.array([Pipeline().sample(tail, mask, rng=rng).token for _ in range(4000)])
    assert allowed[draws].all()
    assert abs((tail[draws] < 0).mean() - low) <= 5 * math.sqrt(low * (1 - low) / 4000)

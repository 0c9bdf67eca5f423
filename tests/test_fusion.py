"""Domain fusion (SPEC §7): `fuse` against the formula computed naively, the relaxation
cascade, domain selection by intensity and phase, FusionConfig's JSON, the phase
detector, the word domains (lexicon scorer, forbidden words) on the real SmolLM2
vocabulary and on a small exact one, the regex preference, and the DomainSet driver's
budget handling."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tether
from tether.engine import bitmask
from tether.fusion import (
    Delimiters,
    Domain,
    DomainSet,
    FusionConfig,
    FusionConfigError,
    FusionInfeasible,
    IntensityLevel,
    LexiconScorer,
    Phase,
    PhaseDetector,
    RegexPreference,
    SoftScore,
    forbid_words,
    fuse,
    parse_constraint_spec,
    select_domains,
)

SYN, TYP, IMP, CF, SEM = (Domain.SYNTAX, Domain.TYPES, Domain.IMPORTS, Domain.CONTROL_FLOW,
                    Domain.SEMANTICS)
BIG_VOCAB = 129_280  # DeepSeek V4
VOCAB_SIZES = st.one_of(st.just(BIG_VOCAB), st.integers(1, BIG_VOCAB))

# SPEC §7, written out independently of the library's tables.
SPEC_LEVELS = {
    "none": (set(), 0),
    "syntax_only": ({SYN}, 50),
    "standard": ({SYN, TYP}, 200),
    "full_hard": ({SYN, TYP, IMP}, 500),
    "full": ({SYN, TYP, IMP, CF, SEM}, 2_000),
    "exhaustive": ({SYN, TYP, IMP, CF, SEM}, 5_000),
}
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the naive formula -----------------------------------------------------------------
def expected_domains(level: str, phase: Phase, adaptive: bool = True) -> set[Domain]:
    domains, _ = SPEC_LEVELS[level]
    if domains and adaptive and phase is Phase.REASONING:
        return {SYN}
    return set(domains)


def naive_fuse(hard: dict, soft: dict, config: FusionConfig, vocab_size: int):
    """Bool arrays, one domain at a time: (feasible bool array, dense adjustments, dropped).
    Raises FusionInfeasible where fuse must."""
    live = [d for d in (SYN, TYP, IMP) if d in hard]
    dropped = []
    while True:
        feasible = np.ones(vocab_size, dtype=bool)
        for d in live:
            feasible &= hard[d]
        if feasible.any():
            break
        if not config.allow_relaxation or live == [SYN]:
            raise FusionInfeasible({}, dropped, [], Phase.STRUCTURED_OUTPUT)
        victim = IMP if IMP in live else TYP
        live.remove(victim)
        dropped.append(victim)
    adj = np.zeros(vocab_size)
    for d, (dense, weight) in soft.items():
        cw = config.control_flow_weight if d is CF else config.semantics_weight
        adj += cw * weight * dense / config.soft_temperature
    return feasible, np.where(feasible, adj, 0.0), dropped


def clamped(values: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(values.astype(np.float64), nan=0.0), -1.0, 1.0)


@st.composite
def fusion_cases(draw):
    """Random masks and scores: (hard bools, soft SoftScores, their dense oracle, V, rng)."""
    vocab_size = draw(VOCAB_SIZES)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    hard = {}
    for d in (SYN, TYP, IMP):
        if d is SYN or draw(st.booleans()):
            density = draw(st.sampled_from([0.0, 1e-4, 0.01, 0.3, 0.9, 1.0]))
            hard[d] = rng.random(vocab_size) < density
    soft, oracle = {}, {}
    for d in (CF, SEM):
        kind = draw(st.sampled_from(["none", "dense", "sparse", "masked"]))
        weight = draw(st.floats(-3, 3, allow_nan=False))
        if kind == "dense":
            length = draw(st.sampled_from([vocab_size, max(1, vocab_size // 2)]))
            values = rng.normal(0, 1.5, length).astype(draw(st.sampled_from(
                [np.float32, np.float64])))
            values[rng.random(length) < 0.01] = np.nan
            values[rng.random(length) < 0.01] = np.inf
            soft[d] = SoftScore(values, weight)
            dense = np.zeros(vocab_size)
            dense[:length] = clamped(values)
        elif kind == "sparse":
            ids = rng.choice(vocab_size + 40, min(300, vocab_size), replace=False)
            values = rng.uniform(-2, 2, ids.size)
            soft[d] = SoftScore(dict(zip(ids.tolist(), values.tolist(), strict=True)), weight)
            dense = np.zeros(vocab_size + 40)
            dense[ids] = clamped(values)
            dense = dense[:vocab_size]
        elif kind == "masked":
            allowed = rng.random(vocab_size) < 0.5
            value = draw(st.floats(-2, 2, allow_nan=False))
            soft[d] = SoftScore.from_mask(bitmask.from_bool(allowed), value, weight)
            dense = np.where(allowed, min(1.0, max(-1.0, value)), 0.0)
        else:
            continue
        oracle[d] = (dense, weight)
    return hard, soft, oracle, vocab_size, rng


configs = st.builds(
    FusionConfig,
    intensity=st.sampled_from(list(IntensityLevel)),
    control_flow_weight=st.floats(-2, 2, allow_nan=False),
    semantics_weight=st.floats(-2, 2, allow_nan=False),
    soft_temperature=st.floats(0.05, 5),
    allow_relaxation=st.booleans(),
)


def words_of(hard: dict) -> dict:
    return {d: bitmask.from_bool(m) for d, m in hard.items()}


# -- fuse equals the formula --------------------------------------------------------------
@FAST
@given(case=fusion_cases(), config=configs)
def test_fuse_equals_the_naive_formula(case, config: FusionConfig) -> None:
    hard, soft, oracle, vocab_size, rng = case
    active = expected_domains(config.intensity.value, Phase.STRUCTURED_OUTPUT)
    hard_on = {d: m for d, m in hard.items() if d in active}
    soft_on = {d: s for d, s in oracle.items() if d in active}
    logits = rng.normal(0, 3, vocab_size).astype(np.float32)
    if not active:
        result = fuse(words_of(hard), soft, config)
        assert result.unconstrained and result.feasible is None
        np.testing.assert_array_equal(result.apply(logits), logits)
        return
    try:
        feasible, adj, dropped = naive_fuse(hard_on, soft_on, config, vocab_size)
    except FusionInfeasible:
        with pytest.raises(FusionInfeasible):
            fuse(words_of(hard), soft, config)
        return
    result = fuse(words_of(hard), soft, config)
    ids = result.feasible_ids()
    np.testing.assert_array_equal(ids, np.flatnonzero(feasible))
    np.testing.assert_array_equal(result.feasible, bitmask.from_bool(feasible))
    np.testing.assert_allclose(result.logit_adjustments, adj[ids], rtol=1e-5, atol=1e-5)
    assert result.dropped == dropped and result.required_relaxation == bool(dropped)
    assert result.active_domains == set(hard_on) | set(soft_on)
    final = result.apply(logits)
    assert not np.isnan(final).any()
    np.testing.assert_array_equal(np.isfinite(final), feasible)
    np.testing.assert_allclose(final[ids], logits[ids] + adj[ids], rtol=1e-5, atol=1e-4)


@FAST
@given(case=fusion_cases(), config=configs.filter(lambda c: c.intensity.domains))
def test_masking_in_sequence_equals_one_pass(case, config: FusionConfig) -> None:
    hard, soft, oracle, vocab_size, rng = case
    logits = rng.normal(0, 3, vocab_size)
    try:
        result = fuse(words_of(hard), soft, config)
    except FusionInfeasible:
        event("infeasible")
        return
    event(f"dropped {[d.value for d in result.dropped]}")
    sequential = logits.copy()
    for d in (SYN, TYP, IMP):  # one hard mask after another...
        if d in hard and d in result.active_domains and d not in result.dropped:
            sequential[~hard[d]] = -np.inf
    for d, (dense, weight) in oracle.items():  # ...then one soft score after another
        if d in result.active_domains:
            factor = (config.control_flow_weight if d is CF else config.semantics_weight)
            live = np.isfinite(sequential)
            sequential[live] += factor * weight / config.soft_temperature * dense[live]
    one_pass = result.apply(logits)
    np.testing.assert_array_equal(np.isfinite(one_pass), np.isfinite(sequential))
    np.testing.assert_allclose(_softmax(one_pass), _softmax(sequential), atol=1e-6)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x[np.isfinite(x)].max())
    return e / e.sum()


@FAST
@given(case=fusion_cases(), scale=st.sampled_from([1.0, 1e6, np.inf]))
def test_soft_scores_never_empty_the_feasible_set(case, scale: float) -> None:
    hard, _, _, vocab_size, rng = case
    hard[SYN][rng.integers(vocab_size)] = True  # the hard domains leave something
    config = FusionConfig(intensity="full", soft_temperature=1e-3)
    plain = fuse(words_of(hard), {}, config)
    hostile = {CF: SoftScore(np.full(vocab_size, -scale)),
               SEM: SoftScore({int(i): -scale for i in plain.feasible_ids()[:50]}, 10.0)}
    scored = fuse(words_of(hard), hostile, config)
    np.testing.assert_array_equal(scored.feasible_ids(), plain.feasible_ids())
    assert np.isfinite(scored.logit_adjustments).all()
    final = scored.apply(rng.normal(size=vocab_size))
    assert np.isfinite(final).sum() == scored.feasible_ids().size



@pytest.mark.parametrize("density", [0.001, 0.2, 0.9])
def test_apply_by_ids_and_dense_agree(density: float, monkeypatch) -> None:
    """apply works on the feasible ids when few are feasible and on dense vectors when
    many are: both give the same array, bit for bit, with every kind of score."""
    from tether.fusion import result as result_module

    rng = np.random.default_rng(4)
    size = 5_000
    allowed = rng.random(size) < density
    allowed[[0, size - 1]] = True
    dense = rng.normal(0, 0.7, size + 7).astype(np.float32)
    dense[:4] = [np.nan, np.inf, -np.inf, 3.0]
    soft = {CF: SoftScore(dense, 0.5),
            SEM: SoftScore.sparse(rng.choice(size, 300, replace=False), rng.uniform(-1, 1, 300))}
    masked = SoftScore.from_mask(bitmask.from_bool(rng.random(size) < 0.5), 0.25, 2.0)
    config = FusionConfig(intensity="full", soft_temperature=0.7)
    for scores in (soft, {SEM: masked}, {}):
        for logits in (rng.normal(0, 3, size).astype(np.float32), rng.normal(0, 3, size + 40)):
            got = {}
            for sparse in (10**9, 1):  # every step dense / every step by ids
                monkeypatch.setattr(result_module, "_SPARSE", sparse)
                result = fuse({SYN: bitmask.from_bool(allowed)}, scores, config)
                got[sparse] = (result.apply(logits), result.apply(logits, masked=False))
            for a, b in zip(got[10**9], got[1], strict=True):
                np.testing.assert_array_equal(a, b)
            kept = got[1][1]
            np.testing.assert_array_equal(kept[:size][~allowed], logits[:size][~allowed])
            np.testing.assert_array_equal(kept[size:], logits[size:])
            assert np.isneginf(got[1][0][size:]).all()
    with pytest.raises(tether.TetherError):
        fuse({SYN: bitmask.from_bool(allowed)}, soft, config).apply(np.zeros(size - 1))

# -- the relaxation cascade ------------------------------------------------------------------
@FAST
@given(vocab_size=st.integers(3, BIG_VOCAB), seed=st.integers(0, 2**32 - 1),
       empty_at=st.sampled_from(["imports", "types", "syntax"]))
def test_cascade_drops_imports_then_types_then_raises(vocab_size: int, seed: int,
                                                       empty_at: str) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = rng.choice(vocab_size, 3, replace=False)
    syntax = np.zeros(vocab_size, dtype=bool)
    types, imports = syntax.copy(), syntax.copy()
    if empty_at == "imports":  # Syntax ∩ Types = {a}, Imports elsewhere
        syntax[[a, b]] = types[[a, c]] = imports[[b, c]] = True
    elif empty_at == "types":  # Syntax = {a}, Types and Imports elsewhere
        syntax[a] = types[[b, c]] = imports[[a, b]] = True
    else:  # Syntax allows nothing
        types[[a, b]] = imports[a] = True
    masks = words_of({SYN: syntax, TYP: types, IMP: imports})
    config = FusionConfig(intensity="full_hard")
    if empty_at == "syntax":
        with pytest.raises(FusionInfeasible) as err:
            fuse(masks, {}, config)
        assert err.value.dropped == [IMP, TYP]
        assert err.value.allowed == {SYN: 0, TYP: 2, IMP: 1}
        assert isinstance(err.value, tether.NoLegalContinuation)
    else:
        result = fuse(masks, {}, config)
        assert result.dropped == ([IMP] if empty_at == "imports" else [IMP, TYP])
        assert result.required_relaxation
        assert result.feasible_ids().tolist() == [a]
        assert result.rejected_by(a) == ([IMP] if empty_at == "imports" else [TYP])
    with pytest.raises(FusionInfeasible) as err:  # no relaxation: the first empty set
        fuse(masks, {}, FusionConfig(intensity="full_hard", allow_relaxation=False))
    assert err.value.dropped == []


@pytest.mark.parametrize("density", [0.001, 0.5, 1.0])  # binary search, and ranks
def test_sparse_scores_land_on_their_tokens(density: float) -> None:
    rng = np.random.default_rng(3)
    allowed = rng.random(BIG_VOCAB) < density
    allowed[[5, 6]] = True
    scored_ids = np.unique(np.concatenate([[5, 6], rng.choice(BIG_VOCAB, 5_000)]))
    values = rng.uniform(-1, 1, scored_ids.size)
    result = fuse({SYN: bitmask.from_bool(allowed)},
                  {SEM: SoftScore.sparse(scored_ids, values)}, FusionConfig(intensity="full"))
    expected = np.zeros(BIG_VOCAB)
    expected[scored_ids] = values
    ids = result.feasible_ids()
    np.testing.assert_allclose(result.logit_adjustments, expected[ids], rtol=1e-6)


def test_cascade_skips_absent_domains_and_reports_rejections() -> None:
    vocab_size = 100
    syntax = bitmask.from_ids([1, 2, 3], vocab_size)
    types = bitmask.from_ids([4], vocab_size)
    result = fuse({SYN: syntax, TYP: types, IMP: None}, {}, FusionConfig())
    assert result.dropped == [TYP] and result.feasible_ids().tolist() == [1, 2, 3]
    assert result.rejected_by(4) == [SYN] and result.rejected_by(2) == [TYP]
    assert result.rejected_by(50) == [SYN, TYP]
    with pytest.raises(tether.TokenIdError):
        result.rejected_by(vocab_size + 64)


# -- domain selection ------------------------------------------------------------------------
@pytest.mark.parametrize("level", list(SPEC_LEVELS))
@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("adaptive", [True, False])
def test_intensity_and_phase_select_the_domains_of_the_spec(level: str, phase: Phase,
                                                            adaptive: bool) -> None:
    intensity = IntensityLevel(level)
    expected = expected_domains(level, phase, adaptive)
    assert intensity.domains == SPEC_LEVELS[level][0]
    assert intensity.budget_us == SPEC_LEVELS[level][1]
    assert select_domains(intensity, phase, adaptive) == expected
    config = FusionConfig(intensity=intensity, adaptive_switching=adaptive)
    assert config.domains_for(phase) == expected
    # with every domain supplied, fuse consults exactly those
    vocab_size = 64
    everything = bitmask.from_bool(np.ones(vocab_size, dtype=bool))
    hard = {d: everything for d in (SYN, TYP, IMP)}
    soft = {CF: SoftScore({1: 0.5}), SEM: SoftScore({2: -0.5})}
    result = fuse(hard, soft, config, phase, reasoning_syntax=everything)
    assert result.active_domains == expected
    assert result.unconstrained == (not expected)


def test_hard_and_soft_domains() -> None:
    assert [d for d in Domain if d.is_hard] == [SYN, TYP, IMP]
    assert IntensityLevel.FULL.domains == IntensityLevel.EXHAUSTIVE.domains


def test_reasoning_phase_is_free_text_and_transition_acts_as_structured() -> None:
    vocab_size = 200
    syntax = bitmask.from_ids([7], vocab_size)  # a structured language that would block prose
    config = FusionConfig(intensity="full")
    hard = {SYN: syntax, TYP: syntax}
    soft = {SEM: SoftScore({7: 1.0, 9: 1.0})}
    reasoning = fuse(hard, soft, config, Phase.REASONING)
    assert reasoning.unconstrained and reasoning.active_domains == {SYN}
    logits = np.arange(vocab_size, dtype=np.float32)
    np.testing.assert_array_equal(reasoning.apply(logits), logits)
    with pytest.raises(tether.TetherError):
        reasoning.feasible_ids()
    own = fuse(hard, soft, config, Phase.REASONING,
               reasoning_syntax=bitmask.from_ids([3, 9], vocab_size))
    assert own.feasible_ids().tolist() == [3, 9] and own.active_domains == {SYN}
    assert own.logit_adjustments.tolist() == [0.0, 0.0]  # soft domains are off
    transition = fuse(hard, soft, config, Phase.TRANSITION)
    assert transition.feasible_ids().tolist() == [7]
    assert transition.logit_adjustments.tolist() == [1.0]
    off = fuse(hard, soft, FusionConfig(intensity="full", adaptive_switching=False),
               Phase.REASONING)
    assert off.feasible_ids().tolist() == [7]


# -- identity and degenerate cases --------------------------------------------------------
@FAST
@given(vocab_size=st.integers(1, BIG_VOCAB), seed=st.integers(0, 2**32 - 1))
def test_identity_and_degenerate_cases(vocab_size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 5, vocab_size).astype(np.float32)
    config = FusionConfig(intensity="full")
    everything = bitmask.from_bool(np.ones(vocab_size, dtype=bool))
    same = fuse({SYN: everything, TYP: everything, IMP: everything}, {}, config)
    np.testing.assert_array_equal(same.apply(logits), logits)
    assert not same.logit_adjustments.any()
    token = int(rng.integers(vocab_size))
    one = fuse({SYN: bitmask.from_ids([token], vocab_size), TYP: everything}, {}, config)
    assert one.feasible_ids().tolist() == [token]
    final = one.apply(logits)
    assert np.flatnonzero(np.isfinite(final)).tolist() == [token]
    assert final[token] == logits[token]
    empty = np.zeros_like(everything)
    with pytest.raises(tether.NoLegalContinuation):
        fuse({SYN: empty, TYP: everything}, {CF: SoftScore(logits)}, config)


def test_bad_inputs_are_typed_errors() -> None:
    words = bitmask.from_ids([1], 64)
    config = FusionConfig()
    with pytest.raises(tether.TetherError, match="Syntax mask"):
        fuse({TYP: words}, {}, config)
    with pytest.raises(tether.TetherError, match="not a hard domain"):
        fuse({SYN: words, CF: words}, {}, config)
    with pytest.raises(tether.TetherError, match="not a soft domain"):
        fuse({SYN: words}, {TYP: SoftScore({1: 1.0})}, FusionConfig(intensity="full"))
    with pytest.raises(tether.TetherError, match="uint32"):
        fuse({SYN: words.astype(np.int64)}, {}, config)
    with pytest.raises(tether.TetherError, match="words"):
        fuse({SYN: words, TYP: bitmask.from_ids([1], 96)}, {}, config)
    with pytest.raises(tether.TetherError):
        SoftScore({-1: 0.5})
    with pytest.raises(tether.TetherError):
        SoftScore(np.zeros((2, 2)))
    with pytest.raises(tether.TetherError):
        SoftScore({1: 0.5}, weight=float("nan"))


# -- FusionConfig and its JSON ---------------------------------------------------------------
domain_lists = st.lists(st.sampled_from([TYP, IMP, CF, SEM]), unique=True)
full_configs = st.builds(
    FusionConfig,
    intensity=st.sampled_from(list(IntensityLevel)),
    control_flow_weight=st.floats(-1e6, 1e6, allow_nan=False),
    semantics_weight=st.floats(-1e6, 1e6, allow_nan=False),
    adaptive_switching=st.booleans(),
    soft_temperature=st.floats(1e-6, 1e6),
    allow_relaxation=st.booleans(),
    on_budget=st.sampled_from(["report", "relax"]),
    enabled_domains=st.none() | domain_lists.map(lambda ds: [SYN, *ds]),
    disabled_domains=domain_lists,
    delimiters=st.builds(Delimiters, fence_open=st.sampled_from([None, "~~~\n", "```\n"]),
                         reasoning_prefix=st.sampled_from([None, "Reasoning:", r"\s*<think>"])),
)


@settings(max_examples=100, deadline=None)
@given(config=full_configs)
def test_config_round_trips_through_json(config: FusionConfig) -> None:
    text = config.to_json()
    assert FusionConfig.from_json(text) == config
    assert json.loads(text)["intensity"] == config.intensity.value


@pytest.mark.parametrize("data, pointer", [
    ({"intensty": "full"}, "/intensty"),
    ({"delimiters": {"fence": "x"}}, "/delimiters/fence"),
])
def test_unknown_keys_are_named(data: dict, pointer: str) -> None:
    with pytest.raises(FusionConfigError) as err:
        FusionConfig.from_json(json.dumps(data))
    assert err.value.location == pointer
    assert pointer.rsplit("/", 1)[1] in str(err.value)
    assert isinstance(err.value, tether.CompileError)


@pytest.mark.parametrize("data, field", [
    ({"soft_temperature": 0}, "soft_temperature"),
    ({"soft_temperature": -1.5}, "soft_temperature"),
    ({"intensity": "maximal"}, "intensity"),
    ({"on_budget": "panic"}, "on_budget"),
    ({"control_flow_weight": "high"}, "control_flow_weight"),
    ({"adaptive_switching": 1}, "adaptive_switching"),
    ({"disabled_domains": ["syntax"]}, "disabled_domains"),
    ({"enabled_domains": ["types"]}, "enabled_domains"),
    ({"enabled_domains": ["syntax", "typos"]}, "1"),
    ({"delimiters": {"fence_open": "(unclosed"}}, "fence_open"),
])
def test_bad_values_name_their_field(data: dict, field: str) -> None:
    with pytest.raises(FusionConfigError) as err:
        FusionConfig.from_dict(data)
    assert err.value.field == field


def test_config_accepts_names_and_narrows_domains() -> None:
    config = FusionConfig(intensity="FULL", enabled_domains=["syntax", "imports", "semantics"],
                          disabled_domains=["controlflow", "semantics"])
    assert config.intensity is IntensityLevel.FULL
    assert config.domains_for(Phase.STRUCTURED_OUTPUT) == {SYN, IMP}
    with pytest.raises(FusionConfigError):
        FusionConfig.from_json("[1, 2]")
    with pytest.raises(FusionConfigError):
        FusionConfig.from_json("{nope")


def test_constraint_spec_maps_what_tether_can_use() -> None:
    spec = parse_constraint_spec(json.dumps({
        "regex": r"\d+", "intensity": "full_hard", "enabled_domains": ["syntax", "types"],
        "disabled_domains": None, "allow_relaxation": False, "json_schema": None,
        "soft_temperature": 2.0}))
    assert spec.syntax == tether.Regex(r"\d+")
    assert spec.config.intensity is IntensityLevel.FULL_HARD
    assert spec.config.domains_for(Phase.STRUCTURED_OUTPUT) == {SYN, TYP}
    assert not spec.config.allow_relaxation and spec.config.soft_temperature == 2.0
    assert parse_constraint_spec({}).syntax is None
    for key in ("json_schema", "ebnf", "type_bindings", "function_signatures",
                "expected_type"):
        with pytest.raises(FusionConfigError, match="not support yet") as err:
            parse_constraint_spec({key: "x"})
        assert err.value.location == f"/{key}"
    with pytest.raises(FusionConfigError, match="unknown key") as err:
        parse_constraint_spec({"max_tokens": 5})
    assert err.value.field == "max_tokens"
    with pytest.raises(FusionConfigError) as err:
        parse_constraint_spec({"regex": "a(b"})
    assert err.value.location == "/regex"


# -- phase detection ---------------------------------------------------------------------------
def feed_all(detector: PhaseDetector, pieces: list[str]) -> list[str]:
    return [detector.feed(p).value for p in pieces]


def test_prose_then_a_json_fence() -> None:
    detector = PhaseDetector()
    assert detector.phase is Phase.REASONING
    pieces = ["Let me think. I'll use `x` and ", "``", "`js", "on", "\n", '{"a', '": 1}']
    assert feed_all(detector, pieces) == ["reasoning"] * 4 + ["transition"] + \
        ["structured_output"] * 2
    assert detector.text[detector.structured_start:] == b'{"a": 1}'


def test_think_tags_then_json() -> None:
    detector = PhaseDetector()
    pieces = ["<think>", "plan: a fence ```json\n inside thinking", "</th", "ink>", "\n{", "}"]
    assert feed_all(detector, pieces) == ["reasoning"] * 3 + ["transition"] + \
        ["structured_output"] * 2
    assert detector.text[detector.structured_start:] == b"\n{}"


def test_phase_detector_prefix_switching_rollback_and_fork() -> None:
    prefixed = FusionConfig(delimiters=Delimiters(reasoning_prefix=r"\s*<think>"))
    detector = PhaseDetector(prefixed)
    assert detector.phase is Phase.TRANSITION  # unsure: acts as structured output
    assert feed_all(detector, ["\n<thi", "nk>", "a ```json\n", "</think>"]) == \
        ["transition", "reasoning", "reasoning", "transition"]
    twin = detector.fork()
    detector.rollback(2)
    assert detector.phase is Phase.REASONING and detector.text == b"\n<think>"
    assert twin.phase is Phase.TRANSITION and twin.feed("[") is Phase.STRUCTURED_OUTPUT
    direct = PhaseDetector(prefixed)
    assert direct.feed("{") is Phase.STRUCTURED_OUTPUT and direct.structured_start == 0
    off = PhaseDetector(FusionConfig(adaptive_switching=False))
    assert feed_all(off, ["<think>", "hm"]) == ["structured_output"] * 2
    custom = PhaseDetector(FusionConfig(delimiters=Delimiters(fence_open="ANSWER:")))
    assert feed_all(custom, ["```json\n", "ANSWER:", "42"]) == \
        ["reasoning", "transition", "structured_output"]


# -- a small vocabulary whose tokens cross word boundaries every way -------------------------
SMALL_TOKENS = [b"<eos>", b"ser", b"ial", b"ize", b"ize(", b" serialize(", b" ser", b"x",
                b" ", b"(", b"serialized", b"a serial", b"ev", b"al", b"al(", b" eval",
                b"(eval)", b"evalu", b"ate", b"\xc3", b"\xa9"]


@pytest.fixture(scope="module")
def small_vocab() -> tether.Vocabulary:
    return tether.Vocabulary(SMALL_TOKENS, eos_ids=[0], name="small")


def ids_of(vocab: tether.Vocabulary, *pieces: bytes) -> list[int]:
    return [vocab.tokens.index(p) for p in pieces]


def scored(score: SoftScore, vocab: tether.Vocabulary) -> dict[bytes, float]:
    dense = score.to_dense(vocab.size)
    return {vocab.token_bytes(int(i)): float(dense[i]) for i in np.flatnonzero(dense)}


def test_lexicon_scores_begin_continue_and_complete(small_vocab: tether.Vocabulary) -> None:
    lexicon = LexiconScorer(small_vocab, {"serialize": 0.5, "eval": -1.0}, weight=2.0)
    at_boundary = scored(lexicon.scores(b"y = "), small_vocab)
    assert at_boundary == {
        b"ser": 0.5, b" ser": 0.5,  # they begin the word
        b"a serial": 0.5,  # an open run after a boundary inside the token
        b" serialize(": 0.5,  # the whole word, closed inside the token
        b"ev": -1.0, b" eval": -1.0, b"(eval)": -1.0,
    }  # not "ial" (no boundary before it), "serialized", "evalu" (no listed word's prefix)
    assert lexicon.scores(b"y = ").weight == 2.0
    after_ser = scored(lexicon.scores(b"y = ser"), small_vocab)
    assert after_ser.get(b"ial") == 0.5 and b"ize" not in after_ser
    after_serial = scored(lexicon.scores(b"(serial"), small_vocab)
    assert after_serial.get(b"ize") == 0.5 and after_serial.get(b"ize(") == 0.5
    assert b"ial" not in after_serial
    after_ev = scored(lexicon.scores(b"ev"), small_vocab)
    assert after_ev.get(b"al") == -1.0 and after_ev.get(b"al(") == -1.0
    elsewhere = scored(lexicon.scores(b"deserial"), small_vocab)  # not at a word boundary
    assert b"ize" not in elsewhere and b"ize(" not in elsewhere
    assert elsewhere.get(b" ser") == 0.5  # a new word still may start
    with pytest.raises(tether.TetherError):
        LexiconScorer(small_vocab, ["two words"])


def test_forbidden_words_exact_on_a_small_vocabulary(small_vocab: tether.Vocabulary) -> None:
    rng = np.random.default_rng(7)
    words = {b"eval", b"serialize"}
    for _ in range(300):
        matcher = forbid_words(small_vocab, ["eval", "serialize"])
        text = b""
        for _ in range(rng.integers(0, 6)):
            allowed = bitmask.to_ids(matcher.mask(), small_vocab.size)
            for t in range(1, small_vocab.size):
                assert (t in allowed) == _viable(text + small_vocab.token_bytes(t), words)
            assert (0 in allowed) == _complete(text, words)
            choices = [int(t) for t in allowed if t != 0]
            if not choices:
                break
            t = int(rng.choice(choices))
            matcher.consume(t)
            text += small_vocab.token_bytes(t)
        assert matcher.generated_bytes == text


def _whole_words(text: bytes) -> list[tuple[bytes, bool]]:
    import re
    return [(m.group(), m.end() < len(text)) for m in re.finditer(rb"[A-Za-z0-9_\x80-\xff]+", text)]


def _viable(text: bytes, words: set[bytes]) -> bool:
    return not any(w in words for w, closed in _whole_words(text) if closed)


def _complete(text: bytes, words: set[bytes]) -> bool:
    return not any(w in words for w, _ in _whole_words(text))


def test_forbidden_words_matcher_api(small_vocab: tether.Vocabulary) -> None:
    matcher = forbid_words(small_vocab, ["eval"])
    ev, al, paren, eos = ids_of(small_vocab, b"ev", b"al", b"(", b"<eos>")
    matcher.consume_many([ev, al])
    assert not matcher.is_accepting() and not matcher.allowed(paren)
    with pytest.raises(tether.ConstraintViolation):
        matcher.consume(eos)
    twin = matcher.fork()
    matcher.rollback(1)
    assert matcher.allowed(paren) and matcher.is_accepting()
    assert not twin.allowed(paren)
    matcher.consume(eos)
    assert matcher.is_finished() and not matcher.mask().any()


# -- the word domains on the real SmolLM2 vocabulary ---------------------------------------
def token_id(vocab: tether.Vocabulary, piece: bytes) -> int:
    return vocab.tokens.index(piece)


def test_lexicon_follows_words_across_real_token_boundaries(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    lexicon = LexiconScorer(vocab, ["deserialize"], score=0.8)
    text = b"data = "
    for piece in (b" des", b"erial", b"ize"):  # one real tokenization of " deserialize"
        dense = lexicon.scores(text).to_dense(vocab.size)
        assert dense[token_id(vocab, piece)] == pytest.approx(0.8), piece
        text += piece
    assert lexicon.scores(b"data = des").to_dense(vocab.size)[token_id(vocab, b"erial")] > 0
    wrong = lexicon.scores(b"data = ser").to_dense(vocab.size)
    assert wrong[token_id(vocab, b"ial")] == 0.0  # "serial" is no prefix of "deserialize"
    assert lexicon.scores(text).to_dense(vocab.size)[token_id(vocab, b"ize")] == 0.0


def test_forbid_words_intersected_with_a_grammar(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    syntax = tether.compile(tether.Regex(r"[a-z]+( [a-z]+)*"), vocab).matcher()
    domains = DomainSet(FusionConfig(intensity="full_hard"), vocab,
                        {SYN: syntax, IMP: forbid_words(vocab, ["eval"])})
    for piece in (b"run", b" ev", b"al"):
        report = domains.step()
        assert token_id(vocab, piece) in report.result.feasible_ids()
        domains.consume(token_id(vocab, piece))
    report = domains.step()
    space = token_id(vocab, b" ")
    assert report.result.rejected_by(space) == [IMP]  # " " would close the word "eval"
    assert token_id(vocab, b"uate") in report.result.feasible_ids()
    assert not set(vocab.eos_ids) & set(report.result.feasible_ids().tolist())


def test_regex_preference(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    preference = RegexPreference(tether.compile(tether.Regex(r"[a-z_]+"), vocab), score=0.7)
    words = bitmask.to_bool(tether.compile(tether.Regex(r"[a-z_]+"), vocab).matcher().mask(),
                            vocab.size)
    np.testing.assert_array_equal(preference.scores(b"").to_dense(vocab.size),
                                  np.where(words, 0.7, 0.0))
    syntax = bitmask.from_bool(np.ones(vocab.size, dtype=bool))
    result = fuse({SYN: syntax}, {SEM: preference.scores(b"")}, FusionConfig(intensity="full"))
    ids = result.feasible_ids()
    np.testing.assert_allclose(result.logit_adjustments, np.where(words[ids], 0.7, 0.0),
                               rtol=1e-6)
    twin = preference.fork()
    preference.consume(token_id(vocab, b"my"))
    preference.consume(token_id(vocab, b"1"))  # leaves the language: no opinion any more
    preference.consume(token_id(vocab, b"x"))
    assert preference.scores(b"my1x") is None
    preference.rollback(2)
    after_my = preference.scores(b"my").to_dense(vocab.size)
    assert after_my[token_id(vocab, b"_")] == pytest.approx(0.7)
    assert after_my[token_id(vocab, b"1")] == 0.0
    assert twin.scores(b"") is not None


# -- the DomainSet driver ----------------------------------------------------------------------
class SlowScorer:
    """A soft domain that takes ``delay_s`` per step."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.consumed = 0

    def scores(self, generated: bytes) -> SoftScore:
        time.sleep(self.delay_s)
        return SoftScore({1: 1.0})

    def consume(self, token_id: int) -> None:
        self.consumed += 1

    def rollback(self, n: int = 1) -> None:
        self.consumed -= n

    def fork(self) -> SlowScorer:
        return self


class SlowMatcher:
    """Wraps a hard domain; ``delay_s`` per mask, and a narrower exhaustive mask."""

    def __init__(self, inner, delay_s: float = 0.0, exhaustive_ids=None) -> None:
        self.inner, self.delay_s, self.exhaustive_ids = inner, delay_s, exhaustive_ids

    def mask(self) -> np.ndarray:
        time.sleep(self.delay_s)
        return self.inner.mask()

    def exhaustive_mask(self) -> np.ndarray:
        return bitmask.from_ids(self.exhaustive_ids, self.inner.vocab.size)

    def consume(self, token_id: int) -> None:
        self.inner.consume(token_id)

    def rollback(self, n: int = 1) -> None:
        self.inner.rollback(n)

    def fork(self) -> SlowMatcher:
        return SlowMatcher(self.inner.fork(), self.delay_s, self.exhaustive_ids)


@pytest.fixture(scope="module")
def letters(smollm2_vocab) -> tether.Compiled:
    return tether.compile(tether.Regex(r"[a-z ]{0,30}"), smollm2_vocab)


def test_budget_is_reported_and_relax_skips_the_slow_domain(smollm2_vocab, letters) -> None:
    def run(on_budget: str) -> list:
        config = FusionConfig(intensity="full", on_budget=on_budget)  # 2,000 µs
        domains = DomainSet(config, smollm2_vocab, {SYN: letters.matcher()},
                            {SEM: SlowScorer(0.003), CF: SlowScorer(0.0)})
        return [domains.step() for _ in range(6)]

    reported = run("report")
    assert all(r.over_budget and r.skipped == [] for r in reported)
    assert all(r.timings_ns[SEM] >= 3_000_000 and SEM in r.result.active_domains
               for r in reported)
    assert reported[0].budget_us == 2_000 and reported[0].domains_ns >= 3_000_000
    # Relaxing acts on wall-clock estimates: a pause of the shared machine (or a garbage
    # collection) inside the fast domain's first step makes it look slow too, so the
    # scenario gets three tries to be measured undisturbed.
    for _ in range(3):
        relaxed = run("relax")
        if relaxed[1].skipped == [SEM]:
            break
    assert relaxed[0].over_budget and relaxed[0].skipped == []  # nothing measured yet
    assert relaxed[1].skipped == [SEM] and not relaxed[1].over_budget
    assert SEM not in relaxed[1].timings_ns and SEM not in relaxed[1].result.active_domains
    assert CF in relaxed[1].result.active_domains
    assert any(SEM in r.timings_ns for r in relaxed[2:])  # its estimate decays: retried


def test_relax_skips_types_but_never_syntax(smollm2_vocab, letters) -> None:
    config = FusionConfig(intensity="standard", on_budget="relax")  # 200 µs
    domains = DomainSet(config, smollm2_vocab,
                        {SYN: SlowMatcher(letters.matcher(), 0.001),
                         TYP: SlowMatcher(letters.matcher(), 0.001)})
    first, second = domains.step(), domains.step()
    assert first.over_budget and second.skipped == [TYP]
    assert second.over_budget and SYN in second.timings_ns  # Syntax alone is still too slow


def test_domain_set_phases_consume_rollback_and_fork(smollm2_vocab, letters) -> None:
    vocab = smollm2_vocab
    syntax = letters.matcher()
    scorer = SlowScorer(0.0)
    domains = DomainSet(FusionConfig(intensity="full"), vocab, {SYN: syntax}, {SEM: scorer})
    prose = domains.step(Phase.REASONING)
    assert prose.result.unconstrained and prose.timings_ns == {}
    domains.consume(token_id(vocab, b"The"))  # prose the structured Syntax would reject
    assert syntax.n_consumed == 0 and scorer.consumed == 0
    structured = domains.step(Phase.TRANSITION)
    assert not structured.result.unconstrained
    hi = token_id(vocab, b"hi")
    assert hi in structured.result.feasible_ids()
    domains.consume(hi)
    assert syntax.generated_bytes == b"hi" and domains.generated == b"Thehi"
    with pytest.raises(tether.ConstraintViolation):
        domains.consume(token_id(vocab, b"7"))
    twin = domains.fork()
    domains.rollback(2)
    assert syntax.n_consumed == 0 and domains.generated == b"" and scorer.consumed == 0
    assert twin.generated == b"Thehi"


def test_a_reasoning_phase_syntax_plugin(smollm2_vocab, letters) -> None:
    vocab = smollm2_vocab
    reasoning = forbid_words(vocab, ["maybe"])  # reasoning may say anything but "maybe"
    syntax = letters.matcher()
    domains = DomainSet(FusionConfig(intensity="standard"), vocab, {SYN: syntax},
                        reasoning_syntax=reasoning)
    domains.step(Phase.REASONING)
    domains.consume(token_id(vocab, b"Maybe"))
    domains.consume(token_id(vocab, b" maybe"))
    report = domains.step(Phase.REASONING)
    assert report.result.rejected_by(token_id(vocab, b".")) == [SYN]
    assert reasoning.n_consumed == 2 and syntax.n_consumed == 0
    domains.rollback(1)
    assert reasoning.n_consumed == 1
    assert token_id(vocab, b".") in domains.step(Phase.REASONING).result.feasible_ids()


def test_a_relaxed_domain_is_lost_until_rollback(smollm2_vocab) -> None:
    vocab = smollm2_vocab
    syntax = tether.compile(tether.Regex("run( [a-z]+)?"), vocab).matcher()
    imports = forbid_words(vocab, ["run"])
    domains = DomainSet(FusionConfig(intensity="full_hard"), vocab, {SYN: syntax, IMP: imports})
    domains.step()
    domains.consume(token_id(vocab, b"run"))
    after = domains.step()  # Syntax: " " or the end; Imports: neither, after "run"
    assert after.result.dropped == [IMP]
    assert after.result.rejected_by(token_id(vocab, b" ")) == [IMP]
    domains.consume(token_id(vocab, b" "))
    assert domains.step().lost == [IMP] and imports.n_consumed == 1
    domains.rollback(1)
    assert domains.step().lost == [] and imports.n_consumed == 1


def test_exhaustive_uses_the_slow_checks(smollm2_vocab, letters) -> None:
    narrow = [token_id(smollm2_vocab, b"a")]
    for level, expected in (("full", None), ("exhaustive", narrow)):
        domains = DomainSet(FusionConfig(intensity=level), smollm2_vocab,
                            {SYN: SlowMatcher(letters.matcher(), exhaustive_ids=narrow)})
        ids = domains.step().result.feasible_ids().tolist()
        assert (ids == narrow) == (expected is not None)

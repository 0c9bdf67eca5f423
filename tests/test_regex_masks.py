"""Exact masks with the real SmolLM2 vocabulary, checked against the ``regex`` oracle,
and the Matcher API (consume / rollback / fork / forced / end of generation)."""

from __future__ import annotations

import numpy as np
import pytest
from mask_walk import compare_walk, greedy_tokens
from regex_corpus import CORPUS

import tether
from tether.engine import bitmask

# A CI subset of the corpus (bench/exact_masks.py checks all of it).
CI_SUBSET = [
    r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
    r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)",
    r"(?u)[\w.+-]+@[\w-]+\.[\w.-]+",
    r"\+?[1-9]\d{1,14}",
    r"(?u)[^\W\d]\w*",
    r"[\U0001F300-\U0001FAFF]+",
    r"\"([^\"\\]|\\[\"\\/bfnrtu])*\"",
    r"(?s).{0,12}",
    r"(red|green|blue|yellow|purple)",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"\p{L}[\p{L}\p{N}_]*",
]
EXAMPLES = dict(CORPUS)


@pytest.mark.parametrize("pattern", CI_SUBSET)
def test_masks_equal_the_oracle(smollm2_vocab: tether.Vocabulary, pattern: str) -> None:
    for example in EXAMPLES[pattern]:
        assert compare_walk(smollm2_vocab, pattern, example) == []


@pytest.mark.parametrize("pattern", [r"[\U0001F300-\U0001FAFF]+",
                                     r"(?u)[\w.+-]+@[\w-]+\.[\w.-]+"])
def test_masks_between_the_bytes_of_a_character(smollm2_vocab: tether.Vocabulary,
                                                pattern: str) -> None:
    # one byte token at a time: states in the middle of multi-byte characters
    assert compare_walk(smollm2_vocab, pattern, EXAMPLES[pattern][0], byte_tokens=True) == []


# -- the Matcher API ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def date(smollm2_vocab: tether.Vocabulary) -> tether.Compiled:
    return tether.compile(tether.Regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), smollm2_vocab)


def _ids(m: tether.Matcher, vocab: tether.Vocabulary) -> list[int]:
    return bitmask.to_ids(m.mask(), vocab.size).tolist()


def test_mask_format(date: tether.Compiled, smollm2_vocab: tether.Vocabulary) -> None:
    words = date.matcher().mask()
    assert words.dtype == np.uint32 and words.shape == ((smollm2_vocab.size + 31) // 32,)
    allowed = {smollm2_vocab.token_bytes(i) for i in bitmask.to_ids(words, smollm2_vocab.size)}
    assert allowed == {str(d).encode() for d in range(10)}  # SmolLM2 splits digits


def test_consume_rollback_fork(date: tether.Compiled, smollm2_vocab: tether.Vocabulary) -> None:
    vocab = smollm2_vocab
    m = date.matcher()
    tokens = greedy_tokens(vocab, b"2024-03-1")
    m.consume_many(tokens)
    assert m.generated_bytes == b"2024-03-1"
    assert not m.is_accepting() and not m.eos_allowed()
    twin = m.fork()
    seven = greedy_tokens(vocab, b"7")[0]
    twin.consume(seven)
    assert twin.is_accepting() and twin.eos_allowed() and twin.is_finished()
    assert set(_ids(twin, vocab)) == set(vocab.eos_ids)
    assert m.generated_bytes == b"2024-03-1"  # the fork is independent
    m.rollback(3)
    assert m.generated_bytes == greedy_bytes(vocab, tokens[:-3])
    with pytest.raises(tether.TetherError):
        m.rollback(100)


def greedy_bytes(vocab: tether.Vocabulary, tokens: list[int]) -> bytes:
    return b"".join(vocab.token_bytes(t) for t in tokens)


def test_violation_leaves_state_unchanged(date: tether.Compiled,
                                          smollm2_vocab: tether.Vocabulary) -> None:
    vocab = smollm2_vocab
    m = date.matcher()
    m.consume(greedy_tokens(vocab, b"2")[0])
    before = m.mask().copy()
    bad = greedy_tokens(vocab, b"x")[0]
    with pytest.raises(tether.ConstraintViolation):
        m.consume(bad)
    eos = min(vocab.eos_ids)
    with pytest.raises(tether.ConstraintViolation):
        m.consume(eos)
    assert m.generated_bytes == b"2" and np.array_equal(m.mask(), before)
    assert not m.allowed(bad) and m.allowed(greedy_tokens(vocab, b"0")[0])
    with pytest.raises(tether.TokenIdError):
        m.allowed(vocab.size + 5)


def test_end_of_generation(smollm2_vocab: tether.Vocabulary) -> None:
    vocab = smollm2_vocab
    m = tether.compile(tether.Regex(r"ab?"), vocab).matcher()
    m.consume(greedy_tokens(vocab, b"a")[0])
    assert m.eos_allowed() and not m.is_finished()
    eos = min(vocab.eos_ids)
    assert m.allowed(eos)
    m.consume(eos)
    assert m.is_stopped and bitmask.popcount(m.mask()) == 0
    m.rollback(1)
    assert not m.is_stopped and m.allowed(greedy_tokens(vocab, b"b")[0])


def test_forced(smollm2_vocab: tether.Vocabulary) -> None:
    vocab = smollm2_vocab
    compiled = tether.compile(tether.Choices(["constrained decoding", "constant"]), vocab)
    m = compiled.matcher()
    assert m.forced().bytes == b"const"
    m.consume_many(greedy_tokens(vocab, b"constr"))
    forced = m.forced()
    assert forced.bytes == b"ained decoding"
    for t in forced.tokens:
        assert bitmask.popcount(m.mask()) == 1
        m.consume(t)
    assert m.generated_bytes.startswith(b"constr")


def test_choices_and_check(smollm2_vocab: tether.Vocabulary) -> None:
    compiled = tether.compile(tether.Choices(["yes", "no", "maybe not"]), smollm2_vocab)
    assert compiled.check("maybe not") == tether.CheckResult(True, 9)
    assert compiled.check("maybe") == tether.CheckResult(False, 5, expected=b" ")
    assert compiled.check("mayhem") == tether.CheckResult(False, 3, expected=b"b")


def test_compile_is_cached_and_shares_masks(smollm2_vocab: tether.Vocabulary) -> None:
    a = tether.compile(tether.Regex(r"[a-z]+"), smollm2_vocab)
    b = tether.compile(tether.Regex(r"[a-z]+"), smollm2_vocab)
    assert a is b
    assert a.matcher().mask() is b.matcher().mask()


def test_bitmask_conversions() -> None:
    ids = [0, 5, 31, 32, 99]
    words = bitmask.from_ids(ids, 100)
    assert words.shape == (4,) and bitmask.to_ids(words, 100).tolist() == ids
    assert bitmask.popcount(words) == 5
    additive = bitmask.to_additive(words, 100)
    assert additive[5] == 0 and np.isneginf(additive[6])
    batch = np.stack([words, bitmask.from_ids([1], 100)])
    assert bitmask.to_bool(batch, 100).sum(axis=1).tolist() == [5, 1]



def test_walks_below_many_nodes_by_class_equal_walks_node_by_node(
        smollm2_vocab: tether.Vocabulary, smollm2_encode, monkeypatch) -> None:
    """A walk below many trie nodes starts from the children whose class the state
    reads, found by class: the tokens and the ends equal those of the walk below each
    node in turn, for node sets nested and not (every node to depth 3, the nodes where
    an identifier may end, a random sample), from the frames of Python's grammar met
    along a line."""
    import tether.grammars
    from tether.engine import token_masks

    compiled = tether.compile(tether.grammars.python(), smollm2_vocab)
    walker, pda = compiled._walker, compiled.pda
    trie = walker.trie
    matcher = compiled.matcher()
    for token in smollm2_encode("x = y +(1, a)\n"):
        matcher.mask()
        matcher.consume(token)
    states = [pda.walled_state(item) for item in range(len(pda._items))]
    letters = {int(c) for c in pda.class_of_byte[np.frombuffer(
        b"abcdefghijklmnopqrstuvwxyz_", dtype=np.uint8)]}
    on_path = np.zeros(trie.size.size, dtype=bool)  # the nodes whose bytes are all letters
    for node in range(1, trie.size.size):
        parent = trie.node_parent[node]
        on_path[node] = trie.node_class[node] in letters and (parent == 0 or on_path[parent])
    rng = np.random.default_rng(0)
    node_sets = [np.flatnonzero((trie.node_depth <= 3) & (trie.node_depth > 0)),
                 np.flatnonzero(on_path),
                 np.sort(rng.choice(trie.size.size, 5000, replace=False))]

    assert all(nodes.size >= token_masks.BY_CLASS_NODES for nodes in node_sets)

    def walks():
        out = []
        for nodes in node_sets:
            for state in states:
                words, events = walker.subtrees_mask_and_events(nodes, state,
                                                                lambda: pda.pops)
                out.append((words, np.sort(events)))
        return out

    started = []
    by_class_starts = token_masks._children_in_classes
    monkeypatch.setattr(token_masks, "_children_in_classes",
                        lambda *a: started.append(a[0]) or by_class_starts(*a))
    by_class = walks()
    assert len(started) > len(states)  # (what many frames read first is narrow)
    monkeypatch.setattr(token_masks, "BY_CLASS_NODES", 1 << 62)
    for (a, ends_a), (b, ends_b) in zip(by_class, walks(), strict=True):
        assert np.array_equal(a, b) and np.array_equal(ends_a, ends_b)

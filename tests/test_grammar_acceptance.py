"""Issue 5's acceptance bars on the six example grammars, in both syntaxes.

* Random strings of each grammar (the generator of ``grammar_oracles``) are accepted
  token by token as the real SmolLM2 and DeepSeek-V4 tokenizers split them, and end of
  generation is allowed after them.
* Random mutations are rejected exactly when the ``lark`` package (Earley) rejects them,
  and the longest viable prefix ``check`` reports is the oracle's.
* Masks are exact: on every state of random walks over a 2,000-token sub-vocabulary of
  SmolLM2, and on a few states with the whole vocabulary, the mask equals a brute-force
  oracle (``grammar_mask_oracle``: every token tried with an Earley prefix check over the
  grammar, not tether's automata; end of generation as ``lark`` says).

Each grammar is compiled once per vocabulary (``tether.compile`` caches it).
"""

from __future__ import annotations

import functools
import random
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from grammar_mask_oracle import MaskOracle, Position, TrieNode, token_trie
from grammar_oracles import (
    EXAMPLES,
    GRAMMARS,
    IrRecognizer,
    lark_accepts,
    lark_parser,
    load_example,
    mutate,
    mutation_alphabet,
    samples,
)

import tether
from tether.engine import bitmask
from tether.errors import LimitExceeded
from tether.grammar.ir import Grammar

pytest.importorskip("lark")

CASES = [(name, syntax) for name in EXAMPLES for syntax in ("gbnf", "lark")]
N_STRINGS = 500  # generated strings accepted token by token, per grammar and vocabulary
N_MUTANTS = 500  # mutations compared with lark, per grammar
N_WALKS = 50  # walks over the sub-vocabulary, per grammar
SUB_VOCAB = 2000  # tokens of the sub-vocabulary (an end-of-generation token is added)
N_FULL_STATES = 3  # states checked with the whole SmolLM2 vocabulary, per grammar
MAX_WALK_TEXT = 40  # characters of the strings the walks follow
MAX_MUTANT_BASE = 80  # characters of the strings mutated (lark's time grows with length)


@dataclass
class Case:
    """One example grammar in one syntax, with its references and random strings."""

    name: str
    syntax: str
    source: str
    grammar: Grammar
    recognizer: IrRecognizer
    reference: object  # the lark parser of the same language
    valid: list[str]
    mutants: list[str]

    @property
    def constraint(self) -> tether.Grammar:
        return tether.Grammar(self.source, syntax=self.syntax)


@functools.cache
def case(name: str, syntax: str) -> Case:
    grammar, lark_text = load_example(name, syntax)
    rng = random.Random(zlib.crc32(f"acceptance {name}.{syntax}".encode()))
    valid: dict[str, None] = {}  # distinct, in the order drawn
    while len(valid) < N_STRINGS:
        drawn = samples(grammar, rng, N_STRINGS)
        valid.update(dict.fromkeys(s for s in drawn if _spelled_by_smollm2(s)))
    drawn = list(valid)[:N_STRINGS]
    alphabet = mutation_alphabet(drawn)
    bases = [s for s in drawn if len(s) <= MAX_MUTANT_BASE]
    mutants: set[str] = set()
    while len(mutants) < N_MUTANTS:
        mutants.add(mutate(rng, rng.choice(bases), alphabet))
    return Case(name, syntax, (GRAMMARS / f"{name}.{syntax}").read_text(), grammar,
                IrRecognizer(grammar), lark_parser(lark_text), drawn, sorted(mutants))


# SmolLM2 has no token for these bytes (so it can never spell a text holding them).
_SMOLLM2_MISSING = {4, 6, 19, 20, 22, 29, 192, 193, *range(241, 256)}


def _spelled_by_smollm2(text: str) -> bool:
    return not _SMOLLM2_MISSING.intersection(text.encode())


# -- tokenizers ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deepseek_vocab(deepseek_tokenizer_json: Path) -> tether.Vocabulary:
    return tether.Vocabulary.from_file(deepseek_tokenizer_json)


@pytest.fixture(scope="module")
def deepseek_encode(deepseek_tokenizer_json: Path):
    """The real DeepSeek-V4 tokenizer (the ``tokenizers`` library), no special tokens."""
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(deepseek_tokenizer_json))
    return lambda text: hf.encode(text, add_special_tokens=False).ids


@pytest.fixture(params=["smollm2", "deepseek"])
def tokenizer(request) -> tuple[tether.Vocabulary, object]:
    """(vocabulary, encode) of each real tokenizer."""
    vocab, encode = (("smollm2_vocab", "smollm2_encode") if request.param == "smollm2"
                     else ("deepseek_vocab", "deepseek_encode"))
    return request.getfixturevalue(vocab), request.getfixturevalue(encode)


# -- generated strings, token by token -----------------------------------------------------
@pytest.mark.parametrize(("name", "syntax"), CASES)
def test_generated_strings_are_accepted_token_by_token(name: str, syntax: str,
                                                       tokenizer) -> None:
    vocab, encode = tokenizer
    example = case(name, syntax)
    compiled = tether.compile(example.constraint, vocab)
    for text in example.valid:
        tokens = encode(text)
        assert b"".join(vocab.token_bytes(t) for t in tokens) == text.encode(), text
        matcher = compiled.matcher()
        for t in tokens:
            matcher.consume(t)
        assert matcher.eos_allowed(), text


# -- mutations, against lark ---------------------------------------------------------------
@pytest.mark.parametrize(("name", "syntax"), CASES)
def test_mutations_are_rejected_exactly_when_lark_rejects_them(
        name: str, syntax: str, smollm2_vocab: tether.Vocabulary) -> None:
    example = case(name, syntax)
    compiled = tether.compile(example.constraint, smollm2_vocab)
    verdicts = []
    for text in example.mutants:
        result = compiled.check(text)
        expected = lark_accepts(example.reference, text)
        assert result.matches == expected, text
        assert result.valid_prefix == _viable_prefix(example.recognizer, text), text
        verdicts.append(expected)
    assert min(sum(verdicts), len(verdicts) - sum(verdicts)) >= N_MUTANTS // 20


def _viable_prefix(recognizer: IrRecognizer, text: str) -> int:
    """The length in bytes of the longest prefix of ``text`` the grammar can go on from."""
    column, n = recognizer.initial, 0
    for ch in text:
        column = recognizer.advance(column, ord(ch))
        if column is None:
            break
        n += len(ch.encode())
    return n


# -- exact masks ---------------------------------------------------------------------------
@dataclass
class SubVocabulary:
    """A vocabulary of SmolLM2 tokens, with the byte trie the oracle walks."""

    vocab: tether.Vocabulary
    full_ids: list[int]  # the SmolLM2 id of each token (the last one, EOS, excluded)
    trie: TrieNode

    @functools.cached_property
    def index(self) -> dict[bytes, int]:
        return {t: i for i, t in enumerate(self.vocab.tokens[:-1])}


def sub_vocabulary(full: tether.Vocabulary, example: Case, rng: random.Random) -> SubVocabulary:
    """2,000 SmolLM2 tokens chosen for a grammar — every single byte, tokens found in its
    strings, tokens made only of its characters up to three quarters of the total, then
    any other tokens at random — and an end-of-generation token."""
    alphabet = set(mutation_alphabet(example.valid))
    ordinary = [i for i in range(full.size) if not full.is_special(i)]
    single = [i for i in ordinary if len(full.token_bytes(i)) == 1]
    index = {full.token_bytes(i): i for i in ordinary}
    seen = sorted({index[piece] for s in example.valid for piece in _pieces(s.encode())
                   if piece in index})
    own = [i for i in ordinary if _made_of(full.token_bytes(i), alphabet)]
    chosen = dict.fromkeys(single + rng.sample(seen, min(len(seen), 500)))
    own = [i for i in own if i not in chosen]
    chosen.update(dict.fromkeys(rng.sample(own, min(len(own), SUB_VOCAB * 3 // 4 - len(chosen)))))
    others = [i for i in ordinary if i not in chosen]
    chosen.update(dict.fromkeys(rng.sample(others, SUB_VOCAB - len(chosen))))
    ids = list(chosen)
    tokens = [full.token_bytes(i) for i in ids] + [b""]
    vocab = tether.Vocabulary(tokens, eos_ids=[len(ids)], name=f"sub-{example.name}")
    return SubVocabulary(vocab, ids, token_trie(tokens, {len(ids)}))


def _pieces(data: bytes, longest: int = 12) -> set[bytes]:
    """The substrings of ``data`` up to ``longest`` bytes."""
    return {data[k:k + n] for k in range(len(data)) for n in range(1, longest + 1)}


def _made_of(data: bytes, alphabet: set[str]) -> bool:
    try:
        return set(data.decode()) <= alphabet
    except UnicodeDecodeError:
        return False


class Walker:
    """A matcher and the oracle's position, moved together, comparing every mask."""

    def __init__(self, compiled: tether.Compiled, oracle: MaskOracle, example: Case) -> None:
        self.matcher = compiled.matcher()
        self.oracle = oracle
        self.position: Position = oracle.start()
        self.example = example
        self.vocab: tether.Vocabulary = compiled.vocab

    def expected(self) -> set[int]:
        out = set(self.oracle.allowed(self.position))
        if self._complete():
            out |= set(self.vocab.eos_ids)
        return out

    def check(self) -> set[int]:
        """Compare the mask here with the oracle; return the allowed tokens."""
        ours = set(bitmask.to_ids(self.matcher.mask(), self.vocab.size).tolist())
        expected = self.expected()
        if ours != expected:
            show = [self.vocab.token_bytes(i) for i in sorted(ours - expected)[:8]]
            miss = [self.vocab.token_bytes(i) for i in sorted(expected - ours)[:8]]
            pytest.fail(f"{self.example.name}.{self.example.syntax} after "
                        f"{self.position.text!r}: extra {show} missing {miss}")
        assert self.matcher.eos_allowed() == bool(expected & set(self.vocab.eos_ids))
        return ours

    def consume(self, token: int) -> None:
        self.matcher.consume(token)
        position = self.oracle.feed(self.position, self.vocab.token_bytes(token))
        assert position is not None
        self.position = position

    def _complete(self) -> bool:
        if self.position.pending:
            return False
        return _lark_complete(self.example.name, self.example.syntax,
                              self.position.text.decode())


@functools.cache
def _lark_complete(name: str, syntax: str, text: str) -> bool:
    return lark_accepts(case(name, syntax).reference, text)


def random_split(sub: SubVocabulary, text: bytes, rng: random.Random) -> list[int] | None:
    """A random tokenization of ``text`` over the sub-vocabulary (None if there is none)."""
    index = sub.index
    longest = max(map(len, index))
    out, k = [], 0
    while k < len(text):
        fits = [n for n in range(1, min(longest, len(text) - k) + 1) if text[k:k + n] in index]
        if not fits:
            return None
        n = max(fits) if rng.random() < 0.5 else rng.choice(fits)
        out.append(index[text[k:k + n]])
        k += n
    return out


def walk(walker: Walker, tokens: list[int], rng: random.Random) -> list[list[int]]:
    """Follow ``tokens`` (a valid string), half the time leaving them at a random step
    for a few random allowed tokens; check every state and return the paths to them."""
    eos = set(walker.vocab.eos_ids)
    stray = rng.randrange(len(tokens) + 1) if rng.random() < 0.5 else -1
    path: list[int] = []
    visited = [[]]
    allowed = walker.check()
    for step in range(len(tokens) + 1):
        if step == stray:
            for _ in range(rng.randint(1, 6)):
                choices = sorted(allowed - eos)
                if not choices:
                    break
                path.append(rng.choice(choices))
                walker.consume(path[-1])
                visited.append(list(path))
                allowed = walker.check()
            return visited
        if step == len(tokens):
            break
        path.append(tokens[step])
        walker.consume(tokens[step])
        visited.append(list(path))
        allowed = walker.check()
    assert allowed & eos, walker.position.text
    return visited


@pytest.fixture(scope="module")
def full_trie(smollm2_vocab: tether.Vocabulary) -> TrieNode:
    return token_trie(smollm2_vocab.tokens,
                      {i for i in range(smollm2_vocab.size) if smollm2_vocab.is_special(i)})


@pytest.mark.parametrize(("name", "syntax"), CASES)
def test_masks_equal_the_oracle(name: str, syntax: str, smollm2_vocab: tether.Vocabulary,
                                full_trie: TrieNode) -> None:
    example = case(name, syntax)
    rng = random.Random(zlib.crc32(f"masks {name}.{syntax}".encode()))
    sub = sub_vocabulary(smollm2_vocab, example, rng)
    compiled = tether.compile(example.constraint, sub.vocab)
    recognizer = IrRecognizer(example.grammar)  # its columns go with the test
    oracle = MaskOracle(recognizer, sub.trie)
    short = [s for s in example.valid if len(s) <= MAX_WALK_TEXT]
    visited: list[list[int]] = []  # the tokens leading to each state checked
    for _ in range(N_WALKS):
        tokens = random_split(sub, rng.choice(short).encode(), rng)
        assert tokens is not None
        visited += walk(Walker(compiled, oracle, example), tokens, rng)
    # A few of those states again, with the whole vocabulary.
    full_compiled = tether.compile(example.constraint, smollm2_vocab)
    full_oracle = MaskOracle(recognizer, full_trie)
    for path in rng.sample(visited, N_FULL_STATES):
        walker = Walker(full_compiled, full_oracle, example)
        for token in path:
            walker.consume(sub.full_ids[token])
        walker.check()


# -- engine limits found by these tests ------------------------------------------------------
@pytest.mark.xfail(raises=LimitExceeded, strict=True,
                   reason="nested juxtapositions exceed the pushdown engine's bound of "
                          "20,000 parse stacks (lark's Earley parser needs 0.03 s)")
def test_nested_ambiguity_stays_within_bounds() -> None:
    text = "n1448ib(g)13(8)64866t(ws14(1)oesqn((k(0)cg55(j276((5)l)))))"
    example = case("ambiguous", "lark")
    assert lark_accepts(example.reference, text)
    bytes_only = tether.Vocabulary([bytes([b]) for b in range(32, 127)])
    assert tether.compile(example.constraint, bytes_only).check(text).matches

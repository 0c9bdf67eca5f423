"""References for grammar tests that do not use tether's engine: the example grammars,
an Earley recognizer over the grammar IR (whole strings and prefixes, one character at a
time), a grammar-based random string generator, random mutations, and the ``lark``
package (Earley, ``lexer="dynamic_complete"``) as the independent parser.

Shared by ``test_grammar_frontends.py``, ``test_grammar_acceptance.py`` and
``bench/grammars.py`` (which needs only the generator, so ``lark`` is imported lazily).
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from tether.automata.regex_ast import Alternate, CharSet, Concat, Repeat
from tether.grammar.gbnf import parse_gbnf
from tether.grammar.ir import Grammar, Ref
from tether.grammar.lark import parse_lark

GRAMMARS = Path(__file__).parent / "grammars"
EXAMPLES = ["json", "arithmetic", "sql_select", "c_like", "list_left", "ambiguous"]

# An Earley item: nonterminal, alternative, dot, and the column it started in (None: the
# column holding the item, i.e. an item predicted there).
Item = tuple[int, int, int, "Column | None"]
Scan = tuple[tuple[tuple[int, int], ...], Item]  # the code point ranges an item scans


class Prediction:
    """The items a column predicts for a set of nonterminals (each nonterminal's
    alternatives, advanced over leading nullable symbols), indexed like a column's own
    items; shared by every column that predicts the same set."""

    def __init__(self, recognizer: IrRecognizer, nts: frozenset[int]) -> None:
        self.waiting: dict[int, list[Item]] = {}
        self.scans: list[Scan] = []
        self._by_char: dict[int, list[Item]] = {}
        for nt in nts:
            for alt, rhs in enumerate(recognizer.prods[nt]):
                for dot, sym in enumerate(rhs):
                    item = (nt, alt, dot, None)
                    if not isinstance(sym, int):
                        self.scans.append((sym, item))
                        break
                    self.waiting.setdefault(sym, []).append(item)
                    if sym not in recognizer.nullable:
                        break

    def scanning(self, char: int) -> list[Item]:
        """The predicted items that scan ``char``."""
        if char not in self._by_char:
            self._by_char[char] = [item for ranges, item in self.scans
                                   if any(lo <= char <= hi for lo, hi in ranges)]
        return self._by_char[char]


class Column:
    """One Earley set: the items that started in earlier columns (the rest are the
    ``prediction``), the items waiting on each nonterminal, and the items about to scan
    a character. Columns are hash-consed: equal items (with the same origin columns) make
    the same column, so a column stands for everything the text read so far can become."""

    __slots__ = ("items", "prediction", "waiting", "scans", "next")

    def __init__(self) -> None:
        self.items: set[Item] = set()
        self.prediction: Prediction
        self.waiting: dict[int, list[Item]] = {}
        self.scans: list[Scan] = []
        self.next: dict[int, Column | None] = {}  # code point -> the column after it

    def parents(self, nt: int) -> list[Item]:
        """The items of this column waiting on ``nt``."""
        return self.waiting.get(nt, []) + self.prediction.waiting.get(nt, [])


class IrRecognizer:
    """The IR flattened to plain BNF over characters, recognized with Earley (nullable
    rules handled by advancing over them when they are predicted, so an empty derivation
    never needs completing).

    The grammar's rules are all productive (the front ends check it), so a text is a
    prefix of some string of the language iff it leads from ``initial`` to a column.
    """

    def __init__(self, grammar: Grammar) -> None:
        self.prods: list[list[tuple]] = []  # nonterminal -> alternatives (symbol tuples)
        self.rule_ids = {name: self._new() for name in grammar.rules}
        self._memo: dict[int, int] = {}
        for name, body in grammar.rules.items():
            self.prods[self.rule_ids[name]] = self._alternatives(body)
        self.start = self.rule_ids[grammar.start]
        self.nullable = self._nullable()
        self._reach = self._predicted()
        self._columns: dict[tuple, Column] = {}
        self._predictions: dict[frozenset[int], Prediction] = {}
        self.initial = self._close([], self._reach[self.start])

    def _new(self) -> int:
        self.prods.append([])
        return len(self.prods) - 1

    def _alternatives(self, node) -> list[tuple]:
        if isinstance(node, Alternate):
            return [alt for item in node.items for alt in self._alternatives(item)]
        if isinstance(node, Concat):
            return [tuple(self._symbol(i) for i in node.items)]
        return [(self._symbol(node),)]

    def _symbol(self, node):
        """A nonterminal id (int) or a terminal (a tuple of code point ranges)."""
        if isinstance(node, CharSet):
            return node.ranges
        if isinstance(node, Ref):
            return self.rule_ids[node.name]
        if id(node) in self._memo:
            return self._memo[id(node)]
        nt = self._new()
        self._memo[id(node)] = nt
        if isinstance(node, Repeat):
            item = self._symbol(node.item)
            if node.max is None:
                loop = self._new()
                self.prods[loop] = [(), (loop, item)]
            else:
                loop = self._new()
                self.prods[loop] = [()]
                for _ in range(node.max - node.min):
                    nxt = self._new()
                    self.prods[nxt] = [(), (item, loop)]
                    loop = nxt
            self.prods[nt] = [(item,) * node.min + (loop,)]
        else:
            self.prods[nt] = self._alternatives(node)
        return nt

    def _nullable(self) -> set[int]:
        out: set[int] = set()
        changed = True
        while changed:
            changed = False
            for nt, alts in enumerate(self.prods):
                if nt not in out and any(all(isinstance(s, int) and s in out for s in alt)
                                         for alt in alts):
                    out.add(nt)
                    changed = True
        return out

    def _predicted(self) -> list[frozenset[int]]:
        """For each nonterminal, the nonterminals predicting it predicts (itself too)."""
        first: list[set[int]] = [set() for _ in self.prods]
        for nt, alts in enumerate(self.prods):
            for rhs in alts:
                for sym in rhs:
                    if not isinstance(sym, int):
                        break
                    first[nt].add(sym)
                    if sym not in self.nullable:
                        break
        reach = []
        for nt in range(len(self.prods)):
            seen, stack = {nt}, [nt]
            while stack:
                for nxt in first[stack.pop()] - seen:
                    seen.add(nxt)
                    stack.append(nxt)
            reach.append(frozenset(seen))
        return reach

    # -- one character at a time ------------------------------------------------------
    def advance(self, column: Column, char: int) -> Column | None:
        """The column after ``char`` (a code point), or None when no item can scan it."""
        if char not in column.next:
            seeds = [(nt, alt, dot + 1, origin) for ranges, (nt, alt, dot, origin)
                     in column.scans if any(lo <= char <= hi for lo, hi in ranges)]
            seeds += [(nt, alt, dot + 1, column)
                      for nt, alt, dot, _ in column.prediction.scanning(char)]
            column.next[char] = self._close(seeds, frozenset()) if seeds else None
        return column.next[char]

    def can_scan(self, column: Column, lo: int, hi: int) -> bool:
        """Whether some item of ``column`` scans a code point in ``lo..hi``."""
        return any(a <= hi and lo <= b for scans in (column.scans, column.prediction.scans)
                   for ranges, _ in scans for a, b in ranges)

    def is_complete(self, column: Column) -> bool:
        """Whether the text read to ``column`` is a string of the language."""
        if column is self.initial:
            return self.start in self.nullable
        return any(nt == self.start and origin is self.initial
                   and dot == len(self.prods[nt][alt]) for nt, alt, dot, origin in column.items)

    def _close(self, seeds: list[Item], predicted: frozenset[int]) -> Column:
        """The column holding ``seeds`` (items started earlier), the items they complete
        or advance to, and the prediction of ``predicted`` and what they wait on."""
        col = Column()
        items, waiting, nts = col.items, col.waiting, set(predicted)
        items.update(seeds)
        work = list(items)
        while work:
            nt, alt, dot, origin = item = work.pop()
            rhs = self.prods[nt][alt]
            if dot == len(rhs):
                for p_nt, p_alt, p_dot, p_origin in origin.parents(nt):
                    new = (p_nt, p_alt, p_dot + 1, origin if p_origin is None else p_origin)
                    if new not in items:
                        items.add(new)
                        work.append(new)
                continue
            sym = rhs[dot]
            if isinstance(sym, int):
                waiting.setdefault(sym, []).append(item)
                if sym not in nts:
                    nts |= self._reach[sym]
                if sym in self.nullable:
                    new = (nt, alt, dot + 1, origin)
                    if new not in items:
                        items.add(new)
                        work.append(new)
            else:
                col.scans.append((sym, item))
        key = (frozenset(items), frozenset(nts))
        if key not in self._columns:
            if key[1] not in self._predictions:
                self._predictions[key[1]] = Prediction(self, key[1])
            col.prediction = self._predictions[key[1]]
            self._columns[key] = col
        return self._columns[key]

    def accepts(self, text: str) -> bool:
        column: Column | None = self.initial
        for ch in text:
            column = self.advance(column, ord(ch))
            if column is None:
                return False
        return self.is_complete(column)

    # -- random strings of the language ----------------------------------------------
    @functools.cached_property
    def heights(self) -> list[float]:
        """For each nonterminal, the least derivation depth of a string."""
        h = [float("inf")] * len(self.prods)
        changed = True
        while changed:
            changed = False
            for nt, alts in enumerate(self.prods):
                best = min((1 + max((h[s] for s in alt if isinstance(s, int)), default=0)
                            for alt in alts), default=float("inf"))
                if best < h[nt]:
                    h[nt] = best
                    changed = True
        return h

    def sample(self, rng: random.Random, budget: int = 40) -> str:
        h = self.heights
        out: list[str] = []
        steps = [0]

        def gen(nt: int) -> None:
            steps[0] += 1
            alts = self.prods[nt]
            if steps[0] > budget:
                alt = min(alts, key=lambda a: max((h[s] for s in a if isinstance(s, int)),
                                                  default=0))
            else:
                alt = rng.choice(alts)
            for sym in alt:
                if isinstance(sym, int):
                    gen(sym)
                else:
                    out.append(chr(_pick(rng, sym)))

        gen(self.start)
        return "".join(out)


def _pick(rng: random.Random, ranges: tuple[tuple[int, int], ...]) -> int:
    """A code point of ``ranges``, printable ASCII when there is one (mostly)."""
    printable = [(max(lo, 32), min(hi, 126)) for lo, hi in ranges if lo <= 126 and hi >= 32]
    if printable and rng.random() < 0.95:
        lo, hi = rng.choice(printable)
    else:
        lo, hi = rng.choice(ranges)
    return rng.randint(lo, hi)


def mutate(rng: random.Random, text: str, alphabet: str) -> str:
    """``text`` with one to three random character edits."""
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(3)
        k = rng.randint(0, len(chars))
        if op == 0:
            chars.insert(k, rng.choice(alphabet))
        elif chars and op == 1:
            del chars[min(k, len(chars) - 1)]
        elif chars:
            chars[min(k, len(chars) - 1)] = rng.choice(alphabet)
    return "".join(chars)


def lark_parser(lark_text: str):
    """The independent reference: ``lark`` (Earley, complete dynamic lexer)."""
    import lark

    return lark.Lark(lark_text, parser="earley", lexer="dynamic_complete")


def lark_accepts(parser, text: str) -> bool:
    import lark

    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def load_example(name: str, syntax: str) -> tuple[Grammar, str]:
    """Our IR of an example grammar and the Lark text of the same language."""
    text = (GRAMMARS / f"{name}.{syntax}").read_text()
    if syntax == "gbnf":
        return parse_gbnf(text), (GRAMMARS / "gbnf_twins" / f"{name}.lark").read_text()
    return parse_lark(text), text


def samples(grammar: Grammar, rng: random.Random, n: int, max_len: int = 200) -> list[str]:
    """Up to ``n`` random strings of the language (short, medium and long derivations),
    those longer than ``max_len`` characters left out."""
    rec = IrRecognizer(grammar)
    drawn = (rec.sample(rng, budget=rng.choice((10, 40, 120))) for _ in range(n))
    return [s for s in drawn if len(s) <= max_len]


def corpus(grammar: Grammar, seed: int, n_valid: int, n_mutants: int) -> list[str]:
    """Random strings of the language, then random mutations of them."""
    rng = random.Random(seed)
    valid = samples(grammar, rng, n_valid)
    alphabet = mutation_alphabet(valid)
    mutants = [mutate(rng, rng.choice(valid), alphabet) for _ in range(n_mutants)]
    return valid + mutants


def mutation_alphabet(valid: list[str]) -> str:
    """The characters of ``valid`` and a few that most grammars give a meaning to."""
    return "".join(sorted(set("".join(valid)) | set(" ()[]{},;:.'\"+-*/=<>!|&0aZ_\n")))

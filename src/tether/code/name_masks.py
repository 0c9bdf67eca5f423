"""`ImportsDomain` and `TypesDomain`: the hard name domains for Python, and the one mask
machinery they share (`NameDomain`; docs/code-domains.md).

Imports: every identifier the model writes in a reference position resolves (a name in
reach for code that runs now, an attribute of the module before the ``.``, a module
``import`` can find; end of generation only with every obligation met). Types: after
``value.``, where the value's type is known, only that type's members.

The text is read by a :class:`~tether.code.scope_tracker.ScopeTracker`; a token is
allowed iff reading it adds none of the domain's violations and leaves the identifier it
ends in (if any) a prefix of a name its role accepts (:meth:`NameDomain.token_allowed`
is this definition; the mask equals it). A domain follows any text it is given (a token
it excluded, taken while the relaxation cascade dropped it, is read and its violation
counted in :attr:`NameDomain.violations`), so it keeps constraining what comes after.

How masks are computed per step without reading 49k tokens: every token is split, once
per vocabulary, into a leading run of identifier bytes ``L``, a middle ``S`` and a trailing
run ``T`` (``" foo"``: ``S=" "``, ``T="foo"``; ``"ing("``: ``L="ing"``, ``S="("``).

* Tokens that are one run (``L`` only) continue the identifier being written: allowed iff
  it stays a prefix of an accepted name — found by walking the accepted names that start
  with what is written, not the vocabulary.
* Other tokens are grouped by ``S`` and by the *class* of the identifier ``L`` closes (all
  the tracker asks of it: keyword, resolves, module, type, …; a name in no list has the
  class of every unknown name). Each group is read once by a copy of the tracker (the
  class's spelling, then ``S``): whether it adds a violation, with or without a ``T``, and
  the role a run starting after ``S`` gets. Outcomes are cached by the tracker's
  :meth:`~tether.code.scope_tracker.ScopeTracker.signature` (without indentation for
  ``S`` without a line break), shared by every sequence on the vocabulary; in a *quiet*
  state only the ``S`` that may matter are read. ``T`` is then looked up in the accepted
  prefixes of its role (one boolean row per name set, cached).
* Tokens with identifiers inside ``S`` (8 of SmolLM2's 49,152) are read one by one.
* Whole masks are cached by the tracker's :meth:`~ScopeTracker.mask_key`.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tether.code.builtin_signatures import call_signature
from tether.code.modules import available_modules, module_info
from tether.code.scope_tracker import (
    _FREE_LINES,
    ATTR,
    CODE,
    FREE,
    KEYWORDS,
    MEMBER,
    MODULE,
    PENDING,
    REF,
    STRING,
    STRING_PREFIXES,
    Role,
    ScopeTracker,
)
from tether.code.value_types import known, members
from tether.engine import bitmask
from tether.engine.matcher import Forced, StateStackMatcher
from tether.vocab import Vocabulary

_RUN = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")
# A line break, then (past blanks and comments) a byte that may close blocks.
_LINE_OPENED = re.compile(rb"[\r\n][ \t\f\r\n]*(#[^\r\n]*[\r\n][ \t\f\r\n]*)*[^ \t\f\r\n#]")
_DIGITS = b"0123456789"
_OPERATOR_CHARS = frozenset("-+*/%@&|^<>")
# (or a call; after a number being written, "." may end it first: "3" then ".|")
_OPERATOR_FIRST = re.compile(rb"\.?[\s\\]*[-+*/%@&|^<>(]")
_OPERATOR_AFTER_CLOSE = re.compile(rb"[)\]}'\"][)\]}'\"\s\\]*[-+*/%@&|^<>(]")
_MAX_OUTCOMES = 4096  # cached signatures per vocabulary
_MAX_ROWS = 256  # cached accepted-prefix rows per vocabulary
_MAX_MASKS = 2048  # cached whole masks per vocabulary and domain
_STRING_PREFIXES = frozenset(p.decode() for p in STRING_PREFIXES)


@dataclass(frozen=True)
class _Shapes:
    """The ``L``/``S``/``T`` split of every non-special token of a vocabulary."""

    pure: dict[bytes, np.ndarray]  # L -> ids of tokens that are one run
    pure_all: np.ndarray  # ids of every one-run token
    pure_digit: np.ndarray  # ids of one-run tokens starting with a digit
    lead: dict[bytes, np.ndarray]  # L -> indices (into the arrays below) of other tokens
    ids: np.ndarray  # the other tokens' ids
    kind: np.ndarray  # 0: no L; 1: L starts with a letter; 2: with a digit
    lead_e: np.ndarray  # L ends in "e"/"E" (a number's exponent may follow)
    lead_prefixed: np.ndarray  # L starts with 0x/0b/0o
    middle: np.ndarray  # S id
    middles: list[bytes]
    tail: np.ndarray  # T id, -1 without T
    tail_digit: np.ndarray  # T starts with a digit (a number: any T)
    runs: dict[bytes, int]  # T bytes -> T id
    complex: np.ndarray  # indices of tokens with identifiers inside S
    complex_leads: tuple[bytes, ...]  # their L's
    line_break: np.ndarray  # by S id: S holds a line break
    line_opened: np.ndarray  # by S id: S holds a line break, later a significant byte
    tail_middle: np.ndarray  # by S id: some token has a T after it
    dot_middle: np.ndarray  # by S id: S holds a "."
    semicolon: np.ndarray  # by S id: S holds a ";"
    comment: np.ndarray  # by S id: S holds a "#"
    backtick: np.ndarray  # by S id: S holds a "`"
    call_end: np.ndarray  # by S id: S holds a "," or a ")"
    operator_first: np.ndarray  # by S id: S opens with a binary operator's character or "("
    operator_after_close: np.ndarray  # by S id: S closes a bracket or string, then one
    variant: np.ndarray  # (kind, L ends in e, L prefixed) as 4 * kind + 2 * e + prefixed
    variant_middles: dict[int, np.ndarray]  # variant -> the S ids its tokens have


def _shapes(vocab: Vocabulary) -> _Shapes:
    pure: dict[bytes, list[int]] = {}
    pure_digit: list[int] = []
    lead: dict[bytes, list[int]] = {}
    ids: list[int] = []
    kinds: list[int] = []
    lead_e: list[bool] = []
    prefixed: list[bool] = []
    middle: list[int] = []
    tail: list[int] = []
    tail_digit: list[bool] = []
    complex_: list[int] = []
    complex_leads: list[bytes] = []
    middles: dict[bytes, int] = {}
    runs: dict[bytes, int] = {}
    for t, data in enumerate(vocab.tokens):
        if vocab.special[t]:
            continue
        spans = [(m.start(), m.end()) for m in _RUN.finditer(data)]
        if spans and spans[0] == (0, len(data)):
            pure.setdefault(data, []).append(t)
            if data[0] in _DIGITS:
                pure_digit.append(t)
            continue
        lead_end = spans[0][1] if spans and spans[0][0] == 0 else 0
        tail_start = spans[-1][0] if spans and spans[-1][1] == len(data) and \
            spans[-1][0] > 0 else len(data)
        L, S, T = data[:lead_end], data[lead_end:tail_start], data[tail_start:]
        i = len(ids)
        ids.append(t)
        kinds.append(0 if not L else (2 if L[0] in _DIGITS else 1))
        lead_e.append(L[-1:] in (b"e", b"E"))
        prefixed.append(L[:2].lower() in (b"0x", b"0b", b"0o"))
        if L:
            lead.setdefault(L, []).append(i)
        middle.append(middles.setdefault(S, len(middles)))
        tail.append(runs.setdefault(T, len(runs)) if T else -1)
        tail_digit.append(bool(T) and T[0] in _DIGITS)
        if any(s >= lead_end and e <= tail_start for s, e in spans):
            complex_.append(i)
            complex_leads.append(L)
    variant = np.array(kinds, dtype=np.int64) * 4 + np.array(lead_e, dtype=np.int64) * 2 + \
        np.array(prefixed, dtype=np.int64)
    middle_arr = np.array(middle, dtype=np.int64)
    return _Shapes(
        pure={k: np.array(v, dtype=np.int64) for k, v in pure.items()},
        pure_all=np.array(sorted(t for v in pure.values() for t in v), dtype=np.int64),
        pure_digit=np.array(pure_digit, dtype=np.int64),
        lead={k: np.array(v, dtype=np.int64) for k, v in lead.items()},
        ids=np.array(ids, dtype=np.int64), kind=np.array(kinds, dtype=np.int8),
        lead_e=np.array(lead_e, dtype=bool), lead_prefixed=np.array(prefixed, dtype=bool),
        middle=np.array(middle, dtype=np.int64), middles=list(middles),
        tail=np.array(tail, dtype=np.int64), tail_digit=np.array(tail_digit, dtype=bool),
        runs=runs, complex=np.array(complex_, dtype=np.int64),
        complex_leads=tuple(complex_leads), variant=variant,
        line_break=np.array([b"\n" in m or b"\r" in m for m in middles], dtype=bool),
        line_opened=np.array([_LINE_OPENED.search(m) is not None for m in middles],
                             dtype=bool),
        dot_middle=np.array([b"." in m for m in middles], dtype=bool),
        semicolon=np.array([b";" in m for m in middles], dtype=bool),
        comment=np.array([b"#" in m for m in middles], dtype=bool),
        backtick=np.array([b"`" in m for m in middles], dtype=bool),
        call_end=np.array([b"," in m or b")" in m for m in middles], dtype=bool),
        operator_first=np.array([_OPERATOR_FIRST.match(m) is not None for m in middles],
                                dtype=bool),
        operator_after_close=np.array([_OPERATOR_AFTER_CLOSE.search(m) is not None
                                       for m in middles], dtype=bool),
        tail_middle=np.bincount(middle_arr[np.array(tail) >= 0],
                                minlength=len(middles)).astype(bool),
        variant_middles={int(v): np.unique(middle_arr[variant == v])
                         for v in np.unique(variant).tolist()})


@dataclass(frozen=True)
class _LineStarts:
    """Per token read at the start of a logical line: where its first significant byte
    lands (what closes blocks: a byte that is no blank, line break or comment)."""

    offset: np.ndarray  # its column: the current one plus this, or this alone (absolute)
    absolute: np.ndarray  # a line break comes before it
    none: np.ndarray  # the token has no significant byte there (blanks, a comment)
    fence: np.ndarray  # it is a backtick: the program ends (a closing fence)
    tabbed: np.ndarray  # ids of tokens with a tab or form feed before it (read one by one)


def _line_starts(vocab: Vocabulary) -> _LineStarts:
    n = vocab.size
    offset = np.zeros(n, dtype=np.int64)
    absolute = np.zeros(n, dtype=bool)
    none = np.ones(n, dtype=bool)
    fence = np.zeros(n, dtype=bool)
    tabbed = []
    for t in range(n):
        if vocab.special[t]:
            continue
        col, comment, after_break = 0, False, False
        for b in vocab.token_bytes(t):
            if comment:
                if b == 0x0A:
                    comment, col, after_break = False, 0, True
                continue
            if b == 0x20:
                col += 1
            elif b in (0x09, 0x0C):
                tabbed.append(t)
                break
            elif b == 0x0A:
                col, after_break = 0, True
            elif b == 0x23:
                comment = True
            elif b != 0x0D:
                none[t] = False
                fence[t] = b == 0x60
                offset[t], absolute[t] = col, after_break
                break
    return _LineStarts(offset, absolute, none, fence, np.array(tabbed, dtype=np.int64))


class NameTable:
    """What every matcher of one name domain on one vocabulary shares (thread-safe): the
    token shapes, the group outcomes by tracker signature, the accepted-prefix rows.
    ``kinds``: the roles the domain checks (others accept any name)."""

    def __init__(self, vocab: Vocabulary, kinds: tuple[str, ...]) -> None:
        self.vocab = vocab
        self.kinds = kinds
        self.shapes = _shapes(vocab)
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        self._line_starts: _LineStarts | None = None
        self._outcomes: OrderedDict[tuple, dict] = OrderedDict()
        self._rows: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.masks = _Lru(_MAX_MASKS)  # whole masks by ScopeTracker.mask_key
        self.roles: list[Role] = [(FREE, "")]  # the roles outcomes name, by id
        self._role_ids: dict[Role, int] = {(FREE, ""): 0}
        self._lock = threading.Lock()

    @property
    def line_starts(self) -> _LineStarts:
        """Where tokens' first significant bytes land at a line's start (made once)."""
        if self._line_starts is None:
            self._line_starts = _line_starts(self.vocab)
        return self._line_starts

    def role_id(self, role: Role) -> int:
        """A small number for ``role`` (outcomes store roles by number)."""
        with self._lock:
            i = self._role_ids.get(role)
            if i is None:
                i = self._role_ids[role] = len(self.roles)
                self.roles.append(role)
            return i

    # -- accepted names --------------------------------------------------------------
    def accepted(self, role: Role, tracker: ScopeTracker) -> frozenset[str] | None:
        """The names a run in ``role`` may become (``None``: any)."""
        kind = role[0]
        if kind not in self.kinds:
            return None
        if kind == MEMBER:
            return members(role[1])
        if kind == REF:
            visible = tracker.visible_names()
            return None if visible is None else visible | _STRING_PREFIXES
        if kind == ATTR:
            info = module_info(role[1])
            if info is None or info.attributes is None or info.private_open:
                return None if info is None or info.attributes is None else \
                    info.attributes | {"_"}
            return info.attributes
        if kind == MODULE:
            return tracker.modules
        return None

    def row(self, names: frozenset[str], private_open: bool) -> np.ndarray:
        """A boolean row over T ids: which runs are prefixes of one of ``names``."""
        key = (names, private_open)
        with self._lock:
            hit = self._rows.get(key)
            if hit is not None:
                self._rows.move_to_end(key)
                return hit
        runs = self.shapes.runs
        row = np.zeros(len(runs) + 1, dtype=bool)  # the last cell: "no T"
        row[-1] = True
        for name in names:
            data = name.encode()
            for k in range(1, len(data) + 1):
                i = runs.get(data[:k])
                if i is not None:
                    row[i] = True
        if private_open:
            for run, i in runs.items():
                if run[:1] == b"_":
                    row[i] = True
        with self._lock:
            self._rows[key] = row
            while len(self._rows) > _MAX_ROWS:
                self._rows.popitem(last=False)
        return row

    def outcomes(self, signature: tuple) -> dict:
        """The group outcomes cached for a tracker signature (a dict to fill)."""
        with self._lock:
            hit = self._outcomes.get(signature)
            if hit is None:
                hit = self._outcomes[signature] = {}
                while len(self._outcomes) > _MAX_OUTCOMES:
                    self._outcomes.popitem(last=False)
            else:
                self._outcomes.move_to_end(signature)
            return hit


class _Lru:
    """A thread-safe bounded mapping, least recently used out first."""

    def __init__(self, limit: int) -> None:
        self._items: OrderedDict = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: object) -> np.ndarray | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: object, value: np.ndarray) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._limit:
                self._items.popitem(last=False)


_tables: dict[tuple[str, tuple[str, ...]], NameTable] = {}
_tables_lock = threading.Lock()


def name_table(vocab: Vocabulary, kinds: tuple[str, ...]) -> NameTable:
    """The :class:`NameTable` of ``vocab`` for a domain checking ``kinds`` (built once,
    cached by fingerprint)."""
    key = (vocab.fingerprint, kinds)
    with _tables_lock:
        table = _tables.get(key)
        if table is None:
            table = _tables[key] = NameTable(vocab, kinds)
            while len(_tables) > 8:
                _tables.pop(next(iter(_tables)))
        return table


def _name_class(tracker: ScopeTracker, name: str, role: Role) -> tuple:
    """All the tracker asks of an identifier it closes in ``role``."""
    kind = role[0]
    if kind == ATTR:
        info = module_info(role[1])
        role_ok = info is None or info.has(name)
    elif kind == MODULE:
        role_ok = name in tracker.modules
    elif kind == MEMBER:
        role_ok = name in (members(role[1]) or (name,))
    else:
        role_ok = True
    chain = tracker.chain
    if tracker.prev == ".":
        info = module_info(chain) if chain is not None else None
        module = info.submodules.get(name) if info is not None else None
    else:
        module = tracker._module_of(name)
    scope = tracker.scopes[-1]
    return ("name", name if name in KEYWORDS or name in _FREE_LINES else None,
            name.encode() in STRING_PREFIXES, tracker.resolves(name), role_ok, module,
            tracker.value_of(name, tracker.prev == "."), name in tracker.assigned,
            name in scope.referenced and name not in scope.bound, tracker.redefines(name))


# A name in no list: the class of every identifier nobody declared, and its spelling
# (bytes >= 0x80 are identifier bytes; no real name decodes to U+FFFD).
_UNKNOWN = "\ufffd"
_UNKNOWN_SPELLING = b"\xff"


def _number_class(run: bytes) -> tuple:
    low = run.lower()
    return ("num", low[:2] in (b"0x", b"0b", b"0o"), b"." in run, run[-1:] in (b"e", b"E"))


class NameDomain(StateStackMatcher):
    """A hard domain over identifiers read by a scope tracker (see the module docstring):
    :class:`ImportsDomain` and :class:`TypesDomain` differ in the roles they check, the
    tracker's violations they count, and whether they have a say about the end."""

    KINDS: tuple[str, ...] = ()

    def __init__(self, vocab: Vocabulary, tracker: ScopeTracker,
                 table: NameTable | None = None) -> None:
        self.table = table or name_table(vocab, self.KINDS)
        super().__init__(vocab, tracker)
        self._cached: tuple[ScopeTracker, np.ndarray] | None = None

    # -- what a domain decides ---------------------------------------------------------
    @staticmethod
    def count(tracker: ScopeTracker) -> int:
        """The tracker's violations of this domain."""
        raise NotImplementedError

    @staticmethod
    def end_ok(tracker: ScopeTracker) -> bool:
        """Whether the program may end here."""
        raise NotImplementedError

    @staticmethod
    def quiet(tracker: ScopeTracker) -> bool:
        """Whether text without identifier bytes surely adds no violation from here."""
        raise NotImplementedError

    def relevant(self, tracker: ScopeTracker) -> np.ndarray:
        """By S id, in a quiet state: the S's after which a T may get a role this domain
        checks (all that a T follows)."""
        return self.table.shapes.tail_middle

    @property
    def violations(self) -> int:
        """Violations read so far (tokens taken although the mask excluded them)."""
        return self.count(self.state)

    # -- the Matcher interface ---------------------------------------------------------
    def mask(self) -> np.ndarray:
        tracker = self.state
        cached = self._cached
        if cached is not None and cached[0] is tracker:
            return cached[1]
        if self._stopped:
            words = np.zeros(bitmask.n_words(self.vocab.size), dtype=np.uint32)
        else:
            key = tracker.mask_key()
            words = self.table.masks.get(key)
            if words is None:
                words = bitmask.from_bool(self._allowed(tracker))
                self.table.masks.put(key, words)
        words.flags.writeable = False
        self._cached = (tracker, words)
        return words

    def is_accepting(self) -> bool:
        return self.end_ok(self.state)

    def is_finished(self) -> bool:
        return self._stopped

    def forced(self) -> Forced:
        return Forced(b"", ())

    def _blank(self) -> NameDomain:
        twin = object.__new__(type(self))
        twin.vocab, twin.table, twin._cached = self.vocab, self.table, None
        return twin

    def _next_state(self, state: object, token_id: int, data: bytes) -> object:
        assert isinstance(state, ScopeTracker)
        after = state.copy()
        after.feed(data)
        return after

    # -- the mask ----------------------------------------------------------------------
    def token_allowed(self, token_id: int) -> bool:
        """The definition the mask follows, token by token (for tests and checks)."""
        tracker = self.state
        if self.vocab.is_eos(token_id):
            return self.end_ok(tracker)
        if self.vocab.is_special(token_id):
            return False
        after = tracker.copy()
        after.feed(self.vocab.token_bytes(token_id))
        if self.count(after) != self.count(tracker):
            return False
        if after.mode != CODE or not after.run or after.run_num:
            return True
        names = self.table.accepted(after.run_role, after)
        if names is None:
            return True
        run = after.run.decode("utf-8", "replace")
        if after.run_role[0] == ATTR:
            info = module_info(after.run_role[1])
            if info is not None and info.private_open and run.startswith("_"):
                return True
        return any(n.startswith(run) for n in names)

    def _allowed(self, tracker: ScopeTracker) -> np.ndarray:
        shapes, table, vocab = self.table.shapes, self.table, self.vocab
        ok = np.zeros(vocab.size, dtype=bool)
        if self.end_ok(tracker):
            ok[table.eos] = True
        in_code = tracker.mode == CODE
        run = tracker.run if in_code else b""
        number = in_code and bool(run) and tracker.run_num
        role = tracker.next_role()
        self._pure(ok, tracker, run, role, number)
        if not len(shapes.ids):
            return ok
        classes = _Classes()
        token_class = classes.defaults(shapes, tracker, run, role, in_code, number)
        if in_code and not number:
            for spelling, hit, key in self._declared_leads(tracker, role, run):
                token_class[hit] = classes.add(key, spelling, shapes.middle[hit])
        if len(shapes.complex):
            token_class[shapes.complex] = classes.add(("complex",), b"",
                                                      shapes.middle[shapes.complex])
        outcomes = (table.outcomes(tracker.signature(layout=False)),
                    table.outcomes(tracker.signature()))
        quiet = self.quiet(tracker)
        packed = self._outcomes(tracker, classes, outcomes, quiet)
        if not (packed & 3).any() and not self._constrains(packed[:, shapes.tail_middle]):
            ok[shapes.ids] = True  # no violation, no T to check
            self._read_complex(ok, tracker, outcomes[1], role)
            return ok
        codes = packed[token_class, shapes.middle]
        tails = shapes.tail >= 0
        bad = np.where(tails, codes & 2, codes & 1).astype(bool)
        tok_ok = ~bad
        roles = table.roles
        constrained = [rid for rid in range(len(roles)) if roles[rid][0] in table.kinds]
        if constrained:
            rid_of = codes >> 2
            has_tail = tails & ~shapes.tail_digit
            for rid in constrained:
                idx = np.nonzero(has_tail & (rid_of == rid))[0]
                if not len(idx):
                    continue
                tail_role = roles[rid]
                names = table.accepted(tail_role, tracker)
                if names is None:
                    continue
                private = tail_role[0] == ATTR and _private_open(tail_role[1])
                tok_ok[idx] &= table.row(names, private)[shapes.tail[idx]]
        ok[shapes.ids] = tok_ok
        self._read_complex(ok, tracker, outcomes[1], role)
        return ok

    def _constrains(self, packed: np.ndarray) -> bool:
        """Whether packed outcomes give some T a role that checks names."""
        roles = self.table.roles
        return any(roles[rid][0] in self.table.kinds
                   for rid in np.unique(packed >> 2).tolist())

    def _outcomes(self, tracker: ScopeTracker, classes: _Classes,
                  outcomes: tuple[dict, dict], quiet: bool) -> np.ndarray:
        """Per class (rows) and S id (columns), packed: ``role id << 2 | violation with
        a T << 1 | violation without``; groups not read yet are read now. S's without a
        line break are cached by the signature without layout (``outcomes[0]``), the
        others by the full one. ``quiet`` (see :meth:`quiet`): only the S's after which
        a T may get a role this domain checks (:meth:`relevant`) are read; the others add
        no violation and leave T free (0: role id 0 is ``FREE``)."""
        shapes, table = self.table.shapes, self.table
        n_mid = len(shapes.middles)
        relevant = self.relevant(tracker) if quiet else None
        broken = shapes.line_break
        packed = np.zeros((len(classes.items), n_mid), dtype=np.int64)
        for c, (key, spelling) in enumerate(classes.items):
            # Quiet covers text without identifier bytes after the identifier written
            # so far (and numbers): not a class that spells a name of its own.
            skip = quiet and (not spelling or key[0] == "num")
            pair = []
            for cache in outcomes:
                known = cache.get(key)
                if known is None:
                    known = cache[key] = (np.zeros(n_mid, dtype=np.int64),
                                          np.zeros(n_mid, dtype=bool))
                pair.append(known)
            for middles in classes.middles[c]:
                if skip:
                    middles = middles[relevant[middles]]
                for (code, seen), part in zip(pair, (~broken[middles], broken[middles]),
                                              strict=True):
                    sub = middles[part]
                    for m in sub[~seen[sub]].tolist():
                        if seen[m]:
                            continue  # a middle listed twice
                        violation, with_tail, tail_role = self._simulate(
                            tracker, spelling, shapes.middles[m])
                        code[m] = table.role_id(tail_role) << 2 | with_tail << 1 | violation
                        seen[m] = True
            packed[c] = np.where(broken, pair[1][0], pair[0][0])
            if skip:
                packed[c, ~pair[0][1] & ~broken] = 0
                packed[c, ~pair[1][1] & broken] = 0
        return packed

    def _declared_leads(self, tracker: ScopeTracker, role: Role,
                        run: bytes) -> list[tuple[bytes, np.ndarray, tuple]]:
        """The L's that close a name someone declared (its class differs from an unknown
        name's), with their tokens and that class."""
        lead = self.table.shapes.lead
        unknown = _name_class(tracker, _UNKNOWN, role)
        if len(lead) <= 256:
            pairs = list(lead.items())
        else:
            pairs = []
            for name in self._candidates(tracker, role, run):
                spelling = name.encode()[len(run):]
                hit = lead.get(spelling)
                if hit is not None:
                    pairs.append((spelling, hit))
        out = []
        for spelling, hit in pairs:
            key = _name_class(tracker, (run + spelling).decode("utf-8", "replace"), role)
            if key != unknown:
                out.append((spelling, hit, key))
        return out

    def _read_complex(self, ok: np.ndarray, tracker: ScopeTracker, outcomes: dict,
                      role: Role) -> None:
        """The tokens with identifiers inside S, read one by one (cached by signature,
        the class of the identifier each closes, and the names in reach)."""
        shapes = self.table.shapes
        complex_ = shapes.complex
        if not len(complex_):
            return
        in_code = tracker.mode == CODE
        run = tracker.run if in_code else b""
        number = in_code and bool(run) and tracker.run_num
        key = ("complex", tracker.visible_names(),
               tuple(_lead_class(tracker, run, lead, role, in_code, number)
                     for lead in dict.fromkeys(shapes.complex_leads)))
        hit = outcomes.get(key)
        if hit is None:
            ids = self.table.shapes.ids[complex_]
            hit = outcomes[key] = np.array([self.token_allowed(int(t)) for t in ids.tolist()],
                                           dtype=bool)
        ok[self.table.shapes.ids[complex_]] = hit

    def _candidates(self, tracker: ScopeTracker, role: Role, run: bytes) -> list[str]:
        """Names whose class may differ from an unknown name's, longer than ``run`` and
        starting with it."""
        prefix = run.decode("utf-8", "replace")
        names = set(KEYWORDS) | _FREE_LINES | _STRING_PREFIXES
        visible = tracker.visible_names()
        if visible is not None:
            names |= visible
        extra = self.table.accepted(role, tracker)
        if extra is not None and role[0] != REF:
            names |= extra
        for scope in tracker.scopes:
            names.update(name for name, _ in scope.modules)
        if tracker.prev == "." and tracker.chain is not None:
            info = module_info(tracker.chain)
            if info is not None:
                names.update(info.submodules)
        return [n for n in names if len(n) > len(prefix) and n.startswith(prefix)]

    def _pure(self, ok: np.ndarray, tracker: ScopeTracker, run: bytes, role: Role,
              number: bool) -> None:
        """One-run tokens: allowed iff the identifier stays a prefix of an accepted name
        (and, starting one, its first byte ends no operator into a violation: ``zz)``
        then ``0`` decides that ``zz`` was a reference)."""
        shapes = self.table.shapes
        if not run and tracker.mode == CODE and tracker.op:
            probe = tracker.copy()
            probe.feed(b"a")
            if self.count(probe) != self.count(tracker):
                return
        names = self.table.accepted(role, tracker) if tracker.mode == CODE else None
        if names is None or number:
            ok[shapes.pure_all] = True
            return
        if not run:
            ok[shapes.pure_digit] = True
        prefix = run.decode("utf-8", "replace")
        if role[0] == ATTR and _private_open(role[1]) and (not run or run[:1] == b"_"):
            for data, ids in shapes.pure.items():
                if (run + data)[:1] == b"_":
                    ok[ids] = True
        for name in names:
            if len(name) <= len(prefix) or not name.startswith(prefix):
                continue
            data = name.encode()[len(run):]
            for k in range(1, len(data) + 1):
                ids = shapes.pure.get(data[:k])
                if ids is not None:
                    ok[ids] = True

    def _simulate(self, tracker: ScopeTracker, spelling: bytes,
                  middle: bytes) -> tuple[bool, bool, Role]:
        """Read ``spelling`` (the identifier's rest) and ``S``: whether that adds a
        violation, whether it does when a T follows, and the role T gets."""
        after = tracker.copy()
        after.feed(spelling + middle)
        bad = self.count(after) != self.count(tracker)
        # With a T: its first byte also ends an operator S ends with ("." may be "...").
        probe = after.copy()
        probe.feed(b"a")
        role = probe.run_role if probe.mode == CODE and probe.run else (FREE, "")
        return bad, self.count(probe) != self.count(tracker), role


def _module_set(available: Iterable[str] | None, forbidden: Iterable[str]) -> frozenset[str]:
    """The top-level modules ``import`` may name (shared, so signatures stay cheap)."""
    allowed = frozenset(available_modules()) if available is None else \
        frozenset(m.partition(".")[0] for m in available)
    return _interned(allowed - frozenset(m.partition(".")[0] for m in forbidden))


_module_sets: dict[frozenset[str], frozenset[str]] = {}


def _interned(modules: frozenset[str]) -> frozenset[str]:
    return _module_sets.setdefault(modules, modules)


def _private_open(module: str) -> bool:
    info = module_info(module)
    return info is not None and info.private_open


class _Classes:
    """The classes of one step: their keys, the bytes that spell a member, and the S ids
    their tokens have."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple, bytes]] = []
        self.ids: dict[tuple, int] = {}
        self.middles: list[list[np.ndarray]] = []

    def add(self, key: tuple, spelling: bytes, middles: np.ndarray) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.items)
            self.items.append((key, spelling))
            self.middles.append([])
        self.middles[i].append(middles)
        return i

    def defaults(self, shapes: _Shapes, tracker: ScopeTracker, run: bytes, role: Role,
                 in_code: bool, number: bool) -> np.ndarray:
        """Every token's class when its L is no name anyone declared."""
        of_variant = np.zeros(12, dtype=np.int64)
        unknown = None  # the class of an unknown name, computed once
        for v, middles in shapes.variant_middles.items():
            kind, e, p = v // 4, bool(v & 2), bool(v & 1)
            if in_code and kind and not number and (kind == 1 or run):
                if unknown is None:
                    unknown = _name_class(tracker, _UNKNOWN, role)
                key, spelling = unknown, _UNKNOWN_SPELLING
            else:
                key, spelling = _default_class(tracker, run, role, in_code, number, kind,
                                               e, p)
            of_variant[v] = self.add(key, spelling, middles)
        return of_variant[shapes.variant]


def _lead_class(tracker: ScopeTracker, run: bytes, lead: bytes, role: Role, in_code: bool,
                number: bool) -> tuple:
    """The class of the identifier ``run + lead`` a token closes."""
    if not in_code:
        return ("text",) if lead else ("none",)
    if not run and not lead:
        return ("none",)
    if number or (not run and lead[:1].isdigit()):
        return _number_class(run + lead)
    return _name_class(tracker, (run + lead).decode("utf-8", "replace"), role)


def _default_class(tracker: ScopeTracker, run: bytes, role: Role, in_code: bool,
                   number: bool, kind: int, e: bool, prefixed: bool) -> tuple[tuple, bytes]:
    """The class and a spelling of tokens whose L is of ``kind`` (0: none, 1: starts
    with a letter, 2: with a digit), ends in an exponent ``e``, has a base ``prefixed``."""
    if not in_code:
        return (("text",), b"a") if kind else (("none",), b"")
    if kind == 0:
        if not run:
            return ("none",), b""
        if number:
            return _number_class(run), b""
        return _name_class(tracker, run.decode("utf-8", "replace"), role), b""
    if number or (kind == 2 and not run):
        spelling = (b"0x" if prefixed and not run else b"") + b"0" + (b"e" if e else b"")
        return _number_class(run + spelling), spelling
    return _name_class(tracker, _UNKNOWN, role), _UNKNOWN_SPELLING


_CLOSER = {"(": ")", "[": "]", "{": "}"}


class ImportsDomain(NameDomain):
    """The Imports domain over one generated sequence: every name resolves (see the
    module docstring).

    ``context``: Python source whose module-level names are in reach (the prompt's code,
    a ``--code-context`` file) — its imports, functions and assignments; ``prefix``:
    source the generated text continues (the generation starts where it ends).
    ``available_modules``: the only top-level modules ``import`` may name (default:
    every module this interpreter can import); ``forbidden_modules``: never these."""

    KINDS = (REF, ATTR, MODULE)

    def __init__(self, vocab: Vocabulary, *, context: str = "", prefix: str = "",
                 available_modules: Iterable[str] | None = None,
                 forbidden_modules: Iterable[str] = (),
                 table: NameTable | None = None) -> None:
        super().__init__(vocab, _tracker(context, prefix, available_modules,
                                         forbidden_modules), table)

    @staticmethod
    def count(tracker: ScopeTracker) -> int:
        return tracker.violations

    @staticmethod
    def end_ok(tracker: ScopeTracker) -> bool:
        return tracker.at_end_violations() == 0

    def comprehension_settlement(self, here: bool = True) -> bytes:
        """`` for name in eval("()")`` for each name waiting on the innermost bracket
        that its closing would leave unresolved (``x = [x + y for y in ys`` owes ``x``,
        which only a target of its own may bind), and the bracket's close: written where
        a ``for`` clause may come next, before the budget's end closes the bracket
        (docs/code-domains.md, "Budgets"). Nothing is iterated; the iterable's type is
        unknown to a type checker (over ``()`` mypy asks for the name's type), and
        nothing may extend it (``eval("()") is None`` would be a bool). ``here=False``:
        the clauses of every open bracket (what the budget reserves; their closes are
        Syntax's)."""
        names = self.state.comprehension_owed(here)
        if not names:
            return b""
        clauses = "".join(f' for {name} in eval("()")' for name in names)
        if not here:
            return clauses.encode()
        return (clauses + _CLOSER[self.state.brackets[-1].char]).encode()

    def settlement(self) -> bytes:
        """Source that binds every name the program still owes, written at the start of
        a line at module level: ``import m`` for a module this interpreter has; for a
        name the code calls, a function that says it is a stub (``def name(*args,
        **kwargs): raise NotImplementedError``); for one it only reads, a value of any
        type (``name: typing.Any = NotImplemented``, so a type checker finds no error
        the settlement made). What a budget's end writes rather than leave a name
        undefined (docs/code-domains.md, "Budgets")."""
        return self.settlement_of(self.state)

    @staticmethod
    def settlement_of(tracker: ScopeTracker) -> bytes:
        """:meth:`settlement` where the tracker is ``tracker``."""
        lines = []
        for name in tracker.owed_names():
            if name in tracker.modules:
                lines.append(f"import {name}\n")
            elif name in tracker.called:
                lines.append(f"def {name}(*args, **kwargs):\n    raise NotImplementedError\n")
            else:
                if "import typing\n" not in lines:
                    lines.insert(0, "import typing\n")
                lines.append(f"{name}: typing.Any = NotImplemented\n")
        return "".join(lines).encode()

    @staticmethod
    def quiet(tracker: ScopeTracker) -> bool:
        return tracker.quiet()

    def relevant(self, tracker: ScopeTracker) -> np.ndarray:
        """The S's a T follows; those that end a line when a statement keyword's line is
        unfinished, and those with a backtick (a closing fence) when the program may not
        end here: what may add a violation in a quiet state."""
        shapes = self.table.shapes
        relevant = shapes.tail_middle
        if tracker.unfinished_statement():
            relevant = relevant | shapes.line_break | shapes.semicolon
        if tracker.at_end_violations():
            relevant = relevant | shapes.backtick
        return relevant


class TypesDomain(NameDomain):
    """The Types domain over one generated sequence (docs/code-domains.md, "Types"):
    after ``value.``, where the value's type is known (a literal, a name of known type,
    a builtin's or a known method's result), only that type's members; where a type is
    expected (a return in ``-> T``, an assignment to a name of known type) an
    expression of known type that does not fit may not end; a binary operator may not
    follow an operand of known type that lacks its method; a ``def``/``class`` may not
    define again what its block defined; the body of a function declared to return a
    known type may not end before a return, raise or yield. Unknown types constrain
    nothing.
    ``context``/``prefix``: as for :class:`ImportsDomain` (names of known type in
    reach)."""

    KINDS = (MEMBER,)

    def __init__(self, vocab: Vocabulary, *, context: str = "", prefix: str = "",
                 table: NameTable | None = None) -> None:
        super().__init__(vocab, _tracker(context, prefix, None, ()), table)

    @staticmethod
    def count(tracker: ScopeTracker) -> int:
        """The type violations so far, an operator being read that no ending can make
        supported included (:meth:`ScopeTracker.operator_doomed`)."""
        return tracker.type_violations + tracker.operator_doomed()

    def settlement(self, here: bool = True) -> bytes:
        """``raise NotImplementedError`` in the body of a function that owes a return
        (:meth:`ScopeTracker.return_settlement`; ``here``: only if it may be written
        here): what a budget's end writes rather than leave mypy's missing return
        (docs/code-domains.md, "Budgets")."""
        return self.state.return_settlement(here).encode()

    @staticmethod
    def end_ok(tracker: ScopeTracker) -> bool:
        return tracker.at_end_type_violations() == 0

    @staticmethod
    def quiet(tracker: ScopeTracker) -> bool:
        """Text without identifier bytes adds a type violation by closing the identifier
        being written when it is a member the type lacks or a ``def`` name defined
        again (not quiet), else only where a checked expression ends — a statement's
        end, a call's "," or ")" (:meth:`relevant`)."""
        if tracker.mode == CODE and tracker.op[:1] in _OPERATOR_CHARS and \
                tracker.operand_known():
            return False  # the operator being read is checked when it ends, by any byte
        if tracker.mode != CODE or not tracker.run or tracker.run_num:
            return True
        name = tracker.run.decode("utf-8", "replace")
        if tracker.redefines(name):
            return False
        if tracker.run_role[0] != MEMBER:
            return True
        known = members(tracker.run_role[1])
        return known is None or name in known

    def relevant(self, tracker: ScopeTracker) -> np.ndarray:
        """A member's role needs a "." right before it: in S, unless the text already
        ends with one. A statement whose expression is checked, or may become so (a
        target, an annotation, a keyword like ``return`` being read), ends at a line
        break, a ";" or a closing fence; a call of a function the code defines (open,
        or about to open) checks its arguments at a "," or ")"."""
        shapes = self.table.shapes
        if tracker.prev == "." or tracker.op.startswith("."):
            relevant = shapes.tail_middle
        else:
            relevant = shapes.tail_middle & shapes.dot_middle
        run = tracker.run.decode("utf-8", "replace") if tracker.mode == CODE and \
            tracker.run and not tracker.run_num else ""
        if tracker.check is not None or tracker.pending is not None or \
                tracker.annotation is not None or run in KEYWORDS or \
                (run and tracker.run_role[0] == PENDING):
            # (and a comma may make a tuple that misfits; a comment ends the statement)
            relevant = (relevant | shapes.line_break | shapes.semicolon | shapes.backtick
                        | shapes.call_end | shapes.comment)
        if call_signature(tracker.value_type) is not None or any(
                call_signature(b.callee) is not None for b in tracker.brackets) or (
                run and call_signature(tracker.value_of(run, tracker.prev == ".")) is not None):
            relevant = relevant | shapes.call_end
        if tracker.owes_return():  # a line's first byte may close the function's body
            relevant = relevant | shapes.line_opened | shapes.backtick
        # A binary operator after an operand of a known type without its method, or a
        # call of a builtin type's instance: right after a name, a literal or a closing
        # bracket (or the name or number being written), or after a bracket or string S
        # closes.
        if tracker.operand_known() or (tracker.mode == CODE and tracker.run_num) or (
                run and known(tracker.value_of(run, tracker.prev == "."))):
            relevant = relevant | shapes.operator_first
        if tracker.brackets or tracker.mode == STRING:
            relevant = relevant | shapes.operator_after_close
        return relevant

    def _allowed(self, tracker: ScopeTracker) -> np.ndarray:
        """At the start of a line in a function that owes a return, the tokens whose first
        significant byte closes its body are taken out too."""
        ok = super()._allowed(tracker)
        if tracker.mode == CODE and tracker.line_start and tracker.owes_return():
            ok &= ~self._closing_owed_body(tracker)
        return ok

    def _closing_owed_body(self, tracker: ScopeTracker) -> np.ndarray:
        """By token: whether, read at the start of a line, it closes the body of a
        function that owes a return (its first significant byte at or left of the
        ``def``'s column, or a closing fence)."""
        starts = self.table.line_starts
        limit = max(s.indent for s in tracker.scopes if s.owes_return)
        column = np.where(starts.absolute, starts.offset, starts.offset + tracker.col)
        closing = ~starts.none & ((column <= limit) | starts.fence)
        for t in starts.tabbed.tolist():
            after = tracker.copy()
            after.feed(self.vocab.token_bytes(t))
            closing[t] = after.type_violations > tracker.type_violations
        return closing


def _tracker(context: str, prefix: str, available: Iterable[str] | None,
             forbidden: Iterable[str]) -> ScopeTracker:
    tracker = ScopeTracker(_module_set(available, forbidden))
    if context:
        tracker.adopt_module_names(context)
    if prefix:
        tracker.feed(prefix.encode())
    return tracker

"""The JSON string literals a string schema allows, exactly (SPEC §4, §5).

:func:`json_string` builds the *decoded* value language first — every ``pattern`` (an
ECMA-262 regex, searched, not fully matched), the ``format``, minus ``excluded_patterns`` /
``excluded_values`` — as a byte automaton over the value's UTF-8, counts code points for
``minLength``/``maxLength``, and finally *encodes* it: quotes around, each character
written the ways JSON allows.

Encoding (one policy everywhere, so every JSON string of the schema is one language):

- every character except ``"``, ``\\`` and U+0000–U+001F may be written raw (UTF-8);
- ``"``, ``\\``, ``/``, backspace, form feed, LF, CR, tab may be written ``\\" \\\\ \\/ \\b
  \\f \\n \\r \\t``; every ASCII character (U+0000–U+007F) may be written ``\\u00XX``
  (hex digits in either case); the first three and the control characters *must* be
  escaped;
- non-ASCII characters are written raw only: ``\\u00e9`` and surrogate pairs are not
  accepted (``json.dumps(ensure_ascii=False)`` never writes them). This is the one
  deliberate restriction: such strings are rejected, never wrongly accepted.

Each escape counts as one code point. Patterns follow ECMA-262 where it differs from
Python: ``\\d \\w`` are ASCII, ``\\s`` is ECMA's white-space set, ``.`` excludes the four
line terminators, ``^``/``$`` assert the string's ends (anywhere in the pattern).

Sizes: a length bound of N needs about 13·N automaton states (no NFA can do with fewer:
each count must remember where it is inside a multi-byte character or an escape), so
bounds beyond a few thousand code points (more with a restrictive pattern) exceed the
state budget and raise :class:`~tether.errors.LimitExceeded` at ``…/maxLength``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from numba import njit

from tether.automata.boolean import (
    Dfa,
    difference_dfa,
    intersect_dfa,
    is_empty,
    to_dfa,
    to_node,
    trim,
)
from tether.automata.pieces import PieceCache
from tether.automata.regex_ast import (
    Alternate,
    Anchor,
    Automaton,
    CharSet,
    Concat,
    Exceptions,
    Node,
    Repeat,
    complement,
    literal,
    normalize,
)
from tether.automata.regex_parser import RegexFlags, RegexParser
from tether.errors import CompileError, LimitExceeded
from tether.schema.formats import format_expr
from tether.schema.lookaheads import split_lookaheads

MAX_STRING_STATES = 200_000  # automaton states of one string schema

ANY_CHAR = CharSet(complement(()))
ANY_STAR = Repeat(ANY_CHAR, 0, None)
_MUST_ESCAPE = normalize([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
_SHORT_ESCAPES = {0x22: ord('"'), 0x5C: ord("\\"), 0x2F: ord("/"), 0x08: ord("b"),
                  0x0C: ord("f"), 0x0A: ord("n"), 0x0D: ord("r"), 0x09: ord("t")}
_ECMA_SPACE = normalize([(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                         (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                         (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
_ECMA_CLASSES = {"d": ((48, 57),), "w": ((48, 57), (65, 90), (95, 95), (97, 122)),
                 "s": _ECMA_SPACE}
_LINE_TERMINATORS = normalize([(10, 10), (13, 13), (0x2028, 0x2029)])


NO_STRING = "no string satisfies"  # how json_string says its language is empty


def json_string(*, min_length: int = 0, max_length: int | None = None,
                patterns: Sequence[str] = (), excluded_patterns: Sequence[str] = (),
                excluded_values: Sequence[str] = (), format: str | None = None,  # noqa: A002
                excluded_formats: Sequence[str] = (), location: str = "") -> Node:
    """The JSON string literals (quotes included) whose decoded value has ``min_length``
    to ``max_length`` code points, contains a match of every regex of ``patterns``, of
    none of ``excluded_patterns``, is none of ``excluded_values``, has ``format`` and
    none of ``excluded_formats`` (unknown formats are ignored). :class:`CompileError` at
    ``location`` when no string qualifies or a pattern is not supported (at
    ``location + "/pattern"``)."""
    if not isinstance(min_length, int) or min_length < 0:
        raise CompileError(f"minLength must be a non-negative integer, not {min_length!r}",
                           location=f"{location}/minLength")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 0):
        raise CompileError(f"maxLength must be a non-negative integer, not {max_length!r}",
                           location=f"{location}/maxLength")
    if max_length is not None and max_length < min_length:
        raise CompileError(f"no string has at least {min_length} and at most {max_length} "
                           "characters", location=f"{location}/maxLength")
    key = (min_length, max_length, tuple(patterns), tuple(excluded_patterns),
           tuple(excluded_values), format, tuple(excluded_formats))
    try:
        node = _STRINGS.get(key, lambda: _built_or_refused(key))
    except CompileError:
        # An error not located by a JSON pointer: built again where it is.
        return _json_string(*key, location)
    if isinstance(node, _Refused):
        raise node.error_at(location)
    return replace(node, pos=location)


@dataclass(frozen=True)
class _Refused:
    """A string schema that raises (kept so the next use raises at once): the error
    with its location relative to the schema's."""

    error: type[CompileError]
    message: str
    location: str
    source: str | None

    def error_at(self, location: str) -> CompileError:
        return self.error(self.message, location=location + self.location,
                          source=self.source)


def _built_or_refused(key: tuple) -> Node | _Refused:
    try:
        return _json_string(*key, "")
    except CompileError as e:
        if not isinstance(e.location, str):
            raise
        return _Refused(type(e), e.message, e.location, e.source)


def _node_weight(node: Node | _Refused) -> int:
    return node.edges.shape[0] if isinstance(node, Automaton) else 1


MAX_ALONE_STATES = 256  # decoded DFA states of a pattern alone (see _small_automaton)
# Value automata by content (not location): the pieces many schemas share (a format, a
# maxLength, the keys other than a few names). About 16 bytes per edge: ≤ 32 MB.
_STRINGS: PieceCache[Node | _Refused] = PieceCache("json_string", max_entries=1024,
                                        max_weight=2_000_000, weight=_node_weight)


def _json_string(min_length: int, max_length: int | None, patterns: tuple[str, ...],
                 excluded_patterns: tuple[str, ...], excluded_values: tuple[str, ...],
                 fmt: str | None, excluded_formats: tuple[str, ...], location: str) -> Node:
    # Leading lookaheads become patterns and excluded patterns (schema/lookaheads.py)
    split = [split_lookaheads(p) for p in patterns]
    patterns = tuple(sorted({q for required, _ in split for q in required}))
    excluded_patterns = tuple(sorted({*excluded_patterns,
                                      *(q for _, excluded in split for q in excluded)}))
    parts = [pattern_language(p, f"{location}/pattern") for p in patterns]
    fmt_node = format_expr(fmt, f"{location}/format") if fmt is not None else None
    if fmt_node is not None:  # formats run smaller as a DFA than as their regex
        parts.append(fmt_node)
    for p in excluded_patterns:
        pattern_language(p, location)  # an unsupported pattern raises here
    excluded_nodes = {name: node for name in excluded_formats
                      if (node := format_expr(name, f"{location}/format")) is not None}
    excluded = excluded_patterns or excluded_values or excluded_nodes
    counted = min_length > 0 or max_length is not None
    if not excluded and not counted and len(parts) <= 1 and fmt_node is None \
            and not _has_automaton(parts):
        decoded = parts[0] if parts else ANY_STAR
        if is_empty(decoded):
            raise CompileError(f"{NO_STRING} this schema", location=location)
        small = _small_automaton(decoded, location) if parts else None
        return small if small is not None else Concat((_QUOTE, _encode_tree(decoded), _QUOTE),
                                                      location)
    where = f"{location}/pattern" if patterns else location
    dfas = [_pattern_dfa(p, where) for p in patterns]
    if fmt_node is not None:
        dfas.append(_format_dfa(fmt, fmt_node, where))
    if dfas:
        dfa = dfas[0]
        for other in dfas[1:]:
            dfa = intersect_dfa(dfa, other, location=where)
        if excluded_values:
            dfa = difference_dfa(dfa, _words_dfa(excluded_values), location=location)
    else:  # any string (but some words: the keys an object does not declare)
        dfa = _any_but_words(excluded_values) if excluded_values else _any_dfa()
    # L ∖ (E1 ∪ … ∪ En) as (L ∖ E1) ∖ … ∖ En: each excluded language is shared as it is
    for p in excluded_patterns:
        dfa = difference_dfa(dfa, _pattern_dfa(p, location), location=location)
    for name, node in excluded_nodes.items():
        dfa = difference_dfa(dfa, _format_dfa(name, node, location), location=location)
    if counted and not dfa.is_empty():
        where = f"{location}/maxLength" if max_length is not None else f"{location}/minLength"
        dfa = count_characters(dfa, min_length, max_length, location=where)
    if dfa.is_empty():
        raise CompileError(f"{NO_STRING} this schema (its pattern, format, length "
                           "and exclusions contradict each other)", location=location)
    encoded = _encode_dfa(dfa, location)
    if excluded_values and not (parts or excluded_patterns or counted):
        encoded = replace(encoded, exceptions=_name_exceptions(dfa, excluded_values))
    return encoded


def _small_automaton(decoded: Node, location: str) -> Automaton | None:
    """A pattern alone, encoded from its DFA if that has at most ``MAX_ALONE_STATES``
    states (else None: it stays a tree, built into the pushdown automaton). A pre-built
    deterministic automaton's masks are read by its own moves in compiled code and
    shared across schemas by what its states read (docs/architecture.md), where the
    item sets of a tree are made and walked one by one (MaskBench masks: -7 %); the
    bound keeps its compile time to a few milliseconds (``.{100}``: 130 ms whole)."""
    try:
        return _encode_dfa(to_dfa(decoded, max_states=MAX_ALONE_STATES, location=location),
                           location)
    except LimitExceeded:
        return None


_FREE = "\U0010FFFF"  # a character no excluded value starts with (checked)


def _name_exceptions(dfa: Dfa, names: tuple[str, ...]) -> Exceptions | None:
    """The :class:`~tether.automata.regex_ast.Exceptions` of the encoded automaton of
    any string but ``names`` (``dfa``: its decoded DFA; the keys of an object beyond
    its declared properties): after a prefix of some names (at a character boundary)
    the string reads as any string does — like the state after a character no name
    starts with — except that the rest of a name cannot be followed by the closing
    quote."""
    if any(name.startswith(_FREE) for name in names):
        return None
    free = dfa.walk(dfa.start, _FREE.encode())
    if free == 0:
        return None
    prefixes = {dfa.start}
    for name in names:
        state = dfa.start
        for char in name:
            state = dfa.walk(state, char.encode())
            if state == 0:
                break
            prefixes.add(state)
    return Exceptions({state + 1: free + 1 for state in prefixes})


def _pattern_dfa(pattern: str, location: str) -> Dfa:
    """The DFA of the decoded strings in which ``pattern`` finds a match (parsed
    already by :func:`pattern_language`), shared."""
    return _DECODED.get(("pattern", pattern), lambda: _frozen(_search_with_markers(
        _EcmaParser(pattern, RegexFlags()).parse(), location)))


def _format_dfa(name: str, node: Node, location: str) -> Dfa:
    """The DFA of the decoded strings of format ``name`` (whose tree is ``node``), shared."""
    return _DECODED.get(("format", name), lambda: _frozen(to_dfa(node, location=location)))


def _frozen(dfa: Dfa) -> Dfa:
    for array in (dfa.table, dfa.class_of_byte, dfa.accepting):
        array.flags.writeable = False
    return dfa


# Decoded languages by what they are (a pattern's text, a format's name): 4 bytes a
# table cell, ≤ 16 MB.
_DECODED: PieceCache[Dfa] = PieceCache("decoded_dfa", max_entries=512, max_weight=4_000_000,
                                       weight=lambda dfa: dfa.table.size)


def _any_dfa() -> Dfa:
    """The DFA of every decoded string (any UTF-8 text), shared."""
    return _DECODED.get(("any",), lambda: _frozen(to_dfa(ANY_STAR)))


def _any_but_words(words: Sequence[str]) -> Dfa:
    """The DFA of every decoded string but ``words`` — the keys an object does not
    declare, one set per schema, so its time is a compile's: the trie of the words'
    UTF-8 read in step with the DFA of any text, in one compiled pass (the same language
    as ``difference_dfa(_any_dfa(), _words_dfa(words))``, without building either
    operand's product). Bytes a word holds get classes of their own."""
    anything = _any_dfa()
    encoded = [word.encode(errors="surrogatepass") for word in words]
    data = b"".join(encoded)
    offsets = np.cumsum([0, *map(len, encoded)])
    own = np.zeros(256, dtype=np.int64)
    own[np.frombuffer(data, dtype=np.uint8)] = 1
    key = anything.class_of_byte * 257 + own * (np.arange(256) + 1)
    _, representative, class_of_byte = np.unique(key, return_index=True, return_inverse=True)
    table, accepting = _but_words_table(np.frombuffer(data, dtype=np.uint8), offsets,
                                        representative, anything.table,
                                        anything.class_of_byte, anything.accepting,
                                        anything.start)
    return Dfa(table, class_of_byte.astype(np.int64), accepting, 1)


@njit(cache=True, nogil=True)
def _but_words_table(data, offsets, representative, any_table, any_class, any_accepting,
                     any_start):  # pragma: no cover - compiled
    """The table and accepting states of :func:`_any_but_words`: ``data[offsets[i]:
    offsets[i + 1]]`` is word ``i``, ``representative[c]`` a byte of class ``c``. A
    state is a pair (trie node or -1 once off every word, state of the any-text DFA):
    0 is dead, 1 the start."""
    # the trie: node 0 the root; children as first child / next sibling lists
    size = data.size + 1
    byte_of = np.zeros(size, dtype=np.int64)
    first_child = np.full(size, -1, dtype=np.int64)
    sibling = np.full(size, -1, dtype=np.int64)
    is_word = np.zeros(size, dtype=np.bool_)
    n_nodes = 1
    for w in range(offsets.size - 1):
        node = 0
        for i in range(offsets[w], offsets[w + 1]):
            child = first_child[node]
            while child != -1 and byte_of[child] != data[i]:
                child = sibling[child]
            if child == -1:
                child = n_nodes
                n_nodes += 1
                byte_of[child] = data[i]
                sibling[child] = first_child[node]
                first_child[node] = child
            node = child
        is_word[node] = True
    # the reachable pairs, breadth first (a trie node comes with one any-text state)
    n_any = any_table.shape[0]
    n_classes = representative.size
    max_states = n_nodes + n_any + 1
    ids = np.full((n_nodes + 1) * n_any, -1, dtype=np.int64)  # (node + 1) * n_any + u
    pair_node = np.empty(max_states, dtype=np.int64)
    pair_any = np.empty(max_states, dtype=np.int64)
    table = np.zeros((max_states, n_classes), dtype=np.int32)
    accepting = np.zeros(max_states, dtype=np.bool_)
    pair_node[1], pair_any[1] = 0, any_start
    ids[n_any + any_start] = 1
    n = 2
    s = 1
    while s < n:
        node, u = pair_node[s], pair_any[s]
        accepting[s] = any_accepting[u] and not (node >= 0 and is_word[node])
        for c in range(n_classes):
            b = representative[c]
            u2 = any_table[u, any_class[b]]
            if u2 == 0:
                continue
            node2 = -1
            if node >= 0:
                node2 = first_child[node]
                while node2 != -1 and byte_of[node2] != b:
                    node2 = sibling[node2]
            key = (node2 + 1) * n_any + u2
            if ids[key] == -1:
                ids[key] = n
                pair_node[n], pair_any[n] = node2, u2
                n += 1
            table[s, c] = ids[key]
        s += 1
    return table[:n].copy(), accepting[:n].copy()


def _words_dfa(words: Sequence[str]) -> Dfa:
    """The DFA of exactly the UTF-8 of ``words`` (a trie)."""
    children: list[dict[int, int]] = [{}]
    accepting = [False, False]  # the dead state, the root
    for word in words:
        state = 0
        for byte in word.encode():
            nxt = children[state].get(byte)
            if nxt is None:
                nxt = children[state][byte] = len(children)
                children.append({})
                accepting.append(False)
            state = nxt
        accepting[state + 1] = True
    used = sorted({b for c in children for b in c})
    class_of_byte = np.zeros(256, dtype=np.int64)
    class_of_byte[used] = np.arange(1, len(used) + 1)
    table = np.zeros((len(children) + 1, len(used) + 1), dtype=np.int32)
    for state, moves in enumerate(children):
        for byte, nxt in moves.items():
            table[state + 1, class_of_byte[byte]] = nxt + 1
    return Dfa(table, class_of_byte, np.array(accepting), 1)


# -- patterns ------------------------------------------------------------------------------
class _EcmaParser(RegexParser):
    """The regex parser with ECMA-262's meaning of ``.``, ``\\d``, ``\\w`` and ``\\s``."""

    def class_escape(self, ch: str) -> tuple[tuple[int, int], ...]:
        ranges = _ECMA_CLASSES[ch.lower()]
        return complement(ranges) if ch.isupper() else ranges

    def parse_atom(self) -> Node:
        if self.peek() == ".":
            self.i += 1
            return CharSet(complement(() if self.flags.dotall else _LINE_TERMINATORS), self.i)
        return super().parse_atom()


def pattern_language(pattern: str, location: str = "") -> Node:
    """The strings in which ECMA-262 regex ``pattern`` finds a match (JSON Schema's
    unanchored search), as a node over code points (or a byte :class:`Automaton` when
    anchors sit inside the pattern). Unsupported syntax: :class:`CompileError` at
    ``location``, naming the column."""
    try:
        tree = _EcmaParser(pattern, RegexFlags()).parse()
    except CompileError as e:
        raise CompileError(f"{e.message} (column {e.location} of pattern {pattern!r})",
                           location=location, source=pattern) from None
    simple = _search_tree(tree)
    if simple is not None:
        return simple
    return to_node(_search_with_markers(tree, location), pos=location)


def _search_tree(tree: Node) -> Node | None:
    """``Σ* tree Σ*`` with leading ``^`` / trailing ``$`` per alternative dropping the
    ``Σ*`` on their side; None if an anchor sits anywhere else."""
    branches = tree.items if isinstance(tree, Alternate) else (tree,)
    out: list[Node] = []
    for branch in branches:
        items = list(branch.items) if isinstance(branch, Concat) else [branch]
        at_start = at_end = False
        while items and isinstance(items[0], Anchor) and items[0].at_start:
            items.pop(0)
            at_start = True
        while items and isinstance(items[-1], Anchor) and not items[-1].at_start:
            items.pop()
            at_end = True
        if any(_has_anchor(i) for i in items):
            return None
        out.append(Concat(((), (ANY_STAR,))[not at_start] + tuple(items)
                          + ((), (ANY_STAR,))[not at_end]))
    return out[0] if len(out) == 1 else Alternate(tuple(out))


def _has_anchor(node: Node) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, Concat | Alternate):
        return any(_has_anchor(i) for i in node.items)
    if isinstance(node, Repeat):
        return _has_anchor(node.item)
    return False


def _byte_node(byte: int, last: int | None = None) -> Automaton:
    """The byte automaton of one byte from ``byte`` to ``last`` (default: ``byte``)."""
    edges = np.array([[0, byte, byte if last is None else last, 1]], dtype=np.int32)
    edges.flags.writeable = False
    return Automaton(2, edges, 0, (1,))


_BEGIN, _END = 0xFF, 0xFE  # bytes that never occur in UTF-8: the string's two ends


def _search_with_markers(tree: Node, location: str) -> Dfa:
    """General anchors: search ``tree`` (anchors as marker bytes) in ``BEGIN text END``
    and strip the markers from the result."""
    begin, end = _byte_node(_BEGIN), _byte_node(_END)
    marked = _replace_anchors(tree, begin, end)
    # Around the match, any bytes: the frame keeps the text valid UTF-8, and a match
    # (whole characters) cannot start or end inside a character of a valid text; so
    # the search needs no UTF-8 states (far fewer subsets to determinise).
    sigma_star = Repeat(_byte_node(0, 0xFF), 0, None)
    framed = to_dfa(Concat((begin, ANY_STAR, end)), location=location)
    found = _absorbing(to_dfa(Concat((sigma_star, marked)), location=location))
    both = intersect_dfa(framed, found, location=location)
    if both.is_empty():
        return both
    cls = both.class_of_byte
    table = both.table.copy()
    start = int(table[both.start, cls[_BEGIN]])
    accepting = both.accepting[table[:, cls[_END]]]
    table[:, cls[_BEGIN]] = 0
    table[:, cls[_END]] = 0
    accepting[0] = False
    return trim(Dfa(table, cls, accepting, start))


def _absorbing(dfa: Dfa) -> Dfa:
    """``L(dfa)`` followed by any bytes: every accepting state goes to an accepting sink
    (smaller than determinising a trailing ``Σ*``, which keeps every partial match
    alive after the first)."""
    if dfa.is_empty():
        return dfa
    table = dfa.table.copy()
    table[dfa.accepting] = int(np.flatnonzero(dfa.accepting)[0])
    return Dfa(table, dfa.class_of_byte, dfa.accepting, dfa.start)


def _replace_anchors(node: Node, begin: Node, end: Node) -> Node:
    if isinstance(node, Anchor):
        return begin if node.at_start else end
    if isinstance(node, Concat):
        return Concat(tuple(_replace_anchors(i, begin, end) for i in node.items), node.pos)
    if isinstance(node, Alternate):
        return Alternate(tuple(_replace_anchors(i, begin, end) for i in node.items), node.pos)
    if isinstance(node, Repeat):
        return Repeat(_replace_anchors(node.item, begin, end), node.min, node.max, node.pos)
    return node


def _has_automaton(nodes: Sequence[Node]) -> bool:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, Automaton):
            return True
        if isinstance(node, Concat | Alternate):
            stack.extend(node.items)
        elif isinstance(node, Repeat):
            stack.append(node.item)
    return False


# -- code-point counting -------------------------------------------------------------------
def count_characters(dfa: Dfa, low: int, high: int | None, *,
                     location: str | int | None = None) -> Dfa:
    """``L(dfa)`` (valid UTF-8) restricted to strings of ``low``..``high`` code points.

    A product with a counter that moves on every byte that starts a character, built
    level by level (one level per count); levels that repeat are shared while computing
    and emitted with numpy in one go."""
    n, n_cls = dfa.table.shape
    table = dfa.table
    starts_char = np.zeros(n_cls, dtype=bool)
    for b in range(256):
        if b < 0x80 or b >= 0xC0:
            starts_char[dfa.class_of_byte[b]] = True
    t_cont, t_lead = table[:, ~starts_char], table[:, starts_char]
    top = high if high is not None else low
    loops = high is None

    def within(mask: np.ndarray) -> np.ndarray:  # close under continuation bytes
        while True:
            grown = mask.copy()
            grown[t_cont[mask].ravel()] = True
            grown[0] = False
            if (grown == mask).all():
                return mask
            mask = grown

    def advance(mask: np.ndarray) -> np.ndarray:
        nxt = np.zeros(n, dtype=bool)
        nxt[t_lead[mask].ravel()] = True
        nxt[0] = False
        return within(nxt)

    first = np.zeros(n, dtype=bool)
    first[dfa.start] = True
    reach = [within(first)]
    for _ in range(min(top, MAX_STRING_STATES + 1)):
        prev = reach[-1]
        if len(reach) >= 2 and reach[-2] is prev:
            reach.append(prev)
            continue
        nxt = advance(prev)
        reach.append(prev if (nxt == prev).all() else nxt)
        if not nxt.any():
            break
    if reach[-1].any() and top > MAX_STRING_STATES:  # every count up to `top` is a state
        shown = f"{top:,}" if top < 10**12 else f"{top:.3e}"
        raise LimitExceeded(f"a length bound of {shown} needs more than {MAX_STRING_STATES:,} "
                            "automaton states", location=location)
    if not reach[-1].any():  # no string is longer: a larger bound changes nothing
        top = min(top, len(reach) - 1)
        loops = False
    reach += [reach[-1]] * (top + 1 - len(reach))
    if loops:
        while True:
            grown = reach[top] | advance(reach[top])
            if (grown == reach[top]).all():
                break
            reach[top] = grown

    alive: list[np.ndarray] = [np.zeros(0, dtype=bool)] * (top + 1)
    for k in range(top, -1, -1):
        if k < top - 1 and reach[k] is reach[k + 1] and alive[k + 1] is alive[k + 2] \
                and (k >= low) == (k + 1 >= low):
            alive[k] = alive[k + 1]
            continue
        ok = reach[k] & dfa.accepting if k >= low else np.zeros(n, dtype=bool)
        nxt_alive = alive[k + 1] if k < top else None
        while True:
            grown = ok | (reach[k] & ok[t_cont].any(axis=1))
            if nxt_alive is not None:
                grown |= reach[k] & nxt_alive[t_lead].any(axis=1)
            elif loops:
                grown |= reach[k] & ok[t_lead].any(axis=1)
            grown[0] = False
            if (grown == ok).all():
                break
            ok = grown
        alive[k] = ok if k == top or not (ok == alive[k + 1]).all() else alive[k + 1]

    counts = np.array([int(a.sum()) for a in _distinct(alive)], dtype=np.int64)
    sizes = {id(a): c for a, c in zip(_distinct(alive), counts, strict=True)}
    total = sum(sizes[id(a)] for a in alive)
    if total * 13 // 8 > MAX_STRING_STATES:
        raise LimitExceeded(f"the length bound needs about {total * 13 // 8} automaton states "
                            f"(more than {MAX_STRING_STATES})", location=location)
    if not alive[0][dfa.start]:
        return Dfa(np.zeros((1, n_cls), dtype=np.int32), dfa.class_of_byte,
                   np.zeros(1, dtype=bool), 0)
    return _emit_levels(dfa, alive, starts_char, low, loops)


def _distinct(arrays: list[np.ndarray]) -> list[np.ndarray]:
    seen: dict[int, np.ndarray] = {}
    for a in arrays:
        seen.setdefault(id(a), a)
    return list(seen.values())


def _emit_levels(dfa: Dfa, alive: list[np.ndarray], starts_char: np.ndarray, low: int,
                 loops: bool) -> Dfa:
    """The table of the (state, count) product: runs of equal levels emitted at once."""
    n = dfa.table.shape[0]
    top = len(alive) - 1
    offsets = np.zeros(top + 2, dtype=np.int64)
    size_of = {id(a): int(a.sum()) for a in _distinct(alive)}
    offsets[1:] = np.cumsum([size_of[id(a)] for a in alive])
    offsets += 1  # state 0: dead
    blocks = [np.zeros((1, dfa.table.shape[1]), dtype=np.int32)]
    accepting = [np.zeros(1, dtype=bool)]
    k = 0
    while k <= top:
        end = k
        while end < top - 1 and alive[end + 1] is alive[k] and alive[end + 2] is alive[k + 1] \
                and (end + 1 >= low) == (k >= low):
            end += 1
        cur = alive[k]
        nxt = alive[k + 1] if k < top else (cur if loops else np.zeros(n, dtype=bool))
        states = np.nonzero(cur)[0]
        local_cur = np.full(n, -1, dtype=np.int64)
        local_cur[states] = np.arange(len(states))
        local_nxt = np.full(n, -1, dtype=np.int64)
        local_nxt[np.nonzero(nxt)[0]] = np.arange(int(nxt.sum()))
        targets = dfa.table[states]
        next_level = starts_char[None, :] & np.ones_like(targets, dtype=bool)
        local = np.where(next_level, local_nxt[targets], local_cur[targets])
        reps = end - k + 1
        level = np.arange(k, end + 1)
        same_base = offsets[level]
        next_base = offsets[np.minimum(level + 1, top)] if not (k == top and loops) \
            else offsets[level]
        base = np.where(next_level[None], next_base[:, None, None], same_base[:, None, None])
        rows = np.where(local[None] >= 0, local[None] + base, 0)
        blocks.append(rows.reshape(reps * len(states), dfa.table.shape[1]).astype(np.int32))
        acc = dfa.accepting[states]
        accepting.append(np.tile(acc, reps) & np.repeat(level >= low, len(states)))
        k = end + 1
    local_start = int(np.count_nonzero(alive[0][:dfa.start]))
    return Dfa(np.concatenate(blocks), dfa.class_of_byte, np.concatenate(accepting),
               int(offsets[0]) + local_start)


# -- encoding ------------------------------------------------------------------------------
_QUOTE = CharSet(((0x22, 0x22),))


def _hex_bytes(values: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The hex digits (either case) of nibble ``values``, as code-point ranges."""
    out = []
    for v in values:
        if v < 10:
            out.append((48 + v, 48 + v))
        else:
            out += [(87 + v, 87 + v), (55 + v, 55 + v)]
    return normalize(out)


def _escape_groups(ascii_chars: Sequence[int]
                   ) -> tuple[list[int], list[tuple[list[int], list[int]]]]:
    """The short-escape letters of ``ascii_chars`` and, for ``\\u00XY``, groups of
    (high nibbles, low nibbles) sharing the same low nibbles."""
    letters = sorted(_SHORT_ESCAPES[c] for c in ascii_chars if c in _SHORT_ESCAPES)
    by_high: dict[int, list[int]] = {}
    for c in ascii_chars:
        by_high.setdefault(c >> 4, []).append(c & 15)
    groups: dict[tuple[int, ...], list[int]] = {}
    for high, lows in sorted(by_high.items()):
        groups.setdefault(tuple(lows), []).append(high)
    return letters, [(highs, list(lows)) for lows, highs in groups.items()]


@lru_cache(maxsize=1024)
def _encoded_char(ranges: tuple[tuple[int, int], ...]) -> Node:
    """The JSON encodings of one character of ``ranges``."""
    raw = [r for r in _cut(ranges, _MUST_ESCAPE)]
    ascii_chars = [c for lo, hi in ranges if lo <= 0x7F for c in range(lo, min(hi, 0x7F) + 1)]
    options: list[Node] = [CharSet(tuple(raw))] if raw else []
    if ascii_chars:
        letters, groups = _escape_groups(ascii_chars)
        after_backslash: list[Node] = []
        if letters:
            after_backslash.append(CharSet(normalize([(c, c) for c in letters])))
        hex_tail = [Concat((CharSet(normalize([(48 + h, 48 + h) for h in highs])),
                            CharSet(_hex_bytes(lows)))) for highs, lows in groups]
        after_backslash.append(Concat((literal("u00"), _alt(hex_tail))))
        options.append(Concat((CharSet(((0x5C, 0x5C),)), _alt(after_backslash))))
    return _alt(options)


def _alt(nodes: list[Node]) -> Node:
    return nodes[0] if len(nodes) == 1 else Alternate(tuple(nodes))


def _cut(ranges: tuple[tuple[int, int], ...],
         remove: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    keep = complement(remove)
    out = []
    for lo, hi in ranges:
        for klo, khi in keep:
            a, b = max(lo, klo), min(hi, khi)
            if a <= b:
                out.append((a, b))
    return normalize(out)


def _encode_tree(node: Node) -> Node:
    """Substitute every character of a code-point syntax tree by its JSON encodings."""
    if isinstance(node, CharSet):
        return _encoded_char(node.ranges) if node.ranges else node
    if isinstance(node, Concat):
        return Concat(tuple(_encode_tree(i) for i in node.items), node.pos)
    if isinstance(node, Alternate):
        return Alternate(tuple(_encode_tree(i) for i in node.items), node.pos)
    if isinstance(node, Repeat):
        return Repeat(_encode_tree(node.item), node.min, node.max, node.pos)
    raise TypeError(node)  # pragma: no cover - anchors and automata take the DFA route


_SHORT_BYTES = np.array(sorted(_SHORT_ESCAPES), dtype=np.int64)
_SHORT_LETTERS = np.array([_SHORT_ESCAPES[c] for c in sorted(_SHORT_ESCAPES)], dtype=np.int64)


@njit(cache=True, nogil=True)
def _escape_chains(sig_start, targets, words, short_bytes, short_letters, first_state
                   ):  # pragma: no cover - compiled
    """The escape chains of the escape signatures: signature ``k`` is the groups
    ``sig_start[k] .. sig_start[k + 1] - 1`` of ``(targets[g], words[g])`` (a DFA state
    reached and the two 64-bit words of the ASCII characters escaped to it; no
    character in two groups of a signature). Each chain, deterministic: a state after
    ``\\`` (short escapes go straight to their targets; ``u`` starts ``u00``), then one
    state per group of high nibbles whose low nibbles go to the same targets, from which
    a hex digit of a low nibble reaches its target. Returns (edges ``(src, lo, hi,
    dst)``: short escapes, ``u00`` prefixes, high nibbles, then the runs of low nibbles
    as digits, as ``a-f`` and as ``A-F``; the next free state; the state after ``\\``
    of each signature)."""
    n_sigs = sig_start.size - 1
    n_groups = targets.size
    lowsets = np.zeros((n_groups, 8), dtype=np.int64)  # 16 low nibbles per high one
    for g in range(n_groups):
        for h in range(8):
            lowsets[g, h] = np.int64((words[g, h >> 2] >> np.uint64(16 * (h & 3)))
                                     & np.uint64(0xFFFF))
    # per (signature, high nibble): the first high nibble whose low nibbles go where its
    # own go (-1: none of its characters is escaped), and its chain state's number
    first = np.full((n_sigs, 8), -1, dtype=np.int64)
    group = np.full((n_sigs, 8), -1, dtype=np.int64)
    bases = np.empty(n_sigs, dtype=np.int64)
    next_state = first_state
    n_edges = 0
    for k in range(n_sigs):
        a, b = sig_start[k], sig_start[k + 1]
        n_high = 0
        for h in range(8):
            used = False
            for g in range(a, b):
                used = used or lowsets[g, h] != 0
            if not used:
                continue
            first[k, h] = h
            for h2 in range(h):
                if first[k, h2] != h2:
                    continue
                same = True
                for g in range(a, b):
                    same = same and lowsets[g, h2] == lowsets[g, h]
                if same:
                    first[k, h] = h2
                    break
            if first[k, h] == h:
                group[k, h] = n_high
                n_high += 1
        bases[k] = next_state
        next_state += 4 + n_high
        for g in range(a, b):
            for j in range(short_bytes.size):
                c = short_bytes[j]
                n_edges += (lowsets[g, c >> 4] >> (c & 15)) & 1
        for h in range(8):
            if first[k, h] >= 0:
                n_edges += 1
            if group[k, h] < 0:
                continue
            for g in range(a, b):  # runs of low nibbles (digits and letters apart)
                low = lowsets[g, h]
                for lo in range(16):
                    if (low >> lo) & 1 and (lo == 0 or lo == 10 or not (low >> (lo - 1)) & 1):
                        n_edges += 1 if lo < 10 else 2
        n_edges += 3
    edges = np.empty((n_edges, 4), dtype=np.int64)
    n = 0
    for k in range(n_sigs):  # short escapes
        for g in range(sig_start[k], sig_start[k + 1]):
            for j in range(short_bytes.size):
                c = short_bytes[j]
                if (lowsets[g, c >> 4] >> (c & 15)) & 1:
                    edges[n, 0], edges[n, 3] = bases[k], targets[g]
                    edges[n, 1] = edges[n, 2] = short_letters[j]
                    n += 1
    for k in range(n_sigs):  # u00
        for step in range(3):  # base -u-> +1 -0-> +2 -0-> +3
            edges[n, 0], edges[n, 3] = bases[k] + step, bases[k] + step + 1
            edges[n, 1] = edges[n, 2] = 117 if step == 0 else 48
            n += 1
    for k in range(n_sigs):  # high nibbles
        for h in range(8):
            if first[k, h] >= 0:
                edges[n, 0], edges[n, 1], edges[n, 2] = bases[k] + 3, 48 + h, 48 + h
                edges[n, 3] = bases[k] + 4 + group[k, first[k, h]]
                n += 1
    for letter_base in (-1, 87, 55):  # low nibbles: digits, then a-f, then A-F
        for k in range(n_sigs):
            for h in range(8):
                if group[k, h] < 0:
                    continue
                for g in range(sig_start[k], sig_start[k + 1]):
                    low = lowsets[g, h]
                    lo = 0
                    while lo < 16:
                        if not (low >> lo) & 1:
                            lo += 1
                            continue
                        hi = lo
                        while hi + 1 < 16 and hi != 9 and (low >> (hi + 1)) & 1:
                            hi += 1
                        if (lo < 10) == (letter_base < 0):
                            offset = 48 if letter_base < 0 else letter_base
                            edges[n, 0] = bases[k] + 4 + group[k, h]
                            edges[n, 1], edges[n, 2] = offset + lo, offset + hi
                            edges[n, 3] = targets[g]
                            n += 1
                        lo = hi + 1
    return edges[:n], next_state, bases


@njit(cache=True, nogil=True)
def _encoded_edges(table, class_of_byte, accepting, start, escaped, short_bytes,
                   short_letters):  # pragma: no cover - compiled
    """The edges of :func:`_encode_dfa` and its number of states. Raw characters: per
    DFA state, one edge per maximal run of bytes to one live target (``escaped`` bytes
    are dead). Quotes. Escapes: per state, its ASCII characters grouped by target
    (groups by target, each a 128-bit set as two words) — its *signature*; states with
    equal signatures share one chain (:func:`_escape_chains`), found by sorting the
    signatures' hashes and comparing those equal, so the automaton stays deterministic
    and small."""
    n = table.shape[0]
    # raw characters: runs of bytes of one class, escaped ones in none (class -1)
    raw_class = np.where(escaped, -1, class_of_byte)
    seg_lo, seg_class = _class_runs(raw_class)
    n_segs = seg_class.size
    n_raw = 0
    raw = np.empty((0, 4), dtype=np.int64)
    for fill in range(2):  # count, then fill
        if fill:
            raw = np.empty((n_raw, 4), dtype=np.int64)
            n_raw = 0
        for s in range(1, n):
            k = 0
            while k < n_segs:
                dst = 0 if seg_class[k] < 0 else table[s, seg_class[k]]
                last = k
                while last + 1 < n_segs and (0 if seg_class[last + 1] < 0
                                             else table[s, seg_class[last + 1]]) == dst:
                    last += 1
                if dst != 0:
                    if fill:
                        raw[n_raw, 0], raw[n_raw, 1] = s + 1, seg_lo[k]
                        raw[n_raw, 2], raw[n_raw, 3] = seg_lo[last + 1] - 1, dst + 1
                    n_raw += 1
                k = last + 1
    n_accepting = 0
    for s in range(1, n):
        n_accepting += accepting[s]
    quotes = np.empty((1 + n_accepting, 4), dtype=np.int64)
    quotes[0, 0], quotes[0, 1], quotes[0, 2], quotes[0, 3] = 0, 0x22, 0x22, start + 1
    k = 1
    for s in range(1, n):
        if accepting[s]:
            quotes[k, 0], quotes[k, 1], quotes[k, 2], quotes[k, 3] = s + 1, 0x22, 0x22, 1
            k += 1
    # escape groups: per state (a source), its ASCII targets in increasing order, each
    # with the characters escaped to it (every ASCII character, escaped ones included)
    a_lo, a_class = _class_runs(class_of_byte[:128])
    n_a = a_class.size
    a_words = np.zeros((n_a, 2), dtype=np.uint64)
    for k in range(n_a):
        for b in range(a_lo[k], a_lo[k + 1]):
            a_words[k, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    n_groups = 0
    group_start = np.zeros(n + 1, dtype=np.int64)
    targets = np.empty(128, dtype=np.int64)
    words = np.zeros((128, 2), dtype=np.uint64)
    g_target = np.empty(n * 4, dtype=np.int64)
    g_words = np.zeros((n * 4, 2), dtype=np.uint64)
    for s in range(1, n):
        group_start[s] = n_groups
        m = 0
        for k in range(n_a):
            t = table[s, a_class[k]]
            if t == 0:
                continue
            j = 0
            while j < m and targets[j] < t:
                j += 1
            if j == m or targets[j] != t:
                for i in range(m, j, -1):
                    targets[i] = targets[i - 1]
                    words[i] = words[i - 1]
                targets[j] = t
                words[j, 0] = words[j, 1] = 0
                m += 1
            words[j, 0] |= a_words[k, 0]
            words[j, 1] |= a_words[k, 1]
        if n_groups + m > g_target.size:
            grown = max(2 * g_target.size, n_groups + m)
            g_target = np.concatenate((g_target[:n_groups],
                                       np.empty(grown - n_groups, dtype=np.int64)))
            g_words = np.concatenate((g_words[:n_groups],
                                      np.zeros((grown - n_groups, 2), dtype=np.uint64)))
        for j in range(m):
            g_target[n_groups + j] = targets[j]
            g_words[n_groups + j] = words[j]
        n_groups += m
    group_start[n] = n_groups
    # signatures: sources with equal group lists share one
    hashes = np.zeros(n, dtype=np.uint64)
    for s in range(1, n):
        h = np.uint64(14695981039346656037)
        for g in range(group_start[s], group_start[s + 1]):
            for x in (np.uint64(g_target[g]), g_words[g, 0], g_words[g, 1]):
                h = (h ^ x) * np.uint64(1099511628211)
        hashes[s] = h
    order = np.argsort(hashes[1:], kind="mergesort") + 1
    sig_of = np.full(n, -1, dtype=np.int64)
    sig_source = np.empty(n, dtype=np.int64)
    n_sigs = 0
    run_first = 0  # the first signature of the current run of equal hashes
    for i in range(order.size):
        s = order[i]
        a, b = group_start[s], group_start[s + 1]
        if a == b:
            continue
        if n_sigs and hashes[sig_source[n_sigs - 1]] != hashes[s]:
            run_first = n_sigs
        for k in range(run_first, n_sigs):
            r = sig_source[k]
            c = group_start[r]
            same = group_start[r + 1] - c == b - a
            for g in range(b - a):
                if not same:
                    break
                same = (g_target[c + g] == g_target[a + g]
                        and g_words[c + g, 0] == g_words[a + g, 0]
                        and g_words[c + g, 1] == g_words[a + g, 1])
            if same:
                sig_of[s] = k
                break
        if sig_of[s] == -1:
            sig_of[s] = n_sigs
            sig_source[n_sigs] = s
            n_sigs += 1
    sig_start = np.zeros(n_sigs + 1, dtype=np.int64)
    for k in range(n_sigs):
        r = sig_source[k]
        sig_start[k + 1] = sig_start[k] + group_start[r + 1] - group_start[r]
    sig_targets = np.empty(sig_start[n_sigs], dtype=np.int64)
    sig_words = np.empty((sig_start[n_sigs], 2), dtype=np.uint64)
    for k in range(n_sigs):
        r = sig_source[k]
        for g in range(sig_start[k + 1] - sig_start[k]):
            sig_targets[sig_start[k] + g] = g_target[group_start[r] + g] + 1
            sig_words[sig_start[k] + g] = g_words[group_start[r] + g]
    chains, next_state, backslash_to = _escape_chains(sig_start, sig_targets, sig_words,
                                                      short_bytes, short_letters, n + 1)
    n_sources = 0
    for s in range(1, n):
        n_sources += sig_of[s] >= 0
    backslashes = np.empty((n_sources, 4), dtype=np.int64)
    k = 0
    for s in range(1, n):
        if sig_of[s] >= 0:
            backslashes[k, 0], backslashes[k, 1] = s + 1, 0x5C
            backslashes[k, 2], backslashes[k, 3] = 0x5C, backslash_to[sig_of[s]]
            k += 1
    edges = np.concatenate((raw, quotes, backslashes, chains)).astype(np.int32)
    return edges, next_state


@njit(cache=True, nogil=True)
def _class_runs(classes):  # pragma: no cover - compiled
    """The maximal runs of bytes of one class in ``classes`` (a class per byte): where
    each starts (and, last, where the last ends) and its class."""
    starts = np.empty(classes.size + 1, dtype=np.int64)
    of_run = np.empty(classes.size, dtype=np.int64)
    n = 0
    for b in range(classes.size):
        if b == 0 or classes[b] != of_run[n - 1]:
            starts[n], of_run[n] = b, classes[b]
            n += 1
    starts[n] = classes.size
    return starts[:n + 1].copy(), of_run[:n].copy()


_ESCAPED = np.zeros(256, dtype=np.bool_)
for _lo, _hi in _MUST_ESCAPE:
    _ESCAPED[_lo:_hi + 1] = True


def _encode_dfa(dfa: Dfa, location: str) -> Automaton:
    """The quoted JSON encodings of ``L(dfa)`` (a byte DFA over the decoded UTF-8):
    state 0 is before the opening quote, 1 after the closing one, DFA state ``s`` is
    ``s + 1``; escapes get small chains, one per escape signature (see
    :func:`_encoded_edges`), so the automaton is deterministic."""
    # (writable arrays, copied if shared: numba compiles a kernel apart per mix of
    # read-only and writable arguments)
    table, class_of_byte, accepting = (np.require(a, requirements=("C", "W")) for a in (
        dfa.table, dfa.class_of_byte, dfa.accepting))
    edges, n_states = _encoded_edges(table, class_of_byte, accepting, dfa.start, _ESCAPED,
                                     _SHORT_BYTES, _SHORT_LETTERS)
    if n_states > MAX_STRING_STATES:
        raise LimitExceeded(f"the string's automaton needs {n_states} states (more than "
                            f"{MAX_STRING_STATES})", location=location)
    edges.flags.writeable = False
    return Automaton(n_states, edges, 0, (1,), location)


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first compile that needs them (see
    :func:`tether.engine.token_masks._warm_up`)."""
    _encode_dfa(_any_but_words(("a",)), "")


_warm_up()

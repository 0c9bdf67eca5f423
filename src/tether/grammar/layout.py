"""Indentation and brackets for lexer-less grammars: layout markers resolved into rules.

A language like Python has an indentation-aware lexer (INDENT/DEDENT tokens, line breaks
that only count outside brackets). Without a lexer, the same layout is written into the
grammar with five marker rules:

- ``_line``: the indentation of the current block (``depth`` times the unit);
- ``_indent`` / ``_dedent``: what follows, up to the matching ``_dedent``, is one block
  deeper;
- ``_open`` / ``_close``: what follows, up to the matching ``_close``, is inside
  brackets, where the text ignored between tokens may also hold line breaks and comments.

:func:`resolve_layout` makes a copy of each rule per context it is used in — the block
depth (for rules that reach ``_line``, ``_indent`` or ``_dedent``) and whether it is
inside brackets (for rules that reach the ignored text) — so the result is an ordinary
context-free grammar. Blocks nest at most ``max_depth`` deep: deeper blocks are not part
of the language. Markers must be balanced within each alternative and each repeated part.
"""

from __future__ import annotations

from collections.abc import Hashable

from tether.automata.regex_ast import EMPTY, Alternate, CharSet, Concat, Node, Repeat, literal
from tether.errors import CompileError
from tether.grammar.ir import Expr, Grammar, Ref, refs_in

LINE, INDENT, DEDENT, OPEN, CLOSE = "_line", "_indent", "_dedent", "_open", "_close"
MARKERS = (LINE, INDENT, DEDENT, OPEN, CLOSE)
NOTHING = CharSet(())  # the empty language: a block deeper than allowed


def resolve_layout(grammar: Grammar, *, ignored: str, unit: str, bracket_space: Node,
                   max_depth: int) -> Grammar:
    """The grammar with the layout markers resolved (see the module docstring).

    ``ignored`` names the rule the front end put before every token (the text a lexer
    would skip); inside brackets it is replaced by ``bracket_space``.
    """
    return _Resolver(grammar, ignored, unit, bracket_space, max_depth).run()


class _Resolver:
    def __init__(self, grammar: Grammar, ignored: str, unit: str, bracket_space: Node,
                 max_depth: int) -> None:
        self.g = grammar
        self.ignored = ignored
        self.unit = unit
        self.bracket_space = bracket_space
        self.max_depth = max_depth
        reach = _reachability(grammar)
        self.by_depth = {n for n, r in reach.items() if r & {LINE, INDENT, DEDENT}}
        self.by_bracket = {n for n, r in reach.items() if ignored in r or n == ignored}
        self.rules: dict[str, Expr] = {}
        self.where: dict[str, int | str] = {}
        self.todo: list[tuple[str, str, tuple[int, bool]]] = []

    def run(self) -> Grammar:
        start = self.ref(self.g.start, (0, False), self.g.start)
        while self.todo:
            name, copy, ctx = self.todo.pop()
            body, end = self.rewrite(self.g.rules[name], ctx)
            if end != ctx:
                raise self.unbalanced(name)
            self.rules[copy] = body
            self.where[copy] = self.g.where.get(name, "")
        return Grammar(self.rules, start, self.where, self.g.source, longest=self.g.longest)

    def ref(self, name: str, ctx: tuple[int, bool], pos: int | str) -> str:
        depth, bracket = ctx
        key: list[Hashable] = []
        if name in self.by_depth:
            key.append(depth)
        if name in self.by_bracket:
            key.append("b" if bracket else "l")
        copy = name if not key else f"{name}@{'.'.join(map(str, key))}"
        if copy not in self.rules:
            self.rules[copy] = EMPTY  # placeholder until rewritten
            self.todo.append((name, copy, ctx))
        return copy

    def rewrite(self, expr: Expr, ctx: tuple[int, bool]) -> tuple[Expr, tuple[int, bool]]:
        """``expr`` in context ``ctx``, and the context after it."""
        if isinstance(expr, Ref):
            return self.rewrite_ref(expr, ctx)
        if isinstance(expr, Concat):
            items: list[Expr] = []
            opened: list[bool] = []
            for item in expr.items:
                if isinstance(item, Ref) and item.name in (OPEN, CLOSE):
                    if item.name == OPEN:
                        opened.append(ctx[1])
                        ctx = (ctx[0], True)
                    elif not opened:
                        raise self.unbalanced(str(item.pos))
                    else:
                        ctx = (ctx[0], opened.pop())
                    continue
                node, ctx = self.rewrite(item, ctx)
                if node is NOTHING:
                    return NOTHING, ctx
                items.append(node)
            if opened:
                raise self.unbalanced(str(expr.pos))
            return Concat(tuple(items), expr.pos), ctx
        if isinstance(expr, Alternate):
            branches = []
            for branch in expr.items:
                node, end = self.rewrite(branch, ctx)
                if end != ctx:
                    raise self.unbalanced(str(branch.pos))
                if node is not NOTHING:
                    branches.append(node)
            if not branches:
                return NOTHING, ctx
            return Alternate(tuple(branches), expr.pos), ctx
        if isinstance(expr, Repeat):
            node, end = self.rewrite(expr.item, ctx)
            if end != ctx:
                raise self.unbalanced(str(expr.pos))
            if node is NOTHING:
                return (EMPTY if expr.min == 0 else NOTHING), ctx
            return Repeat(node, expr.min, expr.max, expr.pos), ctx
        return expr, ctx

    def rewrite_ref(self, ref: Ref, ctx: tuple[int, bool]) -> tuple[Expr, tuple[int, bool]]:
        depth, bracket = ctx
        if ref.name == LINE:
            return (literal(self.unit * depth) if depth else EMPTY), ctx
        if ref.name == INDENT:
            return (EMPTY, (depth + 1, bracket)) if depth < self.max_depth else (NOTHING, ctx)
        if ref.name == DEDENT:
            if depth == 0:
                raise CompileError("_dedent without an enclosing _indent", location=ref.pos,
                                   source=self.g.source)
            return EMPTY, (depth - 1, bracket)
        if ref.name in (OPEN, CLOSE):
            raise self.unbalanced(str(ref.pos))
        if ref.name == self.ignored and bracket:
            return self.bracket_space, ctx
        return Ref(self.ref(ref.name, ctx, ref.pos), ref.pos), ctx

    def unbalanced(self, where: str) -> CompileError:
        return CompileError("layout markers (_indent/_dedent, _open/_close) must be "
                            "balanced within each alternative and repeated part",
                            location=where or None, source=self.g.source)


def _reachability(grammar: Grammar) -> dict[str, set[str]]:
    """For each rule, the names (rules and markers) it can reach through references."""
    direct = {n: {r.name for r in refs_in(b)} for n, b in grammar.rules.items()}
    out: dict[str, set[str]] = {}
    for name in direct:
        seen: set[str] = set()
        stack = list(direct[name])
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(direct.get(n, ()))
        out[name] = seen
    return out

"""Grammars (SPEC §6): the grammar IR every source compiles to, the GBNF and Lark front
ends, the choice of engine for a grammar, and the pushdown engine for recursive ones."""

from tether.grammar.ir import Expr, Grammar, Ref

__all__ = ["Expr", "Grammar", "Ref"]

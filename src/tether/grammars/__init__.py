"""Ready-made grammars: constraints for languages users ask for by name."""

from __future__ import annotations

from importlib.resources import files

from tether.constraints import Grammar


def python(*, indent: str = "    ", max_depth: int = 16) -> Grammar:
    """Python 3 source (the statements and expressions real modules use) as a
    constraint: a Lark grammar whose layout — blocks indented by ``indent``, at most
    ``max_depth`` deep, free line breaks inside brackets — is resolved by
    :mod:`tether.grammar.layout`. Known differences from Python are listed at the top of
    ``python.lark``."""
    text = files("tether.grammars").joinpath("python.lark").read_text(encoding="utf-8")
    return Grammar(text, syntax="lark", indent=indent, max_depth=max_depth)


__all__ = ["python"]

"""The code domains for Python (docs/code-domains.md): what fusion adds to
:func:`tether.grammars.python` — the Imports hard domain (every name the code refers to
resolves), the Types hard domain (members, returns, assignments and calls of known
type), the ControlFlow and Semantics soft domains — and what they know of the code
around the generation.

* :mod:`tether.code.modules` — what importable modules hold, read without running them;
* :mod:`tether.code.scope_tracker` — the scope graph of Python text, byte by byte;
* :mod:`tether.code.value_types` — builtin types' members and what calls return;
* :mod:`tether.code.expected_types` — an expression's type where one is expected, and
  the signatures of the code's functions;
* :mod:`tether.code.name_masks` — the Imports and Types domains' exact masks over a
  vocabulary;
* :mod:`tether.code.control_flow` — the rule and prompt scorers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from tether.code.control_flow import ControlFlowScorer, prompt_identifiers, semantics_scorer
from tether.code.modules import ModuleInfo, available_modules, module_info
from tether.code.name_masks import ImportsDomain, NameDomain, NameTable, TypesDomain, name_table
from tether.code.scope_tracker import ScopeTracker
from tether.constraints import Grammar
from tether.fusion import ConstraintSpec, Domain, FusionConfig, HardDomain, Phase, Scorer
from tether.vocab import Vocabulary

_FENCED_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\r?\n(.*?)```", re.S)


def prompt_code(prompt: str) -> str:
    """The Python code a prompt holds: its fenced code blocks, or the whole prompt if it
    is a Python module (a HumanEval-style stub); ``""`` for prose."""
    blocks = _FENCED_BLOCK.findall(prompt)
    if blocks:
        return "\n".join(blocks)
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError, RecursionError):
        return ""
    if any(isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                             ast.AsyncFunctionDef, ast.ClassDef, ast.Assign))
           for node in tree.body):
        return prompt
    return ""


@dataclass(frozen=True)
class CodeContext:
    """What the generated code may rely on: ``source`` whose module-level names are in
    reach (the prompt's code, a ``--code-context`` file, a constraint spec's
    ``imports``), the only top-level modules ``import`` may name (``None``: any this
    interpreter has) and modules never to import."""

    source: str = ""
    available_modules: tuple[str, ...] | None = None
    forbidden_modules: tuple[str, ...] = ()

    @classmethod
    def of_spec(cls, spec: ConstraintSpec, source: str = "") -> CodeContext:
        """A constraint spec's ``imports``, ``available_modules`` and
        ``forbidden_imports``, with more ``source``."""
        return cls(spec.import_source + source, spec.available_modules,
                   spec.forbidden_imports)

    def with_source(self, source: str) -> CodeContext:
        """This context with more code in reach."""
        if not source:
            return self
        joined = f"{self.source}\n{source}" if self.source else source
        return CodeContext(joined, self.available_modules, self.forbidden_modules)


def python_domains(vocab: Vocabulary, config: FusionConfig,
                   context: CodeContext = CodeContext()) -> dict[Domain, HardDomain]:
    """The hard code domains ``config`` consults in the structured phase, for code the
    Python grammar constrains."""
    active = config.domains_for(Phase.STRUCTURED_OUTPUT)
    domains: dict[Domain, HardDomain] = {}
    if Domain.TYPES in active:
        domains[Domain.TYPES] = TypesDomain(vocab, context=context.source)
    if Domain.IMPORTS in active:
        domains[Domain.IMPORTS] = ImportsDomain(
            vocab, context=context.source, available_modules=context.available_modules,
            forbidden_modules=context.forbidden_modules)
    return domains


def python_scorers(vocab: Vocabulary, config: FusionConfig,
                   prompt: str = "") -> dict[Domain, Scorer]:
    """The soft code domains ``config`` consults: ControlFlow's rules, Semantics' preference
    for the identifiers ``prompt`` names."""
    active = config.domains_for(Phase.STRUCTURED_OUTPUT)
    scorers: dict[Domain, Scorer] = {}
    if Domain.CONTROL_FLOW in active:
        scorers[Domain.CONTROL_FLOW] = ControlFlowScorer(vocab)
    if Domain.SEMANTICS in active:
        semantics = semantics_scorer(vocab, prompt)
        if semantics is not None:
            scorers[Domain.SEMANTICS] = semantics
    return scorers


def language_grammar(language: str) -> Grammar:
    """The Syntax constraint of a constraint spec's ``language``."""
    from tether.grammars import python

    return python(fenced=language == "python-fenced")


__all__ = ["CodeContext", "ControlFlowScorer", "ImportsDomain", "ModuleInfo", "NameDomain",
           "NameTable", "ScopeTracker", "TypesDomain", "available_modules", "language_grammar",
           "module_info", "name_table", "prompt_code", "prompt_identifiers", "python_domains",
           "python_scorers", "semantics_scorer"]

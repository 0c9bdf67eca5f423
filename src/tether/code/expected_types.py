"""Expected types (docs/code-domains.md, "Types"): where the code says which type a value
must have, the type of the expression written there and whether it fits.

The places, as mypy checks them (in a function only when its signature has an
annotation, as mypy does by default; at module level always):

* ``return EXPR`` in a function annotated ``-> T`` (and a bare ``return``, which needs
  ``T`` to admit ``None``);
* ``name = EXPR`` where ``name``'s type is declared in this scope — an annotation
  (``name: T = …``, an annotated parameter) or *inferred* from the name's first
  assignment in the scope (``count = 0`` makes ``count`` an ``int``, as mypy infers it);
* a call of a function the code defines (undecorated, not a method): each argument
  against its parameter's annotation, and, when the call closes, the arguments against
  the parameters (none missing, none too many, no unknown keyword) — its
  :class:`Signature`, which also gives the call's type (the return annotation).

An :class:`ExprCheck` follows one expression lexeme by lexeme at its own bracket depth
(what is inside brackets belongs to a primary). Its type is known only when the
expression is one primary of known type (a literal, a display, a call of a known
builtin or method, a name of known type), perhaps with a sign; arithmetic (``+ - * / //
%``) on numbers of known type (the widest of them, at least ``int``; ``float`` with a
``/``, as Python's numeric tower and mypy have it) or on sequences (``xs + ys`` of one
type, ``s * n``, ``"%d" % n``); a tuple (a comma at its depth);
``not …``; or a comparison by ``in``/``is`` only (``bool``). Anything else is unknown and
constrains nothing. A primary can always be extended (``"abc"`` may still
become ``"abc".count("a")``, an ``int``), so no prefix of an expression is refused: the
refusal comes where the expression ends — the line break, ``;`` or comment of its
statement — which is exactly where no completion of the expected type remains; but a
comma at the expression's depth makes a tuple for good, refused at the comma where none
fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from tether.code.value_types import known

# What a known value may stand for: mypy's promotions (bool is an int, int a float, …).
_WIDER = {"bool": ("int", "float", "complex"), "int": ("float", "complex"),
          "float": ("complex",)}
_COMPARE_BOOL = frozenset({"in", "is"})  # always a bool (the others follow __eq__ etc.)
_COMPARE = frozenset({"==", "!=", "<", ">", "<=", ">="})
_SIGNS = frozenset({"-", "+", "~"})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%"})  # ("**" may give a float or Any)
_NUMBERS = ("bool", "int", "float", "complex")  # narrowest first
SEQUENCES = frozenset({"str", "bytes", "list", "tuple"})  # "+" joins them, "*" repeats
_ENDS_CHECK = frozenset({"=", ":=", ":"}) | frozenset(
    {"+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "**=", "//=", "<<=", ">>="})
_OPENERS = frozenset("([{")
VALUE_KEYWORDS = {"True": "bool", "False": "bool", "None": "None"}


_Frozen = TypeVar("_Frozen")


def with_fields(record: _Frozen, **changes: Any) -> _Frozen:
    """A copy of the frozen dataclass ``record`` with ``changes`` (what
    ``dataclasses.replace`` does, without re-running ``__init__``: the tracker makes
    such copies for every lexeme it reads, several times per mask)."""
    copy = object.__new__(type(record))
    copy.__dict__.update(record.__dict__)
    copy.__dict__.update(changes)
    return copy


@dataclass(frozen=True)
class Signature:
    """A function the code defines, as calls see it: its parameters in order — (name,
    kind, known annotated type) with kind ``"pos"``, ``"opt"`` (a default),
    ``"kw"``/``"kwopt"`` (keyword-only), ``"*"`` or ``"**"`` — and its return type."""

    params: tuple[tuple[str, str, str | None], ...]
    returns: str | None

    def positional_type(self, i: int) -> str | None:
        """The known type of the ``i``-th positional argument's parameter."""
        positional = [p for p in self.params if p[1] in ("pos", "opt")]
        if i < len(positional):
            return positional[i][2]
        return next((p[2] for p in self.params if p[1] == "*"), None)

    def keyword_type(self, name: str) -> str | None:
        """The known type of the parameter a keyword argument ``name`` sets."""
        for param, kind, declared in self.params:
            if param == name and kind not in ("*", "**"):
                return declared
        return next((p[2] for p in self.params if p[1] == "**"), None)

    def refuses(self, positional: int, keywords: frozenset[str]) -> bool:
        """Whether a call with ``positional`` arguments and these keyword arguments
        (no ``*``/``**`` unpacking) breaks the signature."""
        kinds = {p[1] for p in self.params}
        positional_names = [p[0] for p in self.params if p[1] in ("pos", "opt")]
        if positional > len(positional_names) and "*" not in kinds:
            return True  # too many positional arguments
        named = {p[0] for p in self.params if p[1] not in ("*", "**")}
        for keyword in keywords:
            if keyword in positional_names[:positional]:
                return True  # given twice
            if keyword not in named and "**" not in kinds:
                return True  # no such parameter
        for i, (name, kind, _) in enumerate(self.params):
            if kind == "pos" and i >= positional and name not in keywords:
                return True  # missing
            if kind == "kw" and name not in keywords:
                return True
        return False


@dataclass(frozen=True)
class Refused:
    """What a parameter of a builtin callable refuses, everywhere its overloads have it:
    known values (``"int"``, ``"type:str"``, ``"None"``) — see
    :mod:`tether.code.builtin_signatures`."""

    values: frozenset[str]


@dataclass(frozen=True)
class ExprCheck:
    """One expression being read where a type is expected.

    ``kind``: ``"return"``, ``"assign"`` (``expected`` declared), ``"arg"`` (a call's
    argument), ``"infer"`` (a first assignment: its type, if known, becomes ``name``'s)
    or ``"iterate"`` (a ``for`` statement's iterable: its element's type becomes the
    target ``name``'s). ``depth``: the bracket depth the expression is at. The rest
    summarises what was read at that depth."""

    kind: str
    expected: str | Signature | Refused | None
    name: str | None
    depth: int
    started: bool = False  # an operand was read
    operand_next: bool = True  # the next lexeme starts an operand (a sign is unary)
    sign: bool = False  # a leading unary sign
    leading_not: bool = False
    ops: frozenset[str] = frozenset()  # "comma", "compare", "compare_bool", "opaque", "arith"
    arith: str | None = None  # the type of its arithmetic so far ("?": unknown)
    arith_op: str | None = None  # the arithmetic operator waiting for its right operand


def step(check: ExprCheck, lexeme: str, depth: int, value: str | None = None
         ) -> ExprCheck | None:
    """``check`` after a lexeme (``"name"``, ``"num"``, ``"str"``, a keyword, an
    operator or bracket) read at bracket ``depth``, ``value`` the type of the primary it
    follows; ``None``: the statement turned out not to be the simple one the check is
    for (``a = b = 1``, ``x: …``)."""
    if depth != check.depth:
        return check
    if lexeme in ("name", "num", "str") or lexeme in VALUE_KEYWORDS or lexeme in _OPENERS:
        if not check.operand_next:  # a call, a subscript, "a" "b": the same primary
            return check
        return with_fields(check, started=True, operand_next=False)
    if lexeme in (".", ";"):  # a member; the statement's end (read by the tracker)
        return check
    if lexeme in _ENDS_CHECK:
        return None
    if lexeme == ",":
        return with_fields(check, ops=check.ops | {"comma"}, operand_next=True)
    if lexeme == "not":
        if check.operand_next and not check.started:
            return with_fields(check, leading_not=True)
        if check.operand_next:
            return check  # "a is not b", "x and not y"
        return with_fields(check, ops=check.ops | {"compare_bool"}, operand_next=True)  # not in
    if lexeme in _COMPARE_BOOL:
        return with_fields(check, ops=check.ops | {"compare_bool"}, operand_next=True)
    if lexeme in _COMPARE:
        return with_fields(check, ops=check.ops | {"compare"}, operand_next=True)
    if lexeme in _SIGNS and check.operand_next:
        if not check.started and not check.ops:
            return with_fields(check, sign=True)
        return check
    if lexeme in _ARITHMETIC:
        return with_fields(check, ops=check.ops | {"arith"}, operand_next=True,
                       arith=_arithmetic(check.arith, check.arith_op, value), arith_op=lexeme)
    return with_fields(check, ops=check.ops | {"opaque"}, operand_next=True)


def _arithmetic(left: str | None, op: str | None, value: str | None) -> str:
    """The type of ``left op value`` (``left`` ``None``: ``value`` is the first operand;
    "?": unknown). Read left to right, which for the types known gives what precedence
    gives, or "?": numbers give the widest (a float with "/"); a sequence plus one of its
    type, or times an int, is one; a string's "%" formats."""
    if left is None:
        return value if value in _NUMBERS or value in SEQUENCES else "?"
    if left == "?" or value is None:
        return "?"
    if left in _NUMBERS and value in _NUMBERS:
        wider = max(left, value, key=_NUMBERS.index)
        return max(wider, "float", key=_NUMBERS.index) if op == "/" else wider
    if op == "+" and left == value and left in SEQUENCES:
        return left
    if op == "*" and {left, value} & SEQUENCES and {left, value} & {"int", "bool"}:
        return left if left in SEQUENCES else value
    if op == "%" and left in ("str", "bytes"):
        return left
    return "?"


def expression_type(check: ExprCheck, value: str | None) -> str | None:
    """The type of the expression ``check`` read, ``value`` being the type of the last
    primary (``None``: unknown)."""
    if not check.started:
        return None
    ops = check.ops
    if "comma" in ops:
        return "tuple"
    if "opaque" in ops:
        return None
    if check.leading_not:
        return "bool"
    if "compare" in ops:
        return None
    if "compare_bool" in ops:
        return "bool"
    if "arith" in ops:
        arith = _arithmetic(check.arith, check.arith_op, value)
        return None if arith == "?" else "int" if arith == "bool" else arith
    if check.sign:
        return "int" if value == "bool" else value if value in ("int", "float", "complex") \
            else None
    return value if known(value) or value == "None" else None


def fits(expected: str | Signature | Refused, actual: str) -> bool:
    """Whether a value of the known type ``actual`` (a builtin type's name, a class
    ``"type:str"``, or ``"None"``) may stand where ``expected`` is declared (the same,
    or a function's name: no value of a builtin type is one), or a builtin's parameter
    does not refuse it."""
    if isinstance(expected, Refused):
        return actual not in expected.values
    return actual == expected or expected in _WIDER.get(actual, ())


def tuple_refused(check: ExprCheck) -> bool:
    """Whether ``check`` just read a comma at its depth where a tuple does not fit: the
    expression is a tuple whatever follows (``return a, b`` in ``-> int``), refused
    there rather than where it ends."""
    return (check.kind in ("return", "assign") and check.started and "comma" in check.ops
            and violates(check, None))


def violates(check: ExprCheck, value: str | None) -> bool:
    """Whether the expression ``check`` read, now ended, breaks its expected type: a
    known type that does not fit, or no value where a return needs one."""
    expected = check.expected
    if expected is None or check.kind == "infer":
        return False
    if not check.started:
        return check.kind == "return"  # a bare "return" where "-> T" wants a T
    actual = expression_type(check, value)
    return actual is not None and not fits(expected, actual)

"""`ScopeTracker`: Python source read byte by byte, keeping the scope graph the Imports
domain checks names against (docs/code-domains.md, "Imports").

The tracker is a small incremental lexer (names, numbers, strings, comments, operators,
brackets, logical lines and their indentation) with just enough of the statement
structure to give every identifier a *role* when it starts:

* a **binding** (``def``/``class`` names, parameters, ``for``/``with``/``except`` and
  comprehension targets, ``as`` names, ``import``/``from`` names, ``global``/``nonlocal``,
  lambda parameters): any name; it is bound when it ends;
* a **reference** in code that runs now (module and class level, default values,
  decorators, annotations): it must resolve — builtins, names bound so far, comprehension
  targets and lambda parameters in reach;
* a **deferred reference** (a function or lambda body runs later): a name that does not
  resolve yet is an *obligation* of the function, met by a binding anywhere in it or in
  an enclosing function, else passed to the module, which must bind it before the end;
* a reference inside a bracket that may still turn out to be a comprehension
  (``[x * 2 for x in xs]``): an unresolved name *waits* on the bracket, met by its
  ``for`` targets by the time it closes;
* **undecided** until the next lexeme: a statement's target list (``x = …`` binds,
  ``x(…)`` refers), a call's keyword argument (``f(key=…)``), a walrus target
  (``(n := …)``, ``if n := …``);
* an **attribute of a known module** (``math.`` then only ``math``'s attributes), a
  **module name** after ``import``/``from`` (only modules this interpreter can find).

A name that breaks its role — a reference that cannot resolve, a closing bracket or a
statement end that leaves a name unresolved, the end of the program with an obligation
unmet — is a *violation*; :attr:`ScopeTracker.violations` counts them. The end of the
program is the end of the text or a closing Markdown fence (```` ``` ```` at the start of
a line); an opening fence line at the very start is skipped. An f-string's replacement
fields (``f"{total / n:.2f}"``, nested ones in a format spec too) are read as code in a
bracket of their own; the string around them is text.

Known limits (never a false "no" for them; documented): ``match``/``case``/``type``
statements and star-imports of unknown modules constrain nothing on their line or
scope, attributes of values other than modules are not checked (that is the Types
domain's job).
"""

from __future__ import annotations

import ast
import builtins
import keyword
from dataclasses import dataclass

from tether.code.builtin_signatures import call_signature
from tether.code.expected_types import (
    SEQUENCES,
    VALUE_KEYWORDS,
    ExprCheck,
    Refused,
    Signature,
    expression_type,
    step,
    tuple_refused,
    violates,
    with_fields,
)
from tether.code.modules import available_modules, module_info
from tether.code.value_types import (
    KNOWN,
    annotation_type,
    builtin_callee,
    call_result,
    known,
    members,
    operator_methods,
)

KEYWORDS = frozenset(keyword.kwlist)
SOFT_KEYWORDS = frozenset(keyword.softkwlist)
BUILTIN_NAMES = frozenset(dir(builtins)) | frozenset({
    "__name__", "__file__", "__doc__", "__builtins__", "__spec__", "__loader__",
    "__package__", "__path__", "__annotations__", "__qualname__", "__module__",
    "__class__", "__debug__", "__dict__"})

_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | \
    frozenset(range(0x80, 0x100))
_DIGITS = frozenset(b"0123456789")
_OPERATORS = frozenset({
    "+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "(", ")", "[", "]", "{",
    "}", ",", ":", ".", ";", "=", "!", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
    "->", ":=", "+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "**=", "//=",
    "<<=", ">>=", "...", "..", "`"})
_EXTENDABLE = frozenset(op[:k] for op in _OPERATORS for k in range(1, len(op)))
_AUGMENTED = frozenset({"+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "**=",
                        "//=", "<<=", ">>="})
# Binary operators and the method a left operand must have for them (a known builtin
# type without it is mypy's "unsupported operand"), and the lexemes that end a left
# operand this checks (and a call: "(" after an instance of a builtin type): a name, a
# closing bracket, a literal.
_OPERATOR_METHODS = {
    "+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__",
    "//": "__floordiv__", "%": "__mod__", "**": "__pow__", "@": "__matmul__",
    "<<": "__lshift__", ">>": "__rshift__", "&": "__and__", "|": "__or__", "^": "__xor__"}
_OPERAND_ENDS = frozenset({"name", ")", "]", "}", "num", "str"})
# What may follow a name in a target list without making it a reference.
_TARGET_CONTINUE = frozenset({",", ")", "]"})
_TARGET_LEXEMES = frozenset({",", "=", ")", "]", "(", "[", ".", "*"})
_STATEMENT_KEYWORDS = frozenset({
    "def", "class", "import", "from", "for", "with", "except", "if", "elif", "while",
    "global", "nonlocal", "del", "return", "raise", "assert", "try", "else", "finally",
    "pass", "break", "continue"})
_FIRST_CLAUSE = {"def": "name", "class": "name", "import": "path", "from": "module",
                 "for": "target"}
# The previous lexemes the tracker tells apart (any other is just "other").
_SLICED = SEQUENCES | {"range"}  # x[a:b] is an x
# What an item of x is: x[i], and the target of ``for … in x``.
_ITEM = {"str": "str", "bytes": "int", "range": "int"}


def _bracket_value(br: Bracket, prev: str) -> str | None:
    """The type of the value a closing bracket ends: a call's result, a string's
    subscript, a display."""
    if br.kind == "call":
        return call_result(br.callee)
    if br.subscript:  # a slice keeps a sequence's type; an item of a str is a str
        if br.comma:
            return None  # a tuple of indices ("r[:2, :2]": an error for a range)
        if br.colon:
            return br.callee if br.callee in _SLICED else None
        return _ITEM.get(br.callee)  # type: ignore[arg-type]
    if br.kind != "group":
        return None
    if br.char == "[":
        return "list"
    if br.char == "{":
        return "dict" if br.colon or prev == "{" else "set"
    return "tuple" if br.comma and not br.comp else None


def _number_type(literal: bytes) -> str:
    low = literal.lower().replace(b"_", b"")  # (digit separators)
    if low.endswith(b"j"):
        return "complex"
    if low.startswith((b"0x", b"0b", b"0o")):
        return "int"
    return "float" if b"." in low or b"e" in low else "int"


_SIGNIFICANT_PREV = frozenset({
    ".", "nl", "=", ",", "(", "[", "{", ":", ";", "*", "**", "/", "name", ")", "]", "str",
    "lambda", "import", "from", "if", "elif", "while", "async", "for", "in", "as"})
_HEADERS = frozenset({"def", "class", "for", "while", "if", "elif", "else", "try",
                      "except", "finally", "with"})
_FREE_LINES = frozenset({"match", "case", "type"})

# Modes of the lexer.
CODE, STRING, COMMENT, FENCE_LINE, DONE = range(5)

# Roles of an identifier (the first item of a role tuple).
FREE = "free"          # nothing to check
BIND = "bind"          # a binding (second item: where it binds)
REF = "ref"            # a reference in code that runs now: must resolve
LATER = "later"        # a reference in a function or lambda body
COMP = "comp"          # a reference that may wait on a comprehension
PENDING = "pending"    # undecided until the next lexeme (target, element, cond)
ATTR = "attr"          # an attribute of a known module (second item: its name)
MODULE = "module"      # a top-level module name in an import
MEMBER = "member"      # a member of a value of a known type (second item: the type)

Role = tuple[str, str]


def _string_prefixes() -> frozenset[bytes]:
    out = set()
    for base in ("r", "u", "b", "f", "br", "rb", "fr", "rf"):
        variants = [""]
        for ch in base:
            variants = [v + c for v in variants for c in (ch, ch.upper())]
        out.update(v.encode() for v in variants)
    return frozenset(out)


STRING_PREFIXES = _string_prefixes()


@dataclass(frozen=True)
class Scope:
    """A module, class or function scope: what it binds (``modules``: the bindings that
    are modules, by name) and, for functions and the module, the names its code uses
    that nothing bound yet (obligations)."""

    kind: str  # "module", "class" or "function"
    indent: int  # column of the statement that opened it (-1 for the module)
    bound: frozenset[str] = frozenset()
    modules: tuple[tuple[str, str], ...] = ()
    obligations: frozenset[str] = frozenset()
    inherited: frozenset[str] = frozenset()  # obligations of nested functions and lambdas
    referenced: frozenset[str] = frozenset()  # names its code used while it had not bound them
    star: bool = False  # a star-import of unknown names: every name resolves
    is_async: bool = False  # an "async def" body
    # names of a known declared or inferred type (a Signature for a function)
    types: tuple[tuple[str, str | Signature], ...] = ()
    returns: str | None = None  # a function's declared return type, when known
    typed: bool = False  # whose code mypy checks: the module, an annotated function
    # def/class names defined (undecorated) in the block being read, with their column
    defined: tuple[tuple[str, int], ...] = ()
    # a checked, undecorated function declared to return a known type whose body has
    # read no return, raise or yield yet: ending it here is mypy's missing return
    owes_return: bool = False
    body_col: int = -1  # column of the first line of its body (-1: none read yet)


@dataclass(frozen=True)
class Field:
    """An f-string replacement field being read: the string it is in (its quote, whether
    triple), the bracket depth it opened at, whether it sits in another field's spec, and
    the statement state set aside while its expression is read."""

    quote: int
    triple: bool
    depth: int
    in_spec: bool
    saved: tuple


@dataclass(frozen=True)
class Header:
    """A ``def``/``class`` header being read."""

    kind: str
    indent: int
    is_async: bool
    decorated: bool
    params: frozenset[str] = frozenset()
    types: tuple[tuple[str, str], ...] = ()  # annotated parameters of a known type
    returns: str | None = None
    typed: bool = False  # an annotation was read (mypy checks the body)
    name: str | None = None
    order: tuple[tuple[str, str], ...] = ()  # parameters and their kinds (see Signature)
    keyword_only: bool = False  # past "*" or "*args"


@dataclass(frozen=True)
class Bracket:
    """An open bracket: its kind (``call``, ``params``, ``group``, ``import``), whether a
    comma at its level or a ``for`` (a comprehension) was seen, comprehension targets
    bound in it, names waiting on it, and whether it may be a statement's target."""

    char: str
    kind: str
    comma: bool = False
    comp: bool = False
    in_target: bool = False
    bound: frozenset[str] = frozenset()
    # targets of the clause whose iterable is being read: bound once it ends (the next
    # "for" or "if" at its level, or the close), not visible in it
    clause_bound: frozenset[str] = frozenset()
    waiting: frozenset[str] = frozenset()
    target: bool = False
    targets_from: int = 0  # statement targets collected before it opened
    used: frozenset[str] = frozenset()  # names used in it, a "for" of it may yet bind
    callee: object = None  # a call's callee, a subscript's value (their types)
    subscript: bool = False
    colon: bool = False  # a ":" at its level (a dict display, a subscript's slice)
    # A call of a function the code defines (callee: its Signature) or of a builtin the
    # stub types (builtin_signatures.call_signature): the positional and
    # keyword arguments read, whether one is unpacked (*xs, **kw: not followed), whether
    # the argument being read is a keyword's, and its check.
    args: int = 0
    keywords: frozenset[str] = frozenset()
    unpacked: bool = False
    keyword: bool = False
    arg: ExprCheck | None = None

    @property
    def targets(self) -> frozenset[str]:
        """The comprehension targets bound in it by the time it closes."""
        return self.bound | self.clause_bound

    def clause_ended(self) -> Bracket:
        """The bracket once the iterable being read ends: its clause's targets bound."""
        if not self.clause_bound:
            return self
        return with_fields(self, bound=self.targets, clause_bound=frozenset())

    @property
    def comp_capable(self) -> bool:
        """Whether a ``for`` may (still) come in it: a comprehension, or no comma yet."""
        return self.comp or not self.comma

    @property
    def binds_later(self) -> bool:
        """Whether a name used in it now may be bound by a ``for`` still to come in it:
        it is in the element of what may yet be a comprehension (a name in a clause
        — an iterable, a condition — is read before the clauses after it bind)."""
        return not self.comp and not self.comma


@dataclass(frozen=True)
class Lambda:
    depth: int
    params: frozenset[str] = frozenset()
    body: bool = False


_CLOSERS = {")": "(", "]": "[", "}": "{"}


class ScopeTracker:
    """The scope graph of the Python text read so far (see the module docstring).

    ``feed`` reads bytes; ``copy`` is cheap (the state is a few fields of immutable
    values); ``at_end_violations`` says how many violations ending the program here
    would add (0: the program may end). ``modules``: the top-level modules ``import``
    may name (default: every module this interpreter can import)."""

    def __init__(self, modules: frozenset[str] | None = None) -> None:
        self.modules = available_modules() if modules is None else modules
        self.mode = CODE
        self.quote = 0
        self.triple = False
        self.fstring = False  # the string being read is an f-string
        self.brace = False  # its "{" was just read: a field, or "{{"
        self.spec = False  # reading a field's conversion or format spec (string text)
        self.fields: tuple[Field, ...] = ()  # f-string replacement fields open, innermost last
        self.escape = False
        self.quote_run = 0  # quotes seen in a row (opening: to tell "" from """)
        self.opening = False  # reading the quotes that open a string
        self.run = b""
        self.run_role: Role = (FREE, "")
        self.run_num = False
        self.op = ""
        self.line_start = True
        self.col = 0
        self.backslash = False
        self.prev = "nl"
        self.chain: str | None = None  # module the last name (then ".") refers to
        self.pending: tuple[str, str] | None = None  # (name, kind) awaiting a decider
        self.targets: tuple[str, ...] = ()  # statement targets awaiting "="
        self.assigned: frozenset[str] = frozenset()  # first bound by this statement
        self.seg_target = True
        self.first_lexeme = True  # nothing read yet in this simple statement
        self.brackets: tuple[Bracket, ...] = ()
        self.stmt: str | None = None
        self.clause = ""
        self.line_free = False
        self.scopes: tuple[Scope, ...] = (Scope("module", -1, typed=True),)
        self.header: Header | None = None
        self.decorated = False  # decorator lines were read for the coming statement
        self.check: ExprCheck | None = None  # an expression that must have a known type
        self.loop_target: str | None = None  # a "for" statement's target, a single name
        self.last_name: str | None = None  # the name the text ends with, if it does
        self.starred = False  # the "*" the text ends with starts an item ("a, *b = …")
        self.called: frozenset[str] = frozenset()  # names the code calls (name "(")
        self.value_type: str | None = None  # the type of the value the text ends with
        self.annotation: tuple[str, ...] | None = None  # an annotation being read
        self.annotated: str | None = None  # the name it annotates
        self.annotation_kind = ""  # "param", "assign" or "return"
        self.annotation_depth = 0  # the bracket depth its expression ends at
        self.string_type = "str"  # the type of the string literal being read
        self.type_violations = 0
        self.lambdas: tuple[Lambda, ...] = ()
        self.path: tuple[str, ...] = ()  # dotted module path of an import being read
        self.alias_of: str | None = None  # the module an "as" name will be bound to
        self.from_module: str | None = None
        self.from_name: str | None = None  # a "from … import" name awaiting "as" or not
        self.relative = False  # a relative "from" import
        self.indent = 0
        self.violations = 0
        self.fence_start = True  # nothing read yet: an opening fence line may come
        self._visible: tuple[frozenset[str] | None] | None = None  # visible_names, cached
        self._owed: list[str] | None = None  # owed_names, cached (asked several times a step)
        self._comp_owed: list[str] | None = None  # comprehension_owed, likewise

    def adopt_module_names(self, source: str) -> None:
        """Put the module-level names ``source`` binds (its imports, functions, classes,
        assignments) in reach, as if it ran before the text. Its functions and classes
        with a body are defined (the text may not define them again); those with only a
        docstring, ``pass`` or ``...`` are stubs the text is to write."""
        other = ScopeTracker()
        other.feed(source.encode())
        theirs = other.scopes[0]
        mine = self.scopes[0]
        self._visible = self._owed = self._comp_owed = None
        self.scopes = (with_fields(mine, bound=mine.bound | theirs.bound,
                               modules=mine.modules + theirs.modules,
                               star=mine.star or theirs.star,
                               types=mine.types + theirs.types,
                               defined=mine.defined + tuple(
                                   (name, 0) for name in _complete_definitions(source))),
                       ) + self.scopes[1:]

    # -- copying ------------------------------------------------------------------------
    def copy(self) -> ScopeTracker:
        twin = object.__new__(ScopeTracker)
        twin.__dict__.update(self.__dict__)
        return twin

    # -- reading ------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Read ``data`` (any split of the text into pieces gives the same state)."""
        self._visible = self._owed = self._comp_owed = None
        for b in data:
            self._byte(b)

    def _byte(self, b: int) -> None:
        mode = self.mode
        if mode == DONE:
            return
        if self.fence_start:
            self.fence_start = False
            if b == 0x60:  # "`": the opening fence line, skipped
                self.mode = FENCE_LINE
                return
        if mode == FENCE_LINE:
            if b == 0x0A:
                self.mode = CODE
            return
        if mode == COMMENT:
            if b == 0x0A:
                self.mode = CODE
                self._code_byte(b)
            return
        if mode == STRING:
            self._string_byte(b)
            return
        self._code_byte(b)

    def _string_byte(self, b: int) -> None:
        q = self.quote
        if self.opening:  # after one or two opening quotes
            if b == q:
                self.quote_run += 1
                if self.quote_run == 3:
                    self.triple, self.opening, self.quote_run = True, False, 0
                return
            if self.quote_run == 2:  # "" : an empty string, closed
                self.opening, self.quote_run = False, 0
                self._string_closed()
                self._code_byte(b)
                return
            self.opening, self.quote_run = False, 0
        if self.brace:
            self.brace = False
            if b == 0x7B:
                return  # "{{": a brace
            self._open_field()  # a replacement field starts
            self._code_byte(b)
            return
        if self.escape:
            self.escape = False
            if not (self.fstring and b in (0x7B, 0x7D)):  # a brace is a brace after "\"
                return
        if b == 0x5C:  # backslash (escapes the next byte, raw strings included)
            self.escape = True
            self.quote_run = 0
            return
        if self.fstring and b == 0x7B:  # "{"
            if self.spec:
                self._open_field()  # a field nested in a format spec
            else:
                self.brace = True
            return
        if self.spec and b == 0x7D:  # "}" ends the spec, and its field
            self._close_field()
            return
        if b == q:
            if not self.triple:
                self._string_closed()
                return
            self.quote_run += 1
            if self.quote_run == 3:
                self._string_closed()
            return
        self.quote_run = 0
        if b == 0x0A and not self.triple:  # an unterminated string: the line ends it
            self._string_closed()
            self._code_byte(b)

    # -- f-string replacement fields ---------------------------------------------------
    def _open_field(self) -> None:
        """``{`` in an f-string: its expression is read as code in a bracket of its own
        (names in it are references), the statement around it set aside until it ends."""
        self.fields += (Field(self.quote, self.triple, len(self.brackets), self.spec, (
            self.prev, self.pending, self.targets, self.check, self.first_lexeme,
            self.seg_target, self.chain, self.value_type, self.last_name,
            self.string_type)),)
        self.mode, self.spec = CODE, False
        self.brackets += (Bracket("(", "group"),)
        self.prev, self.pending, self.targets, self.check = "(", None, (), None
        self.first_lexeme = self.seg_target = False
        self.chain = self.value_type = self.last_name = None

    def _field_byte(self, b: int) -> bool:
        """A byte of code at the level of the innermost field: ``}`` ends it, ``:`` or a
        ``!`` conversion starts its spec (True: the byte was taken)."""
        if self.op == "=" and b in (0x7D, 0x3A, 0x21):
            self.op = ""  # "{x=}": the expression shown before its value
        if self.op == "!" and b != 0x3D:  # "!r": a conversion, not "!="
            self.op = ""
            self._end_expression()
            self._string_byte(b)
            return True
        if b not in (0x7D, 0x3A) or self.op:
            return False
        self._end_run()
        self._flush_op()
        self._end_expression()
        if b == 0x7D:
            self._close_field()
        return True

    def _end_expression(self) -> None:
        """The field's expression ends: its bracket closes (waiting names are passed on),
        the statement around it comes back, and the string goes on (a spec first)."""
        if self.pending is not None:
            self._decide(")")
        self._close_bracket()
        field = self.fields[-1]
        (self.prev, self.pending, self.targets, self.check, self.first_lexeme,
         self.seg_target, self.chain, self.value_type, self.last_name,
         self.string_type) = field.saved
        self.mode, self.quote, self.triple, self.fstring = STRING, field.quote, field.triple, True
        self.spec = True

    def _close_field(self) -> None:
        self.spec = self.fields[-1].in_spec
        self.fields = self.fields[:-1]

    def _string_closed(self) -> None:
        self.mode, self.quote_run, self.triple, self.escape = CODE, 0, False, False
        self.value_type = self.string_type

    def _code_byte(self, b: int) -> None:
        if self.fields and len(self.brackets) == self.fields[-1].depth + 1 and \
                self._field_byte(b):
            return
        if b in _WORD:
            if self.op:
                self._flush_op()
            if not self.run:
                self._begin_significant()
                if self.mode == DONE:
                    return
                self.run_num = b in _DIGITS
                self.run_role = (FREE, "") if self.run_num else self._role_for_name()
            self.run += bytes((b,))
            return
        if self.run_num and self.run:
            if b == 0x2E and b"." not in self.run and not self.run.lower().startswith(
                    (b"0x", b"0b", b"0o")):
                self.run += b"."
                return
            if b in (0x2B, 0x2D) and self.run[-1:] in (b"e", b"E") and \
                    not self.run.lower().startswith(b"0x"):
                self.run += bytes((b,))
                return
        if b == 0x60 and self.line_start and not self.brackets and not self.backslash:
            self.end_program()  # a closing fence
            return
        if b in (0x27, 0x22):  # a quote
            self.string_type = "str"
            self.fstring = False
            if self.run and not self.run_num and self.run in STRING_PREFIXES:
                if b"b" in self.run.lower():
                    self.string_type = "bytes"
                self.fstring = b"f" in self.run.lower()
                self.run = b""  # a string prefix, not a name
            else:
                self._end_run()
                self._flush_op()
                self._begin_significant()
                if self.mode == DONE:
                    return
            self._lexeme("str")
            self.mode, self.quote, self.opening, self.quote_run = STRING, b, True, 1
            self.triple = self.escape = False
            return
        self._end_run()
        if b == 0x23:  # "#"
            self._flush_op()
            if not self.brackets and not self.backslash:
                # Only the line break can follow: what it decides is decided now (the
                # expression being checked has ended: a misfit is refused at the "#").
                if self.pending is not None:
                    self._decide("nl")
                self._targets_referred()
                self._end_check(self.value_type)
            self.mode = COMMENT
            return
        if b == 0x0A or b == 0x0D:
            self._flush_op()
            if b == 0x0D:
                return
            if self.brackets or self.backslash:
                self.backslash = False
                return
            if not self.line_start:
                self._logical_line_end()
            self.line_start, self.col = True, 0
            return
        if b in (0x20, 0x09, 0x0C):
            self._flush_op()
            if self.line_start:
                self.col = (self.col // 8 + 1) * 8 if b == 0x09 else self.col + 1
            return
        if b == 0x5C:  # a line continuation
            self._flush_op()
            self._begin_significant()
            self.backslash = True
            return
        ch = chr(b)
        if self.op and self.op + ch in _OPERATORS:
            self.op += ch
        else:
            self._flush_op()
            self._begin_significant()
            self.op = ch
            if self.pending is not None and ch not in "=:" and ch in _EXTENDABLE and \
                    self.pending[1] != "soft":
                # "+" or "+=", "<" or "<=": a reference either way — decided now, so a
                # mask can refuse the operator itself.
                self._decide(ch)
            if ch in _EXTENDABLE and (ch not in _TARGET_LEXEMES or ch == "*" and self.prev in (
                    "name", ")", "]")):
                self._targets_referred()  # likewise for a target list ("[a] +", "[a] *")
        if self.op not in _EXTENDABLE:  # ")" or "+=": nothing can make it longer
            self._flush_op()

    def _begin_significant(self) -> None:
        """A significant byte: at the start of a logical line, the indentation closes
        scopes (or, with a backtick at column 0, the closing fence ends the program)."""
        if not self.line_start:
            return
        self.line_start = False
        if self.backslash:
            return
        col = self.col
        self._close_scopes(col)
        self.indent = col
        s = self.scopes[-1]
        if s.body_col < 0 and s.kind != "module" and col > s.indent:
            self._set_scope(len(self.scopes) - 1, with_fields(s, body_col=col))

    def _flush_op(self) -> None:
        op = self.op
        if not op:
            return
        self.op = ""
        if op == "..":
            self._lexeme(".")
            self._lexeme(".")
            return
        self._lexeme(op)

    # -- names ------------------------------------------------------------------------
    def _end_run(self) -> None:
        run = self.run
        if not run:
            return
        self.run = b""
        if self.run_num:
            self._lexeme("num")
            self.value_type = _number_type(run)
            return
        name = run.decode("utf-8", "replace")
        if name in KEYWORDS:
            self._keyword(name)
            return
        self._name(name, self.run_role)

    def _role_for_name(self) -> Role:
        """The role of an identifier starting here."""
        if self.line_free:
            return (BIND, "scope")  # "case" patterns bind their capture names
        prev = self.prev
        stmt = self.stmt
        if prev == ".":
            if stmt in ("import", "from") and self.clause in ("path", "module"):
                return (FREE, "")
            chain = self.chain
            if chain is not None:
                info = module_info(chain)
                if info is not None and info.attributes is not None:
                    return (ATTR, chain)
            if known(self.value_type):
                return (MEMBER, self.value_type)
            return (FREE, "")
        if stmt == "import":
            if self.clause == "as":
                return (BIND, "import")
            return (MODULE, "") if prev in ("import", ",") else (FREE, "")
        if stmt == "from":
            if self.clause == "module":
                return (MODULE, "") if prev == "from" else (FREE, "")
            if self.clause == "as":
                return (BIND, "import")
            info = module_info(self.from_module) if self.from_module else None
            if info is not None and info.attributes is not None:
                return (ATTR, self.from_module or "")
            return (BIND, "from")
        if stmt in ("global", "nonlocal"):
            return (BIND, "scope")
        if stmt in ("def", "class") and self.clause == "name":
            return (BIND, stmt)
        if self.lambdas and not self.lambdas[-1].body and \
                self.lambdas[-1].depth == len(self.brackets) and prev in ("lambda", ",", "*",
                                                                          "**"):
            return (BIND, "lambda")
        top = self.brackets[-1] if self.brackets else None
        if top is not None and top.kind == "params" and self.clause == "params" and \
                prev in ("(", ",", "*", "**", "/"):
            return (BIND, "param")
        if top is not None and top.in_target:
            return (BIND, "comp")
        if stmt == "for" and self.clause == "target":
            return (BIND, "scope")
        if stmt in ("with", "except") and self.clause == "as":
            return (BIND, "scope")
        item_start = prev == "*" and self.starred  # "*b" in "a, *b = …", "[*xs, 1]"
        if top is not None and (prev in ("(", "[", "{", ",") or item_start):
            if top.target:
                return (PENDING, "target")
            return (PENDING, "element")
        if top is None:
            if stmt is None and self.seg_target and (self.first_lexeme or prev in ("=", ",") or
                                                     item_start):
                return (PENDING, "target")
            if stmt in ("if", "elif", "while") and prev == stmt:
                return (PENDING, "cond")
        if self._deferred():
            return (LATER, "")
        if any(br.binds_later for br in self.brackets):
            return (COMP, "")
        return (REF, "")

    def _name(self, name: str, role: Role) -> None:
        kind = role[0]
        prev_dot = self.prev == "."
        if self.first_lexeme:
            self.decorated = False
        self._step_checks("name")
        if self.pending is not None:
            self._decide(name)
            if self.line_free:
                self._bind(name)  # a "case" line's capture patterns bind names
                self._after_name(name, role, prev_dot)
                return
        if kind == REF:
            if not self.resolves(name) or name in self.assigned:
                self.violations += 1
        elif kind == ATTR:
            info = module_info(role[1])
            if info is not None and not info.has(name):
                self.violations += 1
        elif kind == MODULE:
            if name not in self.modules:
                self.violations += 1
        elif kind == MEMBER:
            known = members(role[1])
            if known is not None and name not in known:
                self.type_violations += 1
        elif kind in (LATER, COMP):
            self._refer(name)
        elif kind == PENDING:
            if self.stmt is None and self.first_lexeme and name in _FREE_LINES:
                self.pending = (name, "soft")
            elif role[1] == "target" and self.first_lexeme:
                self.pending = (name, "first")  # may be annotated: "x: int"
            else:
                self.pending = (name, role[1])
        elif kind == BIND and role[1] != "from":
            self._bind_as(name, role[1])
        if self.stmt == "for" and self.clause == "target":
            self.loop_target = name if self.prev == "for" else None
        self._after_name(name, role, prev_dot)

    def _after_name(self, name: str, role: Role, prev_dot: bool) -> None:
        """Import paths, the module a following "." would reach, the value's type, the
        lexeme."""
        self.value_type = self.value_of(name, prev_dot)
        self.last_name = None if prev_dot else name
        if self.annotation is not None:
            self.annotation += (name,)
        stmt, clause = self.stmt, self.clause
        if stmt == "import" and clause == "path":
            self.path = (self.path + (name,)) if prev_dot else (name,)
        elif stmt == "from" and clause == "module":
            self.path += (name,)
        elif stmt == "from" and clause == "names":
            self.from_name = name
        if prev_dot:
            chain = self.chain
            info = module_info(chain) if chain is not None else None
            self.chain = info.submodules.get(name) if info is not None else None
        else:
            self.chain = self._module_of(name)
        self.prev = "name"
        self.first_lexeme = False

    def value_of(self, name: str, prev_dot: bool) -> str | None:
        """The type of the value a name closing here gives (``None``: unknown): a member
        of a value of known type (``"str.upper"``), a declared name, a builtin."""
        if prev_dot:
            owner = self.value_type
            if known(owner) and name in (members(owner) or ()):
                return f"{owner}.{name}"  # ("type:str.join" read off the class)
            return None
        declared = self.declared_type(name)
        if declared is not None or self._binds(name):
            return declared
        return builtin_callee(name)

    def operand_known(self) -> bool:
        """Whether the text ends with an operand whose builtin type is known (a name or a
        closing bracket): a binary operator next is checked against it."""
        return self.prev in _OPERAND_ENDS and known(self.value_type)

    def operator_doomed(self) -> bool:
        """Whether the operator being read (``+`` may still become ``+=``) follows an
        operand of known type that supports none of the operators it may end as — an
        unsupported operand however it ends, a violation already (counted by the Types
        domain, so the token that writes it is refused, not every token after it)."""
        op = self.op
        if not op or self.mode != CODE or not self.operand_known():
            return False
        have = operator_methods(self.value_type) or frozenset()  # type: ignore[arg-type]
        return all(_unsupported(ended, have, self.stmt) for ended in _OPERATORS
                   if ended.startswith(op))

    def declared_type(self, name: str) -> str | None:
        """The known type ``name``'s annotation declares, where it is bound here."""
        if any(name in local for local in self._local_bindings()):
            return None
        for s in self._scopes_in_reach():
            for bound, declared in s.types:
                if bound == name:
                    return declared
            if name in s.bound:
                return None
        return None

    def _binds(self, name: str) -> bool:
        """Whether code here binds ``name`` (so it is not the builtin of that name)."""
        return any(name in s.bound for s in self.scopes) or \
            any(name in local for local in self._local_bindings())

    def _scopes_in_reach(self):
        """The scopes a name used here resolves in, innermost first: a class body only
        when the code is directly in it."""
        scopes = self.scopes
        innermost = len(scopes) - 1
        for i in range(innermost, -1, -1):
            if scopes[i].kind != "class" or i == innermost:
                yield scopes[i]

    def _local_bindings(self):
        """The names lambdas and comprehensions bind around here."""
        for lam in self.lambdas:
            yield lam.params
        for br in self.brackets:
            yield br.bound

    def _submodule(self, module: str | None, name: str) -> str | None:
        if module is None:
            return None
        info = module_info(module)
        if info is None:
            return None
        return info.submodules.get(name)

    def _module_of(self, name: str) -> str | None:
        """The module ``name`` refers to here: one it is bound to, or, while nothing binds
        it, the module of that name the code may yet import (``math.`` in a function
        body before ``import math``: the settlement of the name would import it)."""
        for scope in self._scopes_in_reach():
            for bound, module in scope.modules:
                if bound == name:
                    return module
            if name in scope.bound:
                return None
        if name in self.modules and name not in BUILTIN_NAMES and not any(
                name in local for local in self._local_bindings()) and not self._binds(name):
            return name
        return None

    # -- deciding names -----------------------------------------------------------------
    def _decide(self, decider: str) -> None:
        """The lexeme after an undecided name has come: bind it or refer to it."""
        assert self.pending is not None
        name, kind = self.pending
        self.pending = None
        if kind == "soft":
            if decider in ("=", ",", ".", ":", ")", "]") or decider in _AUGMENTED or \
                    decider == "nl" or decider == ";":
                kind = "first"
            else:
                self.line_free = True
                return
        top = self.brackets[-1] if self.brackets else None
        if kind in ("target", "first"):
            if decider == "=":
                if kind == "first":
                    self.check = self._assignment_check(name)
                self._assign(name)
                return
            if decider in _TARGET_CONTINUE or (decider == ":" and kind == "first" and
                                               top is None):
                if decider == ":":
                    self._assign(name)
                    self.seg_target = False  # an annotation follows
                    self._start_annotation("assign", name, 0)
                else:
                    self.targets += (name,)
                return
            if decider in _AUGMENTED:
                self._refer(name)
                self._bind_as(name, "scope")
                return
        elif kind == "element":
            if decider == "=" and top is not None and top.kind == "call":
                self._keyword_argument(name, top)
                return
            if decider == ":=":
                self._bind_as(name, "walrus")
                return
        elif kind == "cond" and decider == ":=":
            self._bind_as(name, "walrus")
            return
        self._refer(name)

    def _refer(self, name: str) -> None:
        """A reference: resolves, or an obligation (deferred code), or waits on an
        enclosing comprehension-capable bracket; else a violation. A name the current
        statement binds for the first time (``x = x + 1``) is not bound yet: only a
        comprehension's own target may bind it (``x = [x for x in xs]``), else a
        violation."""
        if self._unbound_yet(name):
            if any(br.binds_later for br in self.brackets):
                self._wait((name,), len(self.brackets))
            else:
                self.violations += 1
            return
        self._note_reference(name)
        if not self.resolves(name):
            self._wait((name,), len(self.brackets))

    def _note_reference(self, name: str) -> None:
        """Record that the innermost function used ``name`` before binding it: binding
        it later is then refused (an UnboundLocalError in straight-line code; pyflakes'
        "undefined name" in a loop). A use inside a bracket that may still be a
        comprehension is recorded when that bracket settles (its ``for`` may bind it)."""
        if len(self.scopes) < 2 or any(name in local for local in self._local_bindings()):
            return
        for j in range(len(self.brackets) - 1, -1, -1):
            br = self.brackets[j]
            if br.binds_later:
                self._set_bracket(j, with_fields(br, used=br.used | {name}))
                return
        i = len(self.scopes) - 1
        s = self.scopes[i]
        if s.kind == "function" and name not in s.bound and name not in s.referenced:
            self._set_scope(i, with_fields(s, referenced=s.referenced | {name}))

    def _wait(self, names, below: int) -> None:
        """Unresolved names wait on the innermost of ``brackets[:below]`` that may still
        be a comprehension (whose ``for`` may bind them), else are unresolved."""
        for i in range(below - 1, -1, -1):
            br = self.brackets[i]
            if br.binds_later:
                self._set_bracket(i, with_fields(br, waiting=br.waiting | set(names)))
                return
        self._unresolved(names)

    def _unresolved(self, names) -> None:
        """Names that can no longer be bound where they are used: obligations of the
        function (deferred code) — but for a name the current statement binds for the
        first time, which no later binding can meet —, else a violation."""
        if self._deferred():
            for name in names:
                if self._unbound_yet(name):
                    self.violations += 1
                else:
                    self._refer_later(name)
        else:
            self.violations += 1

    def _unbound_yet(self, name: str) -> bool:
        """Whether ``name`` is first bound by the statement being read (and by no
        comprehension or lambda in reach): a use of it here runs before that binding."""
        return name in self.assigned and not any(name in local
                                                 for local in self._local_bindings())

    def _refer_later(self, name: str) -> None:
        """An unresolved name in deferred code: an obligation of the innermost function
        (a lambda's: inherited, met by a binding anywhere in the function), else of the
        module."""
        if self.resolves(name):
            return
        in_lambda = any(lam.body for lam in self.lambdas)
        for i in range(len(self.scopes) - 1, 0, -1):
            if self.scopes[i].kind == "function":
                s = self.scopes[i]
                self._set_scope(i, with_fields(s, inherited=s.inherited | {name}) if in_lambda
                                else with_fields(s, obligations=s.obligations | {name}))
                return
        s = self.scopes[0]
        self._set_scope(0, with_fields(s, obligations=s.obligations | {name}))

    def resolves(self, name: str) -> bool:
        """Whether ``name`` refers to something bound in reach now."""
        if name in BUILTIN_NAMES or name in KEYWORDS:
            return True
        if any(name in local for local in self._local_bindings()):
            return True
        return any(name in s.bound or s.star for s in self._scopes_in_reach())

    def visible_names(self) -> frozenset[str] | None:
        """Every name :meth:`resolves` accepts (keywords and builtins included);
        ``None`` when a star-import of unknown names makes every name resolve."""
        if self._visible is None:
            self._visible = (self._collect_visible(),)
        return self._visible[0]

    def _collect_visible(self) -> frozenset[str] | None:
        names = set(BUILTIN_NAMES | KEYWORDS)
        for local in self._local_bindings():
            names |= local
        for s in self._scopes_in_reach():
            if s.star:
                return None
            names |= s.bound
        return frozenset(names)

    def next_role(self) -> Role:
        """The role of the identifier the next byte would start or continue (``FREE``
        outside code, or in a number)."""
        if self.mode != CODE:
            return (FREE, "")
        if self.run:
            return (FREE, "") if self.run_num else self.run_role
        probe = self.copy()
        probe.feed(b"a")
        return probe.run_role if probe.mode == CODE and probe.run else (FREE, "")

    def signature(self, layout: bool = True) -> tuple:
        """What decides how the tracker reads a piece of text without identifiers
        (spaces, operators, brackets, quotes, line breaks) from here: every field, with
        sets of names replaced by what they decide (whether a waiting name is still
        unbound, whether the module's obligations are met). Equal signatures read such
        a piece alike (the identifier the text ends in is judged apart).

        ``layout=False``: for pieces without a line break — the indentation columns
        then matter only at the start of a line."""
        resolves = self.resolves
        pending = self.pending
        module = self.scopes[0]
        layout = layout or self.line_start
        string = (self.quote, self.triple, self.escape, self.quote_run, self.opening,
                  self.string_type, self.fstring, self.brace, self.spec) \
            if self.mode == STRING else None
        run = (self.run_num, self.run_role, self.run_num and _number_type(self.run)) \
            if self.run else None
        prev = self.prev if self.prev in _SIGNIFICANT_PREV else "other"
        return (
            self.mode, string, run, self.op, self.line_start, self.col if layout else 0,
            self.backslash, prev, self.starred, self.chain, self.value_type,
            None if pending is None else (pending[1], resolves(pending[0]),
                                          pending[0] in _FREE_LINES,
                                          _unnamed(self._assignment_check(pending[0]))),
            tuple(resolves(t) for t in self.targets), self.seg_target, self.first_lexeme,
            tuple((b.char, b.kind, b.comma, b.comp, b.in_target, b.target,
                   self._waits(b), b.targets_from, b.callee, b.subscript, b.colon,
                   bool(b.used - b.targets), b.args, b.keywords, b.unpacked, b.keyword, b.arg)
                  for b in self.brackets),
            self._pending_keyword(),
            self.stmt, self.clause, self.line_free,
            tuple((s.kind, s.indent if layout else 0, s.star,
                   bool((s.obligations | s.inherited) - s.bound), s.returns, s.typed,
                   s.owes_return)
                  for s in self.scopes),
            bool(module.obligations - module.bound - BUILTIN_NAMES),
            None if self.header is None else (self.header.kind, self.header.decorated,
                                              self.header.indent),
            _unnamed(self.check), self.loop_target is not None, self.decorated,
            None if self.annotation is None else (
                annotation_type(self.annotation), bool(self.annotation), self.annotation_kind,
                self.annotation_depth, self.annotated is not None),
            tuple((lam.depth, lam.body) for lam in self.lambdas),
            self.path, self.alias_of, self.from_module, self.from_name, self.relative,
            self.fence_start, self.modules, self.fields)

    def _waits(self, bracket: Bracket) -> int:
        """What the names waiting on ``bracket`` decide: 0 none, 1 some (met by its
        ``for`` targets, else obligations in deferred code), 2 a name the statement
        binds first among them (unresolved at the close whatever the code)."""
        rest = bracket.waiting - bracket.targets
        if not rest:
            return 0
        return 2 if any(self._unbound_yet(n) for n in rest) else 1

    def _pending_keyword(self) -> str | None:
        """The undecided name in a call of a function the code defines (``f(x`` then
        ``=``: a keyword argument, checked against the parameters)."""
        pending = self.pending
        if pending is None or not self.brackets:
            return None
        top = self.brackets[-1]
        return pending[0] if call_signature(top.callee) is not None else None

    def in_function(self, is_async: bool = False) -> bool:
        """Whether the code here is in a function body (``is_async``: the innermost
        function or class body is an ``async def``'s)."""
        if len(self.scopes) < 2:
            return False
        scope = self.scopes[-1]
        return scope.kind == "function" and (scope.is_async or not is_async)

    def mask_key(self) -> tuple:
        """Everything a mask over this state depends on: the signature, the identifier
        being written, and the names, modules and declared types in reach (equal keys,
        equal masks)."""
        return (self.signature(), self.run, self.assigned,
                tuple((s.bound, s.modules, s.types, s.obligations, s.inherited, s.referenced,
                       s.defined) for s in self.scopes),
                self.pending, self.targets,
                tuple((b.bound, b.clause_bound, b.waiting, b.used) for b in self.brackets),
                tuple(lam.params for lam in self.lambdas))

    def _deferred(self) -> bool:
        if any(lam.body for lam in self.lambdas):
            return True
        return any(s.kind == "function" for s in self.scopes)

    # -- binding --------------------------------------------------------------------------
    def _bind_as(self, name: str, where: str) -> None:
        if where == "comp":
            for i in range(len(self.brackets) - 1, -1, -1):
                br = self.brackets[i]
                if br.comp:
                    self._set_bracket(i, with_fields(br, clause_bound=br.clause_bound | {name}))
                    return
        if where == "lambda":
            lam = self.lambdas[-1]
            self.lambdas = self.lambdas[:-1] + (with_fields(lam, params=lam.params | {name}),)
            return
        if where == "param":
            header = self.header
            if header is not None:
                kind = self.prev if self.prev in ("*", "**") else \
                    "kw" if header.keyword_only else "pos"
                header = with_fields(header, params=header.params | {name},
                                 order=header.order + ((name, kind),),
                                 keyword_only=header.keyword_only or kind == "*")
                star = {"*": "tuple", "**": "dict"}.get(self.prev)
                if star is not None:  # "*args: int" is a tuple of ints whatever it says
                    header = with_fields(header, types=header.types + ((name, star),))
                self.header = header
                self.annotated = None if star else name
            return
        if where == "import":
            self._bind(name, self.alias_of)
            return
        if where in ("def", "class"):
            self._define(name)
            self.clause = "named"
            if self.header is not None:
                self.header = with_fields(self.header, name=name)
        self._bind(name)

    def _assign(self, name: str) -> None:
        """An assignment's target: bound, and, if this statement binds it first in a
        function, not usable in the rest of it (its value is computed before the binding;
        a class body would read the global)."""
        scope = self.scopes[-1]
        if scope.kind != "class" and name not in scope.bound:
            self.assigned |= {name}
        self._bind(name)

    def _bind(self, name: str, module: str | None = None) -> None:
        i = len(self.scopes) - 1
        s = self.scopes[i]
        if s.kind == "function" and name in s.referenced and name not in s.bound:
            self.violations += 1  # used earlier in this function: an UnboundLocalError
        modules = tuple(p for p in s.modules if p[0] != name)
        if module is not None:
            modules += ((name, module),)
        self._set_scope(i, with_fields(s, bound=s.bound | {name}, modules=modules))

    def _set_scope(self, i: int, scope: Scope) -> None:
        self.scopes = self.scopes[:i] + (scope,) + self.scopes[i + 1:]

    def _set_bracket(self, i: int, br: Bracket) -> None:
        self.brackets = self.brackets[:i] + (br,) + self.brackets[i + 1:]

    # -- keywords and operators -------------------------------------------------------------
    def _keyword(self, word: str) -> None:
        if self.pending is not None:
            self._decide(word)
        self._step_checks(word)
        self._statement_lexeme(word)
        self.last_name = None
        self.value_type = VALUE_KEYWORDS.get(word)
        if self.annotation is not None:
            self.annotation += (word,)
        depth = len(self.brackets)
        first = self.first_lexeme
        self.first_lexeme = False
        stmt = self.stmt
        if first and word == "async":
            self.first_lexeme = True  # "async def/for/with": the next keyword says which
        elif first and word in _STATEMENT_KEYWORDS:
            self.stmt = word
            self.clause = _FIRST_CLAUSE.get(word, "")
            if word in ("def", "class"):
                self.header = Header(word, self.indent, self.prev == "async", self.decorated)
            elif word == "return":
                self.check = self._return_check()
            if word in ("return", "raise"):
                self._returned()
            self.decorated = False
        elif first:
            self.decorated = False
        elif word == "for" and depth:
            top = self.brackets[-1].clause_ended()
            # A would-be target list turns out to be a comprehension: the names it held
            # are references its "for" may bind.
            held = frozenset(self.targets[top.targets_from:])
            self.targets = self.targets[:top.targets_from]
            self._set_bracket(depth - 1, with_fields(top, comp=True, in_target=True, target=False,
                                                 waiting=top.waiting | held))
        elif word == "if" and depth and self.brackets[-1].comp:
            # a comprehension's condition: the iterable before it has ended
            self._set_bracket(depth - 1, self.brackets[-1].clause_ended())
        elif word == "in":
            if depth and self.brackets[-1].in_target:
                self._set_bracket(depth - 1, with_fields(self.brackets[-1], in_target=False))
            elif not depth and stmt == "for" and self.clause == "target":
                self.clause = "iter"
                self.check = self._iteration_check()
        elif word == "as":
            if stmt == "import" and self.clause == "path":
                self.alias_of = ".".join(self.path)
                self.path = ()
                self.clause = "as"
            elif stmt == "from" and self.clause == "names":
                self.alias_of = self._submodule(self.from_module, self.from_name or "")
                self.from_name = None
                self.clause = "as"
            elif stmt in ("with", "except"):
                self.clause = "as"
        elif word == "import" and stmt == "from":
            self.from_module = ".".join(self.path) if self.path and not self.relative \
                else None
            self.clause = "names"
        if word == "lambda":
            self.lambdas += (Lambda(depth),)
        elif word == "yield":
            self._returned()
        self.prev = word
        self.chain = None

    def _returned(self) -> None:
        """A return, raise or yield in the innermost function's body: it owes none."""
        i = len(self.scopes) - 1
        if self.scopes[i].owes_return:
            self._set_scope(i, with_fields(self.scopes[i], owes_return=False))

    def _statement_lexeme(self, lexeme: str) -> None:
        """A target list ends where a lexeme that no target may hold comes: its names
        were references."""
        if lexeme not in _TARGET_LEXEMES:
            self._targets_referred()

    def _targets_referred(self) -> None:
        if self.targets and not self.brackets:
            for name in self.targets:
                self._refer(name)
            self.targets = ()

    def _lexeme(self, lexeme: str) -> None:
        """A significant lexeme other than a name or keyword."""
        annotating = self.annotation is not None  # (not one this lexeme starts)
        name, self.last_name = self.last_name, None
        if lexeme == "(" and name is not None and self.prev == "name":
            self.called |= {name}
        if self.stmt == "for" and self.clause == "target":
            self.loop_target = None  # a target list, not one name
        elif lexeme == ":" and not self.brackets and self.check is not None and \
                self.check.kind == "iterate":
            self._end_check(self.value_type)  # the iterable of "for x in …:"
        ended = lexeme in (",", ")") and bool(self.brackets) and self._end_argument(lexeme)
        self._step_checks(lexeme, argument=not ended)  # (not a check it starts: "x = …")
        if self.pending is not None:
            self._decide(lexeme)
        self._statement_lexeme(lexeme)
        self.starred = lexeme == "*" and (self.first_lexeme or self.prev in (
            ",", "=", "(", "[", "{", ";"))
        if self.first_lexeme:
            self.decorated = lexeme == "@"
        self.first_lexeme = False
        depth = len(self.brackets)
        top = self.brackets[-1] if depth else None
        stmt, clause = self.stmt, self.clause
        chain = self.chain
        prev = self.prev
        self.prev = lexeme
        self.chain = chain if lexeme == "." else None
        before = self.value_type
        self.value_type = before if lexeme == "." else None
        if prev in _OPERAND_ENDS and known(before) and (
                lexeme in _OPERATOR_METHODS and
                _OPERATOR_METHODS[lexeme] not in (operator_methods(before) or ()) or
                lexeme == "(" and before in KNOWN):
            # mypy: unsupported operand ("range(3) + …"); an instance of a builtin type
            # called ("xs = []" then "xs(1)": not callable)
            self.type_violations += 1
        if annotating and self.annotation is not None:
            if depth == self.annotation_depth and (lexeme in (",", "=", ";", ":") or
                                                   lexeme in _CLOSERS):
                assigned = self._finish_annotation()
                if lexeme == "=" and assigned is not None:
                    self.check = self._assignment_check(assigned)
            else:  # a literal is not the name of a type
                self.annotation += ("<literal>" if lexeme in ("str", "num") else lexeme,)
        if stmt == "from" and self.from_name is not None and lexeme in (",", ")"):
            self._bind(self.from_name, self._submodule(self.from_module, self.from_name))
            self.from_name = None
        if lexeme in ("(", "[", "{"):
            self._open_bracket(lexeme, prev, top, before)
        elif lexeme in _CLOSERS:
            if top is not None and top.char == _CLOSERS[lexeme]:
                self._close_bracket()
                self.value_type = _bracket_value(top, prev)
        elif lexeme == ",":
            self._comma(top, depth)
        elif lexeme == ":":
            if self.lambdas and self.lambdas[-1].depth == depth and not self.lambdas[-1].body:
                lam = self.lambdas[-1]
                self.lambdas = self.lambdas[:-1] + (with_fields(lam, body=True),)
            elif top is None:
                self.lambdas = ()
                if stmt in _HEADERS:
                    self._header_end()
            elif top.kind == "params":
                self.clause = "default"
                self._start_annotation("param", self.annotated, depth)
            elif (top.char == "{" or top.subscript) and not top.colon:
                self._set_bracket(depth - 1, with_fields(top, colon=True))
        elif lexeme == "=":
            if top is not None and top.kind == "params":
                self.clause = "default"
                self._param_default()
            elif top is None and stmt is None:
                for name in self.targets:
                    self._assign(name)
                self.targets = ()
        elif lexeme == "->" and stmt == "def":
            self.clause = "ann"
            self._start_annotation("return", None, depth)
        elif lexeme == ";" and top is None:
            self._simple_statement_end(before)
        elif lexeme == "*" and stmt == "from" and clause == "names":
            self._star_import()
        elif lexeme in ("*", "**") and top is not None and prev in ("(", ","):
            if top.kind == "params" and lexeme == "*" and self.header is not None:
                self.header = with_fields(self.header, keyword_only=True)  # a bare "*" too
            elif top.kind == "call":
                self._set_bracket(depth - 1, with_fields(top, unpacked=True, arg=None))
        elif lexeme == "." and stmt == "from" and clause == "module" and \
                prev in ("from", "."):
            self.relative = True
        if lexeme in _AUGMENTED and top is None:
            self.seg_target = False

    def _open_bracket(self, char: str, prev: str, top: Bracket | None,
                      value: str | None) -> None:
        stmt = self.stmt
        after_value = prev in ("name", ")", "]", "str")
        if char == "(" and stmt == "def" and self.clause == "named":
            kind = "params"
            self.clause = "params"
        elif char == "(" and after_value:
            kind = "call"
        elif stmt == "from" and self.clause == "names":
            kind = "import"
        else:
            kind = "group"
        element_start = prev in ("nl", "=", ",", "(", "[", "{", ";") or prev == ":" and \
            top is None
        target = kind == "group" and element_start and (
            (top is None and stmt is None and self.seg_target) or
            (top is not None and top.target))
        in_target = top is not None and top.in_target
        subscript = char == "[" and after_value
        arg = None
        sig = call_signature(value) if kind == "call" else None
        if sig is not None:
            arg = _argument_check(sig.positional_type(0), len(self.brackets) + 1)
        self.brackets += (Bracket(char, kind, target=target, in_target=in_target,
                                  targets_from=len(self.targets),
                                  callee=value if kind == "call" or subscript else None,
                                  subscript=subscript, arg=arg),)

    # -- annotations -----------------------------------------------------------------------
    def _start_annotation(self, kind: str, name: str | None, depth: int) -> None:
        """Read the annotation of parameter or assigned ``name`` (or a return's) from
        here to the end of the expression at ``depth``."""
        self.annotation, self.annotated = (), name
        self.annotation_kind, self.annotation_depth = kind, depth
        if kind != "assign" and self.header is not None:
            self.header = with_fields(self.header, typed=True)

    # -- expected types ----------------------------------------------------------------------
    def _checked_scope(self) -> Scope | None:
        """The innermost scope if mypy checks its code (the module, a function with an
        annotation in its signature)."""
        scope = self.scopes[-1]
        return scope if scope.typed and scope.kind != "class" else None

    def _return_check(self) -> ExprCheck | None:
        scope = self._checked_scope()
        if scope is None or scope.kind != "function" or scope.returns is None:
            return None
        return ExprCheck("return", scope.returns, None, len(self.brackets))

    def _iteration_check(self) -> ExprCheck | None:
        """The check of a ``for`` statement's iterable whose target is one name of no
        known type yet in this scope: its element's type becomes the name's (``for i in
        range(n)``: an ``int``, as mypy infers it)."""
        name, self.loop_target = self.loop_target, None
        scope = self._checked_scope()
        if name is None or scope is None or any(bound == name for bound, _ in scope.types):
            return None
        return ExprCheck("iterate", None, name, 0)

    def _assignment_check(self, name: str) -> ExprCheck | None:
        """The check of ``name = …`` as a statement: against the type ``name`` has in
        this scope, or recording it when this is its first binding here."""
        scope = self._checked_scope()
        if scope is None:
            return None
        for bound, declared in scope.types:
            if bound == name:
                return ExprCheck("assign", declared, name, 0)
        if name in scope.bound:
            return None
        return ExprCheck("infer", None, name, 0)

    def _end_check(self, value: str | None) -> None:
        """The expression being checked ended, its last primary of type ``value``."""
        check = self.check
        self.check = None
        if check is None:
            return
        if violates(check, value):
            self.type_violations += 1
        elif check.kind == "infer" and check.name is not None:
            inferred = expression_type(check, value)
            if inferred is not None and inferred != "None":
                self._declare(check.name, inferred)
        elif check.kind == "iterate" and check.name is not None:
            element = _ITEM.get(expression_type(check, value))  # type: ignore[arg-type]
            if element is not None:
                self._declare(check.name, element)

    def _define(self, name: str) -> None:
        """A ``def``/``class`` name: defining it again in the same block, neither one
        decorated, is mypy's "already defined" (a property's setter, an ``overload``
        or a ``singledispatch`` register is decorated)."""
        if self.redefines(name):
            self.type_violations += 1
        header = self.header
        if header is None or header.decorated:
            return
        i = len(self.scopes) - 1
        s = self.scopes[i]
        self._set_scope(i, with_fields(s, defined=s.defined + ((name, header.indent),)))

    def _step_checks(self, lexeme: str, argument: bool = True) -> None:
        """Follow the expressions being checked with a lexeme: the statement's and (with
        ``argument``) the argument the innermost call is reading."""
        depth = len(self.brackets)
        if self.check is not None:
            self.check = step(self.check, lexeme, depth, self.value_type)
            if lexeme == "," and self.check is not None and tuple_refused(self.check):
                self.type_violations += 1
                self.check = None  # (its end adds nothing more)
        if depth and argument:
            top = self.brackets[-1]
            if top.arg is not None:
                arg = step(top.arg, lexeme, depth, self.value_type)
                if arg is not top.arg:
                    self._set_bracket(depth - 1, with_fields(top, arg=arg))

    def _end_argument(self, lexeme: str) -> bool:
        """A "," or ")" in a call of a function the code defines: the argument read ends
        (checked against its parameter); after a ",", the next one's check; at ")", the
        arguments against the parameters. False: not such a call."""
        depth = len(self.brackets)
        top = self.brackets[-1]
        sig = call_signature(top.callee)
        if top.kind != "call" or sig is None or any(
                lam.depth == depth and not lam.body for lam in self.lambdas):
            return False  # (a lambda's parameters: "f(lambda a, b: …)")
        args = top.args
        if self.prev not in ("(", ","):  # an argument was read
            if top.arg is not None and violates(top.arg, self.value_type):
                self.type_violations += 1
            if not top.keyword and not top.unpacked:
                args += 1
        if lexeme == ",":
            self._set_bracket(depth - 1, with_fields(
                top, args=args, keyword=False,
                arg=_argument_check(sig.positional_type(args), depth)))
            return True
        if not top.unpacked and not top.comp and sig.refuses(args, top.keywords):
            self.type_violations += 1
        self._set_bracket(depth - 1, with_fields(top, args=args, arg=None))
        return True

    def _keyword_argument(self, name: str, top: Bracket) -> None:
        """``name=`` in a call: a keyword argument (checked if the callee is known)."""
        sig = call_signature(top.callee)
        if sig is None:
            return
        self._set_bracket(len(self.brackets) - 1, with_fields(
            top, keywords=top.keywords | {name}, keyword=True,
            arg=_argument_check(sig.keyword_type(name), len(self.brackets))))

    def _param_default(self) -> None:
        """A parameter's default: the last parameter read is optional."""
        header = self.header
        if header is None or not header.order:
            return
        name, kind = header.order[-1]
        if kind in ("pos", "kw"):
            self.header = with_fields(header, order=header.order[:-1] + (
                (name, "opt" if kind == "pos" else "kwopt"),))

    def redefines(self, name: str) -> bool:
        """Whether ``name``, read as the name of the ``def``/``class`` being read, defines
        again what the same block defined (see :meth:`_define`)."""
        header = self.header
        if header is None or header.decorated or self.clause != "name" or \
                self.stmt not in ("def", "class"):
            return False
        return (name, header.indent) in self.scopes[-1].defined

    def _finish_annotation(self) -> str | None:
        """Record the known type the annotation just read declares; the name an
        annotated assignment declares (``None`` for the others)."""
        declared = annotation_type(self.annotation or ())
        name, kind = self.annotated, self.annotation_kind
        self.annotation, self.annotated = None, None
        if kind == "return" and self.header is not None:
            self.header = with_fields(self.header, returns=declared)
        if declared is None:
            return None
        if kind == "param" and self.header is not None and name is not None:
            self.header = with_fields(self.header, types=self.header.types + ((name, declared),))
        elif kind == "assign" and name is not None:
            self._declare(name, declared)
            return name
        return None

    def _declare(self, name: str, declared: str) -> None:
        """``name`` has the known type ``declared`` in the innermost scope."""
        i = len(self.scopes) - 1
        s = self.scopes[i]
        types = tuple(p for p in s.types if p[0] != name) + ((name, declared),)
        self._set_scope(i, with_fields(s, types=types))

    def _comma(self, top: Bracket | None, depth: int) -> None:
        if top is not None:
            if self.lambdas and self.lambdas[-1].depth == depth and self.lambdas[-1].body:
                self.lambdas = self.lambdas[:-1]
            if not top.comp and not top.in_target:
                if top.waiting - top.targets:
                    self._wait(sorted(top.waiting - top.targets), depth - 1)
                self._set_bracket(depth - 1, with_fields(top, comma=True, waiting=frozenset(),
                                                     used=frozenset()))
                for name in sorted(top.used):  # no "for" can follow a comma here
                    self._note_reference(name)
            if top.kind == "params":
                self.clause = "params"
            return
        if self.lambdas and self.lambdas[-1].body:
            self.lambdas = ()
        if self.stmt == "import":
            self._finish_import_path()
            self.clause = "path"
        elif self.stmt == "from" and self.clause == "as":
            self.clause = "names"
        elif self.stmt == "with":
            self.clause = ""

    def _star_import(self) -> None:
        info = module_info(self.from_module) if self.from_module else None
        if info is not None and info.attributes is not None:
            for name in info.attributes:
                if not name.startswith("_"):
                    self._bind(name)
        else:
            s = self.scopes[-1]
            self._set_scope(len(self.scopes) - 1, with_fields(s, star=True))

    def _close_bracket(self) -> None:
        br = self.brackets[-1].clause_ended()
        self.brackets = self.brackets[:-1]
        depth = len(self.brackets)
        self.lambdas = tuple(lam for lam in self.lambdas if lam.depth <= depth)
        rest = br.waiting - br.bound
        if rest:
            self._wait(sorted(rest), depth)
        for name in sorted(br.used - br.bound):
            self._note_reference(name)
        if br.kind == "params":
            self.clause = "after"

    def _header_end(self) -> None:
        """The ``:`` that ends a compound statement's header: a ``def``/``class`` body
        opens a scope; the rest of the line is a simple statement. A block starts: the
        definitions of deeper blocks read before are forgotten (see :meth:`_define`)."""
        i = len(self.scopes) - 1
        s = self.scopes[i]
        if any(col > self.indent for _, col in s.defined):
            self._set_scope(i, with_fields(s, defined=tuple(d for d in s.defined
                                                         if d[1] <= self.indent)))
        header = self.header
        if header is not None and header.kind == "def" and header.name is not None and \
                not header.decorated and s.kind != "class":
            self._declare(header.name, _signature(header))  # (assigning it a value: mypy's error)
        if header is not None and self.stmt in ("def", "class"):
            function = header.kind == "def"
            scope = Scope("function" if function else "class", header.indent,
                          bound=header.params, is_async=header.is_async, types=header.types,
                          returns=header.returns if function else None,
                          typed=function and header.typed,
                          owes_return=(function and header.typed and not header.decorated
                                       and header.returns is not None))
            self.scopes += (scope,)
        self.header = None
        self._statement_start()

    def _statement_start(self) -> None:
        self.check = None
        self.loop_target = None
        self.stmt, self.clause = None, ""
        self.seg_target, self.first_lexeme = True, True
        self.assigned = frozenset()
        self.targets, self.path, self.alias_of, self.from_module = (), (), None, None
        self.from_name, self.relative, self.line_free = None, False, False

    def _used_before_binding(self, name: str) -> bool:
        """Whether the innermost function used ``name`` before binding it (binding it
        now would be a violation)."""
        scope = self.scopes[-1]
        return scope.kind == "function" and name in scope.referenced and \
            name not in scope.bound

    def unfinished_statement(self) -> bool:
        """Whether the statement ending here stopped short of what its keyword needs:
        a compound statement's header without its ":", an import without a module, a
        ``global``/``nonlocal``/``del``/``assert`` with nothing after it."""
        stmt = self.stmt
        if stmt in _HEADERS:
            return True
        if stmt == "import":
            return not self.path and self.clause == "path"
        if stmt == "from":
            return self.clause == "module" or (self.clause == "names" and
                                               self.prev == "import")
        return stmt in ("global", "nonlocal", "del", "assert") and self.prev == stmt

    def _finish_import_path(self) -> None:
        if self.stmt == "import" and self.clause == "path" and self.path:
            self._bind(self.path[0], self.path[0])
        self.path = ()

    def _simple_statement_end(self, value: str | None) -> None:
        """A simple statement ends (``value``: the type of the last primary read)."""
        if self.pending is not None:
            self._decide("nl")
        self._end_check(value)
        if self.unfinished_statement():
            self.violations += 1  # a keyword is never a name: "def" alone is no statement
        if self.annotation is not None:
            self._finish_annotation()
        if self.from_name is not None:
            self._bind(self.from_name, self._submodule(self.from_module, self.from_name))
        for name in self.targets:
            self._refer(name)
        self.targets = ()
        self._finish_import_path()
        self.lambdas = ()
        self._statement_start()

    def _logical_line_end(self) -> None:
        self._flush_op()
        if self.pending is not None:
            self._decide("nl")
        self._simple_statement_end(self.value_type)
        self.prev = "nl"

    # -- scopes ------------------------------------------------------------------------------
    def _close_scopes(self, col: int) -> None:
        while len(self.scopes) > 1 and col <= self.scopes[-1].indent:
            self._pop_scope()

    def _pop_scope(self) -> None:
        s = self.scopes[-1]
        self.scopes = self.scopes[:-1]
        if s.owes_return:
            self.type_violations += 1  # mypy: a missing return (or an empty body)
        if s.kind != "function" or s.star:
            return
        rest = (s.obligations | s.inherited) - s.bound
        if not rest:
            return
        for i in range(len(self.scopes) - 1, 0, -1):
            outer = self.scopes[i]
            if outer.kind == "function":
                self._set_scope(i, with_fields(outer, inherited=outer.inherited | rest))
                return
        module = self.scopes[0]
        self._set_scope(0, with_fields(module, obligations=module.obligations | rest))

    # -- the end of the program -----------------------------------------------------------------
    def end_program(self) -> None:
        """The program ends here (end of text, or a closing fence): undecided names are
        references, scopes close, and the module's obligations must be met."""
        if self.mode == DONE:
            return
        if self.mode == CODE:
            self._end_run()
            self._flush_op()
            if not self.line_start:
                self._logical_line_end()
        while len(self.scopes) > 1:
            self._pop_scope()
        module = self.scopes[0]
        if not module.star and module.obligations - module.bound - BUILTIN_NAMES:
            self.violations += 1
        self.mode = DONE

    def owed_names(self) -> list[str]:
        """The names the program would still owe if it ended here, its brackets closed
        (used in function bodies, bound nowhere yet), sorted."""
        if self._owed is None:
            self._owed = self._collect_owed()
        return self._owed

    def _collect_owed(self) -> list[str]:
        if self.mode == DONE:
            return []
        twin = self.copy()
        if twin.mode == CODE and twin.run and not twin.run_num:
            twin._end_run()  # the name being written, should it end here
        if twin.pending is not None:
            twin._decide("nl")
        while twin.brackets:  # what waits on them falls to the functions
            twin._close_bracket()
        twin._targets_referred()  # (a target list the statement's end makes references)
        while len(twin.scopes) > 1:
            twin._pop_scope()
        module = twin.scopes[0]
        if module.star:
            return []
        return sorted(module.obligations - module.bound - BUILTIN_NAMES)

    def comprehension_owed(self, here: bool = True) -> list[str]:
        """The names waiting on the innermost bracket — if a ``for`` may still follow
        in it — that its closing would leave unresolved (a name its statement binds
        first; in code that runs now, any with no outer bracket to wait on), counting
        the name being written as a reference, sorted: what ``for name in …`` written
        here binds. ``here=False``: those of every open bracket, each closed in turn,
        innermost first (what the settlements to come will bind)."""
        if not here:
            return self._collect_comprehension_owed(every=True)
        if self._comp_owed is None:
            self._comp_owed = self._collect_comprehension_owed(every=False)
        return self._comp_owed

    def _collect_comprehension_owed(self, every: bool) -> list[str]:
        if not self.brackets or (self.mode != CODE and not every):
            return []
        twin = self.copy()
        if twin.mode == CODE and twin.run and not twin.run_num:
            twin.feed(b" ")  # the name being written ends (a reference, should "for" come)
        if twin.pending is not None:
            twin._decide("for")
        if len(twin.brackets) != len(self.brackets):
            return []
        owed: list[str] = []
        while twin.brackets:
            top = twin.brackets[-1]
            if top.comp_capable:
                outer = any(br.binds_later for br in twin.brackets[:-1])
                deferred = twin._deferred()
                names = sorted(n for n in top.waiting - top.targets
                               if twin._unbound_yet(n) or not (deferred or outer))
                owed += names
                twin._set_bracket(len(twin.brackets) - 1,
                                  with_fields(top, bound=top.bound | set(names)))
            if not every:
                break
            twin._close_bracket()
        return owed

    def settled(self, types: bool = False) -> ScopeTracker:
        """A copy as the budget's settlements will leave it: the names
        :meth:`comprehension_owed` reports, of every open bracket, bound where they
        wait; with ``types``, no function owing a return (:meth:`return_settlement`)."""
        owed = set(self.comprehension_owed(here=False))
        twin = self.copy()
        for i, br in enumerate(twin.brackets):
            names = (br.waiting - br.targets) & owed
            if names and br.comp_capable:
                twin._set_bracket(i, with_fields(br, bound=br.bound | names))
        if types:
            for i, scope in enumerate(twin.scopes):
                if scope.owes_return:
                    twin._set_scope(i, with_fields(scope, owes_return=False))
        return twin

    def quiet(self) -> bool:
        """Whether any text without identifier bytes read from here surely adds no
        violation — but for ending a statement keyword's line short
        (:meth:`unfinished_statement`) or ending the program with a closing fence
        (:meth:`at_end_violations`): the identifier being written is fine where it
        stands, nothing undecided or waiting could turn out unresolved (or, in a
        function body, it would only become an obligation)."""
        deferred = self._deferred()
        if self.mode == CODE and self.run and not self.run_num:
            name = self.run.decode("utf-8", "replace")
            if name in KEYWORDS:
                return False  # closing it may start a statement its line must finish
            if name in self.assigned or self._used_before_binding(name):
                return False  # a use, or a binding, of it would be a violation
            kind = self.run_role[0]
            if kind == ATTR:
                info = module_info(self.run_role[1])
                fine = info is None or info.has(name)
            elif kind == MODULE:
                fine = name in self.modules
            elif kind == REF or (kind in (PENDING, COMP) and not deferred):
                fine = self.resolves(name)
            else:
                fine = True
            if not fine:
                return False
        if self.pending is not None and (self.pending[0] in self.assigned or
                                         self._used_before_binding(self.pending[0])):
            return False
        if any(t in self.assigned or self._used_before_binding(t) for t in self.targets):
            return False
        if any(self._waits(b) == 2 for b in self.brackets):
            return False  # closing its bracket leaves it unresolved, deferred or not
        if not deferred:
            resolves = self.resolves
            if self.pending is not None and not resolves(self.pending[0]):
                return False
            if not all(resolves(t) for t in self.targets):
                return False
            if any(b.waiting - b.targets for b in self.brackets):
                return False
        return True

    def at_end_violations(self) -> int:
        """How many violations ending the program here would add."""
        twin = self.copy()
        twin.end_program()
        return twin.violations - self.violations

    def owes_return(self) -> bool:
        """Whether a function being read owes a return (see :class:`Scope`)."""
        return any(s.owes_return for s in self.scopes)

    def return_settlement(self, here: bool = True) -> str:
        """``raise NotImplementedError`` at the body's column (before a body line: four
        past the ``def``'s) of the innermost function that owes a return (``""``: none
        owed) — what settles mypy's missing return when a budget ends the body early —,
        written here: at the start of a line not indented past that column (else
        ``""``); ``here=False``: a whole line."""
        owing = [s for s in self.scopes if s.owes_return]
        if not owing:
            return ""
        col = owing[-1].body_col if owing[-1].body_col >= 0 else owing[-1].indent + 4
        if not here:
            return " " * col + "raise NotImplementedError\n"
        if self.mode != CODE or not self.line_start or self.backslash or self.col > col:
            return ""
        return " " * (col - self.col) + "raise NotImplementedError\n"

    def at_end_type_violations(self) -> int:
        """How many type violations ending the program here would add (an expression
        checked against its expected type ends, a function owing a return)."""
        if self.check is None and not self.run and not self.owes_return():
            return 0
        twin = self.copy()
        twin.end_program()
        return twin.type_violations - self.type_violations


def _complete_definitions(source: str) -> list[str]:
    """The top-level functions and classes of ``source`` with a body beyond a docstring,
    ``pass`` or ``...`` (none if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                not node.decorator_list and not all(
                    isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and
                                                   isinstance(stmt.value, ast.Constant))
                    for stmt in node.body):
            out.append(node.name)
    return out


def _unsupported(op: str, have: frozenset[str], stmt: str | None) -> bool:
    """Whether the operator ``op`` after an operand with the attributes ``have`` is an
    unsupported operand (a binary operator, or its augmented assignment, whose method it
    lacks; ``->`` outside a ``def`` cannot be written at all)."""
    if op == "->":
        return stmt != "def"
    if op in _AUGMENTED:
        base = op[:-1]
        return f"__i{_OPERATOR_METHODS[base][2:]}" not in have and \
            _OPERATOR_METHODS[base] not in have
    return op in _OPERATOR_METHODS and _OPERATOR_METHODS[op] not in have


def _signature(header: Header) -> Signature:
    """What calls of the function ``header`` defines see."""
    types = dict(header.types)
    return Signature(tuple((name, kind, None if kind in ("*", "**") else types.get(name))
                           for name, kind in header.order), header.returns)


def _argument_check(expected: str | Refused | None, depth: int) -> ExprCheck | None:
    return None if expected is None else ExprCheck("arg", expected, None, depth)


def _unnamed(check: ExprCheck | None) -> ExprCheck | None:
    """``check`` as a signature holds it (the name only says where an inferred type is
    recorded, which no piece of text without identifiers reads)."""
    return check if check is None or check.name is None else with_fields(check, name=None)

"""The ``tether`` command line (SPEC §10): ``generate``, ``explain``, ``check``,
``compile`` and ``serve`` (an OpenAI-compatible server, docs/serving.md).

``generate`` writes only the generated text to stdout, streamed as it is produced;
progress and the KL summary go to stderr (``--json`` prints one JSON result instead).
``--sampling`` takes a sampling-DSL program (a file, or its text: ``$'top_k 40\nsample'``
in a shell); ``--deterministic`` decodes by argmax over the admissible tokens.
Fusion (SPEC §7): ``--intensity``, ``--constraint-spec FILE`` (a FusionConfig or an
Ananke-style ConstraintSpec, JSON), ``--types`` / ``--imports`` extra regex constraints,
``--forbid WORD,…`` (never these words, as the Imports domain) and ``--phase auto``
(free reasoning, the constraint after the ```` ```json ```` fence or ``</think>``).
With ``--grammar python`` / ``python-fenced``, an intensity that consults Imports adds
the Python Imports domain (names resolve; ``--code-context FILE`` adds names in reach).
``explain`` runs a generation and prints a per-token table (forced or sampled, feasible
count, legal mass Z, KL, dropped domains, time per domain) and a per-run summary.
Exit status (docs/errors.md): 0 success, 1 "does not match" (``check``), 2 bad input (a
one-line message naming the place), 3 a bug in tether (a one-line apology); never a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from tether import grammars
from tether.code import CodeContext, language_grammar
from tether.compiler import compile as compile_constraint
from tether.constraints import Choices, Constraint, Grammar, JsonSchema, Regex
from tether.errors import TetherError
from tether.fusion import (
    ConstraintSpec,
    FusionConfig,
    IntensityLevel,
    forbid_words,
    parse_constraint_spec,
)
from tether.sampling import Program, parse_program
from tether.session import (
    EXTRA_PROPERTIES,
    PHASE_MODES,
    SAMPLERS,
    StepInfo,
    check_sampler,
    compile_for_generation,
    decider,
)
from tether.vocab import Vocabulary

if TYPE_CHECKING:
    from tether.runtime.generate import GenerationResult
    from tether.sampling.smc import SMCResult

# Ready-made grammars ``--grammar`` takes by name (a file of that name: ``./NAME``):
# a Python module, and a Python module in a Markdown code block (what chat models write).
BUILTIN_GRAMMARS: dict[str, Callable[[], Grammar]] = {
    "python": grammars.python,
    "python-fenced": lambda: grammars.python(fenced=True),
}

EXIT_OK, EXIT_NO_MATCH, EXIT_ERROR, EXIT_BUG = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns (and, as a console script, exits with) the status."""
    args = _parser().parse_args(argv)
    if sys.stdout is None:
        _say("tether: error: stdout is closed")
        return EXIT_ERROR
    try:
        status = args.run(args)
        sys.stdout.flush()
        return status
    except TetherError as e:
        _say(f"tether: error: {e}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("tether: interrupted")
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`| head`): nothing to say
        _discard_stdout()
        return EXIT_OK
    except OSError as e:  # stdout full or failing, an unreadable stdin…
        _say(f"tether: error: {e.strerror or e}")
        _discard_stdout()
        return EXIT_ERROR
    except Exception as e:  # noqa: BLE001 - a bug in tether: one line, never a traceback
        _say(f"tether: internal error ({type(e).__name__}: {e}). This is a bug in tether; "
             "please report it with the command that caused it (TETHER_DEBUG=1 shows the "
             "traceback)")
        if os.environ.get("TETHER_DEBUG"):
            raise
        return EXIT_BUG


def _discard_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _say(line: str) -> None:
    """One line on stderr, if stderr can take it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(line, file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tether", description="Constrained decoding for LLMs.")
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", help="generate text that satisfies a constraint")
    _generation_args(gen)
    gen.set_defaults(run=_generate)

    explain = commands.add_parser("explain", help="generate and show a per-token trace")
    _generation_args(explain)
    explain.set_defaults(run=_explain)

    check = commands.add_parser("check", help="does a text satisfy a constraint?")
    _constraint_args(check, required=True)
    check.add_argument("input", nargs="?", default=None,
                       help="a file to check, or the text itself (default: stdin)")
    check.add_argument("--text", default=None, help="the text to check")
    check.set_defaults(run=_check)

    comp = commands.add_parser("compile", help="compile a constraint and report statistics")
    _constraint_args(comp, required=True)
    source = comp.add_mutually_exclusive_group()
    source.add_argument("--model", default=None, help="a GGUF file whose vocabulary to use")
    source.add_argument("--vocab", default=None,
                        help="tokenizer.json, *.tiktoken, SentencePiece *.model or *.gguf")
    comp.set_defaults(run=_compile)

    srv = commands.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API")
    srv.add_argument("--model", default=None, help="a GGUF file (default: embedded SmolLM2)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                     "%(default)s)")
    srv.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    srv.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="per-request limit, arrival to last token (default: 300)")
    srv.add_argument("--max-requests", type=int, default=None, metavar="N",
                     help="requests compiling, waiting or generating at once; one more "
                          "gets HTTP 429 (default: 64)")
    srv.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                     help="largest request body (default: 4 MiB)")
    srv.set_defaults(run=_serve)
    return parser


def _generation_args(parser: argparse.ArgumentParser) -> None:
    _constraint_args(parser, required=False)
    parser.add_argument("--max-tokens", type=int, default=256,
                        help="the budget: tokens of output at most, within which the "
                             "constraint is completed (default: %(default)s)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default 0.7; 0 = greedy)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sampling", default=None, metavar="FILE|TEXT",
                        help="a sampling program (docs/sampling-dsl.md): a file, or its text")
    parser.add_argument("--deterministic", action="store_true",
                        help="argmax decoding over admissible tokens (no sampling settings)")
    parser.add_argument("--sampler", choices=SAMPLERS, default="mask",
                        help="mask: token by token (default); smc: sequential Monte Carlo, "
                             "draws from the model's distribution restricted to the "
                             "constraint (docs/faithful-sampling.md)")
    parser.add_argument("--particles", type=int, default=16,
                        help="with --sampler smc: particles (default: %(default)s)")
    parser.add_argument("--model", default=None,
                        help="a GGUF file (default: embedded SmolLM2)")
    parser.add_argument("--system", default=None, help="system message for the chat template")
    parser.add_argument("--json", action="store_true", help="print a JSON result")
    parser.add_argument("--extra-properties", choices=EXTRA_PROPERTIES, default="forbid",
                        help="with --schema: objects that declare properties are written "
                             "closed, in schema order (forbid, default), or with the "
                             "freedom the schema allows (spec)")
    fusion = parser.add_argument_group("fusion (docs/fusion.md)")
    fusion.add_argument("--intensity", choices=[level.value for level in IntensityLevel],
                        help="which domains are consulted (none = unconstrained)")
    fusion.add_argument("--constraint-spec", metavar="FILE",
                        help="a FusionConfig or ConstraintSpec JSON file")
    fusion.add_argument("--types", metavar="REGEX", help="an extra constraint (Types)")
    imports = fusion.add_mutually_exclusive_group()
    imports.add_argument("--imports", metavar="REGEX", help="an extra constraint (Imports)")
    imports.add_argument("--forbid", metavar="WORD[,WORD…]",
                         help="never these whole words (the Imports domain)")
    fusion.add_argument("--phase", choices=PHASE_MODES, default="off",
                        help="auto: free reasoning, the constraint after the delimiter")
    fusion.add_argument("--code-context", metavar="FILE",
                        help="with --grammar python/python-fenced and an intensity that "
                             "consults Imports: Python code whose module-level names the "
                             "generated code may use (docs/code-domains.md)")
    parser.add_argument("prompt")


def _constraint_args(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--regex", help="a regular expression the whole output must match")
    group.add_argument("--choices", help="comma-separated options; the output is one of them")
    group.add_argument("--schema", metavar="FILE", help="a JSON Schema file (docs/json-schema.md)")
    group.add_argument("--grammar", metavar="FILE|NAME",
                       help="a GBNF or Lark grammar file, or a ready-made grammar: "
                            + ", ".join(BUILTIN_GRAMMARS) + " (docs/grammars.md)")
    parser.add_argument("--syntax", choices=("gbnf", "lark"), default=None,
                        help="the grammar's syntax (default: from the file name, else gbnf)")


def _constraint(args: argparse.Namespace) -> Constraint | None:
    if args.regex is not None:
        return Regex(args.regex)
    if args.choices is not None:
        return Choices(args.choices.split(","))
    if args.schema is not None:
        return JsonSchema(_read(args.schema, "schema"))
    if args.grammar in BUILTIN_GRAMMARS:
        if args.syntax is not None:
            raise TetherError(f"--syntax is for grammar files, not the ready-made grammar "
                              f"{args.grammar!r} (a file of that name: ./{args.grammar})")
        return BUILTIN_GRAMMARS[args.grammar]()
    if args.grammar is not None:
        syntax = args.syntax or ("lark" if args.grammar.endswith(".lark") else "gbnf")
        return Grammar(_read(args.grammar, "grammar"), syntax=syntax)
    return None


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TetherError(f"cannot read the {what} {path}: {e}") from e


# -- generate ----------------------------------------------------------------------------------
def _run(args: argparse.Namespace, on_text: Callable[[str], None] | None) -> GenerationResult:
    """The generation the ``generate`` / ``explain`` options describe."""
    from tether.runtime import generate, load_model

    constraint = _constraint(args)
    config, spec = _fusion_config(args)
    spec_syntax = None if spec is None else (
        spec.syntax if spec.language is None else language_grammar(spec.language))
    if spec_syntax is not None:
        if constraint is not None:
            raise TetherError("the constraint spec names a regex or a language: drop "
                              "--regex/--choices/--schema/--grammar")
        constraint = spec_syntax
    sampling = _sampling(args.sampling)
    # Bad settings and constraints are reported before the model loads.
    decider(Vocabulary.of_bytes(), sampling, args.temperature, args.deterministic, args.seed)
    check_sampler(args.sampler, args.particles, constraint, sampling, args.temperature,
                  args.deterministic, config is not None or args.types is not None
                  or args.imports is not None or bool(args.forbid) or args.phase != "off")
    if constraint is not None:
        compile_for_generation(constraint, Vocabulary.of_bytes(), args.extra_properties)
    code_context = (CodeContext() if spec is None else CodeContext.of_spec(spec)).with_source(
        _read(args.code_context, "code context") if args.code_context else "")
    _progress("loading model…")
    model = load_model(args.model)
    imports = (forbid_words(model.vocab, args.forbid.split(",")) if args.forbid
               else _regex(args.imports))
    return generate(args.prompt, constraint, model=model, max_tokens=args.max_tokens,
                    seed=args.seed, temperature=args.temperature, system=args.system,
                    on_text=on_text, sampling=sampling, deterministic=args.deterministic,
                    fusion=config, types=_regex(args.types), imports=imports,
                    phase=args.phase, extra_properties=args.extra_properties,
                    sampler=args.sampler, particles=args.particles,
                    code_context=code_context)


def _fusion_config(args: argparse.Namespace) -> tuple[FusionConfig | None,
                                                     ConstraintSpec | None]:
    """The ``--constraint-spec`` file's config (with ``--intensity`` applied) and the
    spec itself."""
    config, spec = None, None
    if args.constraint_spec is not None:
        try:
            text = Path(args.constraint_spec).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise TetherError(f"cannot read the constraint spec {args.constraint_spec}: "
                              f"{e}") from e
        spec = parse_constraint_spec(text)
        config = spec.config
    if args.intensity is not None:
        config = replace(config or FusionConfig(), intensity=args.intensity)
    return config, spec


def _regex(pattern: str | None) -> Regex | None:
    return None if pattern is None else Regex(pattern)


def _generate(args: argparse.Namespace) -> int:
    result = _run(args, None if args.json else _write_stdout)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print()  # the streamed text ends with a line break
    sampled = len(result.tokens) - result.n_forced
    _progress(f"{len(result.tokens)} tokens ({result.n_forced} forced, {sampled} sampled) "
              f"in {result.decode_s:.2f} s, {result.tokens_per_s:.1f} tokens/s; "
              f"stop: {result.stop_reason}; KL total {result.kl_total:.3f} nats, "
              f"max {result.kl_max:.3f}"
              + ("" if result.confidence is None else
                 f"; confidence {result.confidence:.3f} (mean log-prob)")
              + ("" if result.smc is None else f"; {_smc_line(result.smc)}"))
    return EXIT_OK


# -- explain -------------------------------------------------------------------------------------
EXPLAIN_HEADER = ("step", "token", "kind", "phase", "feasible", "Z", "KL", "dropped",
                  "domains µs")


def _explain(args: argparse.Namespace) -> int:
    result = _run(args, None)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return EXIT_OK
    vocab = _load_model_vocab(args)
    rows = [EXPLAIN_HEADER] + [_explain_row(i, s, vocab) for i, s in enumerate(result.kl)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(EXPLAIN_HEADER))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    summary = result.summary
    worst = "-" if summary.kl_max_step is None else str(summary.kl_max_step)
    print(f"summary: {len(result.kl)} steps ({summary.n_sampled} sampled, "
          f"{summary.n_forced} forced, {summary.n_relaxed} relaxed); "
          f"Σ KL {summary.kl_total:.4f} nats; mean KL {summary.kl_mean:.4f}; "
          f"max KL {summary.kl_max:.4f} at step {worst}; "
          f"log p(L) ≈ {summary.log_p_estimate:.4f}; stop: {result.stop_reason}")
    if result.smc is not None:
        print(_smc_line(result.smc))
    return EXIT_OK


def _smc_line(smc: SMCResult) -> str:
    ess = " ".join(f"{e:.1f}" for e in smc.ess)
    return (f"smc: {smc.particles} particles, log p(L) ≈ {smc.log_marginal:.4f} (over "
            f"particles), {smc.resampled} resamplings, {smc.model_calls} model calls, "
            f"ESS by step {ess}")


def _explain_row(index: int, step: StepInfo, vocab: Vocabulary) -> tuple[str, ...]:
    text = vocab.token_bytes(step.token).decode("utf-8", errors="replace")
    timings = " ".join(f"{d}={us:.0f}" for d, us in step.domain_us.items())
    return (str(index), repr(text), "forced" if step.forced else "sampled",
            step.phase or "-", _cell(step.feasible), _cell(step.mass, ".4f"),
            _cell(step.kl, ".4f"), ",".join(step.dropped) or "-", timings or "-")


def _cell(value: float | None, spec: str = "") -> str:
    return "-" if value is None else format(value + 0, spec)  # + 0: no "-0.0000"


def _load_model_vocab(args: argparse.Namespace) -> Vocabulary:
    from tether.runtime import load_model

    return load_model(args.model).vocab


def _sampling(value: str | None) -> Program | None:
    """The ``--sampling`` program: the file it names, or the value itself, parsed."""
    if value is None:
        return None
    return parse_program(_program_text(value))


def _program_text(value: str) -> str:
    try:
        is_file = "\n" not in value and Path(value).is_file()
    except (OSError, ValueError):  # not a usable path (too long, NUL…): program text
        is_file = False
    if not is_file:
        return value
    try:
        return Path(value).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TetherError(f"cannot read the sampling program {value}: {e}") from e


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _progress(message: str) -> None:
    print(f"[tether] {message}", file=sys.stderr, flush=True)


# -- check -------------------------------------------------------------------------------------
def _check(args: argparse.Namespace) -> int:
    compiled = compile_constraint(_constraint(args), Vocabulary.of_bytes())
    data = _check_input(args)
    result = compiled.check(data)
    if result.matches:
        print("match")
        return EXIT_OK
    text = data.decode("utf-8", errors="replace")
    before = data[: result.valid_prefix].decode("utf-8", errors="replace")
    line_no = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1)
    if result.valid_prefix >= len(data):
        print(f"no match: the text ends early (all {len(data)} bytes are a valid prefix)")
    else:
        print(f"no match: fails at byte {result.valid_prefix} (line {line_no}, "
              f"column {column + 1})")
    line = text.split("\n")[line_no - 1] if text else ""
    shown, caret = _window(line, column)
    print(f"  {shown}")
    print(f"  {' ' * caret}^")
    if result.expected:
        print(f"expected one of: {_describe_bytes(result.expected)}")
    if isinstance(compiled.constraint, JsonSchema):
        broken = _broken_keywords(compiled.constraint.schema_json, data) or [
            f"schema at {pointer or '/'}: the text breaks one of {', '.join(keywords)}"
            for pointer, keywords in _schema_keywords(compiled.constraint.schema,
                                                      result.context)]
        for line in broken:
            print(line)
    elif result.context:
        print("inside: " + " < ".join(result.context))
    return EXIT_NO_MATCH


WINDOW = 40  # characters shown on each side of a failure


def _window(line: str, column: int) -> tuple[str, int]:
    """The part of ``line`` around ``column`` (at most 2·WINDOW characters, elided with
    ``…``, control characters shown as ``·``) and the caret's position in it."""
    start = max(0, column - WINDOW)
    end = min(len(line), column + WINDOW)
    piece = "".join(c if c.isprintable() else "·" for c in line[start:end])  # one for one
    shown = ("…" if start else "") + piece + ("…" if end < len(line) else "")
    return shown, column - start + (1 if start else 0)


MAX_REPORTED = 5  # schema keywords listed for one failed check


def _broken_keywords(schema_json: str, data: bytes) -> list[str]:
    """When the text is complete JSON, the schema keywords its value breaks, as the
    ``jsonschema`` validator reports them (``schema at /required: missing "age"``), in
    exact decimal arithmetic; [] when the text is not JSON (the caret says where)."""
    try:
        instance = json.loads(data, parse_float=Decimal)
        schema = json.loads(schema_json, parse_float=Decimal)
        import jsonschema

        validator = jsonschema.validators.validator_for(schema)(schema)
        lines = []
        for error in sorted(validator.iter_errors(instance), key=jsonschema.exceptions.relevance):
            pointer = "".join(f"/{_escape_pointer(str(p))}" for p in error.absolute_schema_path)
            if error.validator == "required":
                message = f"missing {error.message.split(' is a required')[0]}"
            else:
                message = re.sub(r"Decimal\('([^']*)'\)", r"\1", error.message)
                message = message if len(message) <= 120 else message[:117] + "..."
            lines.append(f"schema at {pointer}: {message} (value at {error.json_path})")
        return lines[:MAX_REPORTED]
    except Exception:  # noqa: BLE001 - a diagnosis is a courtesy; the caret already says where
        return []


def _escape_pointer(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


# Keywords that only annotate a schema: they cannot be what a text violates.
_ANNOTATIONS = {"title", "description", "default", "examples", "example", "$comment",
                "$schema", "$id", "id", "deprecated", "readOnly", "writeOnly", "$defs",
                "definitions"}


def _schema_keywords(schema: object, context: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """For each schema pointer in a check's context, the constraining keywords there."""
    out = []
    for entry in context:
        pointer = entry[entry.find("(") + 1:-1] if entry.endswith(")") else ""
        if not pointer.startswith("/"):
            continue
        node = schema
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
                break
        if isinstance(node, dict):
            keywords = [k for k in node if k not in _ANNOTATIONS and not k.startswith("x-")]
            if keywords:
                out.append((pointer, keywords))
    return out


def _check_input(args: argparse.Namespace) -> bytes:
    """``--text``, else the file the argument names, else the argument itself, else stdin
    (bytes: a text that is not UTF-8 is checked as it is, and fails where it breaks)."""
    if args.text is not None:
        return os.fsencode(args.text)  # the bytes the shell passed
    if args.input is None:
        if sys.stdin is None:
            raise TetherError("no text to check: stdin is closed (give TEXT or --text)")
        return sys.stdin.buffer.read()
    try:
        is_file = "\n" not in args.input and Path(args.input).is_file()
    except (OSError, ValueError):
        is_file = False
    if is_file:
        try:
            return Path(args.input).read_bytes()
        except OSError as e:
            raise TetherError(f"cannot read {args.input}: {e.strerror}") from None
    return os.fsencode(args.input)


def _describe_bytes(data: bytes, limit: int = 24) -> str:
    shown = [repr(chr(b)) if b < 0x80 else f"0x{b:02x}" for b in data[:limit]]
    more = f" … ({len(data)} bytes in all)" if len(data) > limit else ""
    return " ".join(shown) + more


# -- compile -----------------------------------------------------------------------------------
def _compile(args: argparse.Namespace) -> int:
    vocab = _load_vocabulary(args)
    started = time.perf_counter()
    compiled = compile_constraint(_constraint(args), vocab)
    compiled.matcher().mask()
    first_mask = time.perf_counter() - started
    print(f"vocabulary: {vocab.name or '?'} ({vocab.size} tokens)")
    for key, value in compiled.stats.items():
        print(f"{key}: {value:.6f}" if isinstance(value, float) else f"{key}: {value}")
    print(f"time to first mask: {first_mask * 1000:.1f} ms")
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from tether.serve import check_address, serve

    for name, value in (("--timeout", args.timeout), ("--max-requests", args.max_requests),
                        ("--max-body", args.max_body)):
        if value is not None and value <= 0:
            raise TetherError(f"{name} must be > 0, not {value}")
    check_address(args.host, args.port)
    _progress("loading model…")
    serve(args.model, host=args.host, port=args.port, max_body=args.max_body,
          timeout_s=args.timeout, capacity=args.max_requests)
    return EXIT_OK


def _load_vocabulary(args: argparse.Namespace) -> Vocabulary:
    if args.vocab is not None:
        return Vocabulary.from_file(args.vocab)
    if args.model is not None:
        return Vocabulary.from_file(args.model)
    from tether.runtime import embedded_model_path

    return Vocabulary.from_file(embedded_model_path())


if __name__ == "__main__":
    sys.exit(main())

"""The ``tether`` command line (SPEC §10): ``generate``, ``check`` and ``compile``.

``generate`` writes only the generated text to stdout, streamed as it is produced;
progress and the KL summary go to stderr (``--json`` prints one JSON result instead).
``--sampling`` takes a sampling-DSL program (a file, or its text: ``$'top_k 40\nsample'``
in a shell); ``--deterministic`` decodes by argmax over the admissible tokens.
Typed tether errors become a one-line message on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tether.compiler import compile as compile_constraint
from tether.constraints import Choices, Constraint, Regex
from tether.errors import TetherError
from tether.sampling import Program, parse_program
from tether.vocab import Vocabulary

EXIT_OK, EXIT_NO_MATCH, EXIT_ERROR = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns (and, as a console script, exits with) the status."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except TetherError as e:
        print(f"tether: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("tether: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tether", description="Constrained decoding for LLMs.")
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", help="generate text that satisfies a constraint")
    _constraint_args(gen, required=False)
    gen.add_argument("--max-tokens", type=int, default=256)
    gen.add_argument("--temperature", type=float, default=None,
                     help="sampling temperature (default 0.7; 0 = greedy)")
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--sampling", default=None, metavar="FILE|TEXT",
                     help="a sampling program (docs/sampling-dsl.md): a file, or its text")
    gen.add_argument("--deterministic", action="store_true",
                     help="argmax decoding over admissible tokens (no sampling settings)")
    gen.add_argument("--model", default=None, help="a GGUF file (default: embedded SmolLM2)")
    gen.add_argument("--system", default=None, help="system message for the chat template")
    gen.add_argument("--json", action="store_true", help="print a JSON result")
    gen.add_argument("prompt")
    gen.set_defaults(run=_generate)

    check = commands.add_parser("check", help="does a text satisfy a constraint?")
    _constraint_args(check, required=True)
    check.add_argument("text")
    check.set_defaults(run=_check)

    comp = commands.add_parser("compile", help="compile a constraint and report statistics")
    _constraint_args(comp, required=True)
    source = comp.add_mutually_exclusive_group()
    source.add_argument("--model", default=None, help="a GGUF file whose vocabulary to use")
    source.add_argument("--vocab", default=None,
                        help="tokenizer.json, *.tiktoken, SentencePiece *.model or *.gguf")
    comp.set_defaults(run=_compile)
    return parser


def _constraint_args(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--regex", help="a regular expression the whole output must match")
    group.add_argument("--choices", help="comma-separated options; the output is one of them")


def _constraint(args: argparse.Namespace) -> Constraint | None:
    if args.regex is not None:
        return Regex(args.regex)
    if args.choices is not None:
        return Choices(args.choices.split(","))
    return None


# -- generate ----------------------------------------------------------------------------------
def _generate(args: argparse.Namespace) -> int:
    from tether.runtime import generate, load_model

    constraint = _constraint(args)
    sampling = _sampling(args.sampling)
    _progress("loading model…")
    model = load_model(args.model)
    stream = None if args.json else _write_stdout
    result = generate(args.prompt, constraint, model=model, max_tokens=args.max_tokens,
                      seed=args.seed, temperature=args.temperature, system=args.system,
                      on_text=stream, sampling=sampling,
                      deterministic=args.deterministic)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    elif sys.stdout.isatty():
        print()
    sampled = len(result.tokens) - result.n_forced
    _progress(f"{len(result.tokens)} tokens ({result.n_forced} forced, {sampled} sampled) "
              f"in {result.decode_s:.2f} s, {result.tokens_per_s:.1f} tokens/s; "
              f"stop: {result.stop_reason}; KL total {result.kl_total:.3f} nats, "
              f"max {result.kl_max:.3f}"
              + ("" if result.confidence is None else
                 f"; confidence {result.confidence:.3f} (mean log-prob)"))
    return EXIT_OK


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
    compiled = compile_constraint(_constraint(args), _byte_vocabulary())
    result = compiled.check(args.text)
    if result.matches:
        print("match")
        return EXIT_OK
    data = args.text.encode("utf-8")
    column = len(data[: result.valid_prefix].decode("utf-8", errors="ignore"))
    if result.valid_prefix >= len(data):
        print(f"no match: the text ends early (all {len(data)} bytes are a valid prefix)")
    else:
        print(f"no match: fails at byte {result.valid_prefix}")
    print(f"  {args.text}")
    print(f"  {' ' * column}^")
    return EXIT_NO_MATCH


def _byte_vocabulary() -> Vocabulary:
    """One token per byte: checking a text does not depend on a tokenizer."""
    return Vocabulary([bytes([b]) for b in range(256)] + [b""], eos_ids=[256], name="bytes")


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


def _load_vocabulary(args: argparse.Namespace) -> Vocabulary:
    if args.vocab is not None:
        return Vocabulary.from_file(args.vocab)
    if args.model is not None:
        return Vocabulary.from_file(args.model)
    from tether.runtime import embedded_model_path

    return Vocabulary.from_file(embedded_model_path())


if __name__ == "__main__":
    sys.exit(main())

"""The official JSON-Schema-Test-Suite (draft 2020-12) walked token by token with a real
tokenizer: per test file, right / wrong accept / wrong reject / unsupported, and the
totals (the harness is ``tests/json_schema_suite.py``).

    taskset -c 1 .venv/bin/python bench/json_schema_suite.py [--vocab smollm2|deepseek]
                                               [--formats assert|annotate] [--markdown]
"""

from __future__ import annotations

import argparse

from _common import load, save
from json_schema_suite import OUTCOMES, run_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="smollm2", choices=["smollm2", "deepseek"])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--formats", default="assert", choices=["assert", "annotate"],
                        help="JsonSchema's formats option (annotate: as the suite expects)")
    args = parser.parse_args()
    tok = load(args.vocab)
    table = run_suite(tok.tether_vocab, tok.encode, args.formats)
    totals = {o: sum(c[o] for c in table.values()) for o in OUTCOMES}
    if args.markdown:
        print("| file | " + " | ".join(OUTCOMES) + " |")
        print("|---" * (len(OUTCOMES) + 1) + "|")
        for name, counts in table.items():
            print(f"| {name} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
        print("| **all** | " + " | ".join(f"**{totals[o]}**" for o in OUTCOMES) + " |")
    else:
        for name, counts in table.items():
            print(f"{name:40s} " + "  ".join(f"{o} {counts[o]:3d}" for o in OUTCOMES))
        print("total: " + ", ".join(f"{o} {totals[o]}" for o in OUTCOMES))
    save(f"json_schema_suite_{args.vocab}_{args.formats}", {"totals": totals,
                                             "files": {n: dict(c) for n, c in table.items()}})


if __name__ == "__main__":
    main()

"""How faithful sequential Monte Carlo is: its distance to the exact constrained
distribution, against plain masking's.

Seven small finite constraints, each with a chat prompt. For each, the exact target
p(x | x ∈ L) and the exact distribution of plain masking are enumerated over every
tokenization (``tether.sampling.exact``), then texts are drawn with SMC and compared with
the target. Two models:

* ``--model synthetic`` (default): a small vocabulary (letters, digits, a few merged
  tokens) and deterministic pseudo-random logits per prefix (``--scale`` their standard
  deviation); ``--draws`` (20,000) draws per setting: 1, 4, 16, 64 particles, without
  lookahead (pure SMC) and with the default (the ends of texts summed exactly).
  KL(target ‖ empirical) in nats (inf when the draws miss an outcome: ``min p`` is the
  target's least likely text) and total variation.
* ``--model embedded``: the embedded SmolLM2 (llama.cpp, one thread) at temperature 1 on
  the prompts; ``--draws`` (1,000) draws of plain masking and of SMC with 16 particles
  (without and with lookahead); total variation to the target. Cost of one run with a
  fresh prefix tree (model calls per produced token, wall time) against ``generate()``
  with plain masking on the same prompt.

    taskset -c 1 .venv/bin/python bench/smc_faithful.py [--draws 20000 --scale 1.0]
    taskset -c 1 .venv/bin/python bench/smc_faithful.py --model embedded --draws 1000
"""

from __future__ import annotations

import argparse
import string
import time
from typing import Any

from _common import save

import tether
from tether.sampling.exact import divergence, empirical, exact_distributions
from tether.sampling.smc import LOOKAHEAD, SMC
from tether.sampling.synthetic import SyntheticSource

TOKENS = [c.encode() for c in string.ascii_letters + string.digits + '-" '] + [
    b"ab", b"ba", b"ye", b"yes", b"no", b"ma", b"may", b"be", b"20", b"24", b"-0", b"01",
    b"re", b"red", b"gr", b"een", b"bl", b"ue", b'"c', b'"d', b'g"', b"Mon", b"day",
    b"Fri", b"Tu", b"Sun"]
CASES = {  # name: (chat prompt, constraint)
    "yes|no|maybe": ("Is the Pacific the largest ocean? Answer yes, no or maybe.",
                     tether.Regex("(yes|no|maybe)")),
    "digit": ("Pick a number from 1 to 9.", tether.Regex("[1-9]")),
    "weekday": ("Which day comes after Sunday?",
                tether.Choices(["Monday", "Tuesday", "Friday", "Sunday"])),
    "colour": ("Name a primary colour of light.", tether.Choices(["red", "green", "blue"])),
    "animal (JSON)": ("Which animal barks? Reply with a JSON string.",
                      tether.JsonSchema({"enum": ["cat", "dog", "bird"]},
                                        whitespace="compact")),
    "ab|ba|abc|cab|bc": ("Write one of: ab, ba, abc, cab, bc.",
                         tether.Regex("(ab|ba|abc|cab|bc)")),
    "month 202x-0x": ("Name a month of 2020 to 2024 (January to March) as YYYY-MM.",
                      tether.Regex("202[0-4]-0[1-3]")),
}
SYNTHETIC_RUNS = ((1, 0), (4, 0), (16, 0), (64, 0), (1, LOOKAHEAD), (16, LOOKAHEAD),
                  (64, LOOKAHEAD))  # (particles, lookahead)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["synthetic", "embedded"], default="synthetic")
    parser.add_argument("--draws", type=int, default=None,
                        help="draws per setting (default 20,000 synthetic, 1,000 embedded)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.model == "embedded":
        embedded(args.draws or 1_000)
    else:
        synthetic(args.draws or 20_000, args.scale, args.seed)


def _texts(vocab: tether.Vocabulary, smc: SMC, draws: int) -> list[bytes]:
    return [b"".join(vocab.token_bytes(t) for t in smc.sample(seed).tokens)
            for seed in range(draws)]


def synthetic(draws: int, scale: float, seed: int) -> None:
    vocab = tether.Vocabulary([*TOKENS, b""], eos_ids=[len(TOKENS)])
    source = SyntheticSource(vocab.size, seed=seed, scale=scale)
    rows = []
    print(f"{'constraint':17s} {'texts':>5s} {'min p':>7s} {'masking':>14s}   " + "  ".join(
        f"{f'N={n} la={la}':>14s}" for n, la in SYNTHETIC_RUNS) + "   (KL nats / TV)")
    for name, (_, constraint) in CASES.items():
        compiled = tether.compile(constraint, vocab)
        exact = exact_distributions(source, vocab, compiled.matcher())
        masking = divergence(exact.target, exact.masking)
        row: dict[str, Any] = {"constraint": name, "texts": len(exact.target),
                               "min_target": min(exact.target.values()),
                               "masking_kl": masking.kl, "masking_tv": masking.tv,
                               "smc": {}}
        for n, lookahead in SYNTHETIC_RUNS:
            smc = SMC(source, vocab, compiled.matcher(), particles=n, lookahead=lookahead)
            started = time.perf_counter()
            found = divergence(exact.target, empirical(_texts(vocab, smc, draws)))  # type: ignore[arg-type]
            row["smc"][f"{n}/{lookahead}"] = {
                "kl": found.kl, "tv": found.tv,
                "ms_per_draw": 1e3 * (time.perf_counter() - started) / draws}
        rows.append(row)
        found_at = [row["smc"][f"{n}/{la}"] for n, la in SYNTHETIC_RUNS]
        cells = "  ".join(f"{f['kl']:7.4f}/{f['tv']:.3f}" for f in found_at)
        print(f"{name:17s} {row['texts']:5d} {row['min_target']:7.1e} "
              f"{masking.kl:7.3f}/{masking.tv:.3f}   {cells}")
    save("smc_faithful", {"model": "synthetic", "draws": draws, "scale": scale,
                          "seed": seed, "rows": rows})


def embedded(draws: int) -> None:
    from tether.runtime import ModelSource, generate, load_model

    lm = load_model()
    rows = []
    print(f"{'constraint':17s} {'texts':>5s} {'seqs':>5s}  {'masking TV':>10s} "
          f"{'drawn':>6s}  {'SMC-16 la=0':>11s}  {f'SMC-16 la={LOOKAHEAD}':>12s}  "
          f"{'ratio':>5s}  calls/token  s/run SMC-16 vs masking")
    for name, (prompt, constraint) in CASES.items():
        compiled = tether.compile(constraint, lm.vocab)
        prompt_ids = lm.chat_prompt(prompt)
        lm.reset()
        lm.eval(prompt_ids)
        source = ModelSource(lm, prompt_ids)
        exact = exact_distributions(source, lm.vocab, compiled.matcher())
        masking = divergence(exact.target, exact.masking)
        tv = {}
        for n, lookahead in ((1, 0), (16, 0), (16, LOOKAHEAD)):
            smc = SMC(source, lm.vocab, compiled.matcher(), particles=n, lookahead=lookahead)
            tv[n, lookahead] = divergence(
                exact.target, empirical(_texts(lm.vocab, smc, draws))).tv  # type: ignore[arg-type]
        runs, started = [], time.perf_counter()
        for seed in range(5):  # fresh trees: what one run costs
            lm.reset()
            lm.eval(prompt_ids)
            runs.append(SMC(ModelSource(lm, prompt_ids), lm.vocab, compiled.matcher(),
                            particles=16).sample(seed))
        smc_s = (time.perf_counter() - started) / len(runs)
        per_token = (sum(r.model_calls for r in runs)
                     / sum(len(r.tokens) + 1 for r in runs))
        started = time.perf_counter()
        for seed in range(5):
            generate(prompt, constraint, model=lm, seed=seed, temperature=1.0)
        mask_s = (time.perf_counter() - started) / 5
        best = tv[16, LOOKAHEAD]
        ratio = masking.tv / best if best > 0 else float("inf")
        rows.append({"constraint": name, "texts": len(exact.target),
                     "sequences": exact.sequences, "masking_tv": masking.tv,
                     "masking_kl": masking.kl, "masking_drawn_tv": tv[1, 0],
                     "smc16_tv": tv[16, 0], "smc16_lookahead_tv": best, "ratio": ratio,
                     "model_calls_per_token": per_token, "smc_s_per_run": smc_s,
                     "masking_s_per_run": mask_s, "target": {
                         k.decode(errors="replace"): v for k, v in exact.target.items()}})
        print(f"{name:17s} {len(exact.target):5d} {exact.sequences:5d}  {masking.tv:10.3f} "
              f"{tv[1, 0]:6.3f}  {tv[16, 0]:11.3f}  {best:12.3f}  {ratio:5.1f}  "
              f"{per_token:11.1f}  {smc_s:.2f} vs {mask_s:.2f}")
    save("smc_faithful_embedded", {"model": "embedded", "draws": draws, "rows": rows})


if __name__ == "__main__":
    main()

"""Load on ``tether serve``: concurrent clients with distinct JSON Schemas (docs/serving.md).

A real server (the embedded model, pinned to one core) and ``--clients`` threads of the
official ``openai`` client (pinned to the other core) send ``--requests`` chat completions,
each under one of the 200 shared Glaive function-call schemas (``response_format``
json_schema, greedy, 256 tokens); the first 200 use 200 distinct schemas. Every output
is validated with ``jsonschema`` against its own request's schema (so an output written
under another request's constraint would fail). A schema the server refuses with a 400
(unsatisfiable ones: some Glaive schemas require every property and a ``oneOf`` of
them) is listed apart from errors. Reported: errors, valid outputs,
requests/s, latency p50/p99, tokens/s, and the server's RSS after start-up, after the
first 50 requests (the bounded caches full), every 50 requests and at the end. Results:
bench/results/serve_load.json.

    taskset -c 0 .venv/bin/python bench/serve_load.py --requests 500 --clients 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _glaive import schemas as glaive_schemas  # noqa: E402
from serve_server import call_prompt, running_server  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "serve_load.json"
WARM_UP = 50  # requests after which the server's bounded caches are full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--server-cpu", default="1")
    args = parser.parse_args()
    schemas = glaive_schemas()
    work = [(i, *schemas[i % len(schemas)]) for i in range(args.requests)]
    # The server's time limit is set past the run's: a request waits behind up to 31 others.
    with running_server("--timeout", "3600", cpu=args.server_cpu) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0,
                               timeout=600)

        def call(item: tuple[int, str, dict]) -> dict:
            index, name, schema = item
            prompt = call_prompt(name) + ("" if index < len(schemas) else
                                                  f"\n(Request {index}.)")
            started = time.perf_counter()
            try:
                reply = client.chat.completions.create(
                    model="any", messages=[{"role": "user", "content": prompt}],
                    response_format={"type": "json_schema",
                                     "json_schema": {"name": name, "schema": schema}},
                    max_tokens=args.max_tokens, temperature=0, seed=0)
            except openai.BadRequestError as e:  # the schema itself is refused
                return {"index": index, "refused": str(e)}
            except openai.APIError as e:
                return {"index": index, "error": str(e)}
            latency = time.perf_counter() - started
            text = reply.choices[0].message.content
            try:
                jsonschema.validate(json.loads(text), schema)
                valid = True
            except (ValueError, jsonschema.ValidationError):
                valid = False
            return {"index": index, "latency": latency, "valid": valid,
                    "tokens": reply.usage.completion_tokens,
                    "stop_reason": reply.choices[0].model_extra["tether"]["stop_reason"]}

        client.chat.completions.create(model="any", max_tokens=4,
                                       messages=[{"role": "user", "content": "hi"}])
        rss = {"start": server.rss_kb()}
        memory = {"start": _memory(server.url)}
        results: list[dict] = []
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            for result in pool.map(call, work):
                results.append(result)
                if len(results) == WARM_UP:
                    rss["after_warm_up"] = server.rss_kb()
                if len(results) == min(200, args.requests):
                    rss["after_200"] = server.rss_kb()
                    elapsed_200 = time.perf_counter() - started
                if len(results) % 50 == 0:
                    rss[f"after_{len(results)}"] = server.rss_kb()
                    memory[f"after_{len(results)}"] = _memory(server.url)
                    print(f"  {len(results)}/{args.requests} requests, server RSS "
                          f"{rss[f'after_{len(results)}'] / 1024:.1f} MB", file=sys.stderr)
        elapsed = time.perf_counter() - started
        rss["end"] = server.rss_kb()
        memory["end"] = _memory(server.url)
    report(results, elapsed, elapsed_200, rss, memory, args)


def _memory(url: str) -> dict[str, float]:
    """The server's own account of its memory (``/health``)."""
    with urllib.request.urlopen(f"{url}/health", timeout=60) as reply:
        return json.load(reply)["memory_mb"]


def report(results: list[dict], elapsed: float, elapsed_200: float, rss: dict,
           memory: dict, args: argparse.Namespace) -> None:
    done = [r for r in results if "latency" in r]
    first = [r for r in done if r["index"] < 200]
    latencies = sorted(r["latency"] for r in done)
    summary = {
        "requests": len(results), "clients": args.clients, "max_tokens": args.max_tokens,
        "errors": sum("error" in r for r in results),
        "error_samples": [r["error"] for r in results if "error" in r][:5],
        "refused_400": sorted({r["refused"] for r in results if "refused" in r}),
        "valid": sum(r["valid"] for r in done),
        "first_200": {"valid": sum(r["valid"] for r in first), "seconds": elapsed_200,
                      "requests_per_s": len(first) / elapsed_200},
        "requests_per_s": len(done) / elapsed,
        "tokens_per_s": sum(r["tokens"] for r in done) / elapsed,
        "latency_s": {"p50": statistics.median(latencies),
                      "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
                      "mean": statistics.fmean(latencies)},
        "invalid": [{k: r[k] for k in ("index", "stop_reason", "tokens")}
                    for r in done if not r["valid"]],
        "rss_mb": {k: round(v / 1024, 1) for k, v in rss.items()},
        "rss_growth_mb": round((rss["end"] - rss["start"]) / 1024, 1),
        "memory_mb": memory,
        "rss_growth_after_warm_up_mb": round((rss["end"] - rss.get("after_warm_up", 0)) / 1024,
                                             1),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{summary['requests']} requests, {args.clients} clients: {summary['errors']} errors, "
          f"{summary['valid']} valid; first 200: {summary['first_200']['valid']} valid, "
          f"{summary['first_200']['requests_per_s']:.2f} req/s")
    print(f"requests/s {summary['requests_per_s']:.2f}, tokens/s {summary['tokens_per_s']:.0f}, "
          f"latency p50 {summary['latency_s']['p50']:.1f} s, p99 "
          f"{summary['latency_s']['p99']:.1f} s")
    print(f"RSS MB: {summary['rss_mb']} (growth {summary['rss_growth_mb']} MB; after the "
          f"first {WARM_UP} requests, with the bounded caches full: "
          f"{summary['rss_growth_after_warm_up_mb']} MB)")
    print(f"invalid outputs: {summary['invalid']}")
    for when, parts in memory.items():
        print(f"  memory {when}: {parts}")


if __name__ == "__main__":
    main()

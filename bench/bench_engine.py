"""Decode rate of the two engines on the same weights (issue #13 item 3), side by side in one run.

    python bench/bench_engine.py [--model qwen2.5-coder-0.5b-instruct] [--prompts 6] [--tokens 48]
                                 [--slots 1,4,8] [--skip-transformers]

* ``transformers``: the local KV-capable backend (fp32 on the CPU), one prompt at a time;
  decode tok/s = generated tokens / decode seconds.
* ``llama.cpp slots=1``: the ``llamacpp:`` backend, one request at a time; decode tok/s from
  the server's own timings (``predicted_ms``).
* ``llama.cpp slots=P`` (P > 1): all prompts sent at once to a server with P slots
  (continuous batching); aggregate tok/s = generated tokens / wall seconds of the batch,
  prefill included (what an audit sees).

The ratio column is each engine's rate over llama.cpp slots=1 (the issue's target for the
default engine is >= 0.8). The machine's load average is printed: on a shared machine
absolute rates drop, the ratio within one run is the result.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from traceless.models import ChatMessage, GenerationConfig, ModelBackend, load_backend

TOPICS = ("sourdough baking", "trail running", "a trip to Iceland", "learning Spanish", "a beagle named Pepper",
          "repainting the kitchen", "birdwatching", "a used electric car", "chess openings", "fish tacos")


def _prompts(n: int) -> list[list[ChatMessage]]:
    system = ChatMessage(role="system", content="You are a helpful personal assistant.")
    return [[system, ChatMessage(role="user", content=f"Give me three practical tips about {TOPICS[i % len(TOPICS)]}.")]
            for i in range(n)]


def _sequential(be: ModelBackend, prompts: list[list[ChatMessage]], cfg: GenerationConfig) -> tuple[int, float, float]:
    """(tokens, decode seconds, wall seconds), one prompt at a time."""
    toks, dec, t0 = 0, 0.0, time.perf_counter()
    for p in prompts:
        g = be.generate(p, cfg)
        toks, dec = toks + g.completion_tokens, dec + g.decode_seconds
    return toks, dec, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--slots", default="1,4,8", help="llama.cpp slot counts to measure (1 = one request at a time)")
    ap.add_argument("--skip-transformers", action="store_true")
    a = ap.parse_args(argv)
    cfg = GenerationConfig(max_new_tokens=a.tokens, temperature=0.0)
    prompts = _prompts(a.prompts)
    rows: list[tuple[str, int, float, float]] = []  # engine, tokens, seconds, tok/s
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    for slots in (int(s) for s in a.slots.split(",")):
        be = load_backend(f"llamacpp:{a.model}", parallel=slots)
        try:
            be.generate(prompts[0], GenerationConfig(max_new_tokens=4))  # warm-up
            if slots == 1:
                toks, dec, _ = _sequential(be, prompts, cfg)
                rows.append(("llama.cpp slots=1 (decode)", toks, dec, toks / dec))
            else:
                t0 = time.perf_counter()
                gens = be.generate_batch(prompts, cfg)
                wall = time.perf_counter() - t0
                toks = sum(g.completion_tokens for g in gens)
                rows.append((f"llama.cpp slots={slots} (batch wall)", toks, wall, toks / wall))
        finally:
            be.close()
    if not a.skip_transformers:
        be = load_backend(f"transformers:{a.model}")
        try:
            be.generate(prompts[0], GenerationConfig(max_new_tokens=4))
            toks, dec, _ = _sequential(be, prompts, cfg)
            rows.append(("transformers fp32 (decode)", toks, dec, toks / dec))
        finally:
            be.close()
    ref = next((r[3] for r in rows if r[0].startswith("llama.cpp slots=1")), None)
    print(f"| engine ({a.model}) | tokens | seconds | tok/s | ratio to llama.cpp slots=1 |")
    print("|---|---|---|---|---|")
    for name, toks, sec, rate in rows:
        print(f"| {name} | {toks} | {sec:.1f} | {rate:.1f} | {rate / ref:.2f} |" if ref else f"| {name} | {toks} | "
              f"{sec:.1f} | {rate:.1f} | — |")
    print(f"load average after: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

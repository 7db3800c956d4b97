"""Profile: where one frontier instance's seconds go, per part, with token counts.

Runs ``run_study("frontier", ...)`` (the default grid unless ``--set`` narrows it) with the
model behind a recorder that times every generation call the runner makes (cache misses
only: the generation cache sits above it) and the embedder behind a timer. Parts:

* **summaries** — the memory write's S=1/S=2 summary calls (``summary_tokens`` budget),
  plus ``raw_plus_resummarize``'s re-summaries;
* **probes** — AER/FRS probe replies; **answers** — the PR question's replies;
* **embeddings** — MiniLM calls (session turns, summaries, questions, probes);
* **other** — the rest of the wall time (retrieval, forgets, residue scans, row writes).

Per part: calls (backend calls), prompts, prompt tokens the engine prefilled, prompt tokens
it reused from a prefix cache, completion tokens, wall seconds. CPU seconds of this process
and of its children (a llama.cpp server) come from ``getrusage``.

    nice -n 19 python bench/profile_frontier.py --model qwen2.5-coder-0.5b-instruct --threads 1
    nice -n 19 python bench/profile_frontier.py --model llamacpp:qwen2.5-coder-0.5b-instruct --parallel 4
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from traceless.models import ChatMessage, Embedder, Generation, GenerationConfig, ModelBackend  # noqa: E402
from traceless.studies import parse_sets, run_study  # noqa: E402

PARTS = ("summaries", "probes", "answers")


class Recorder(ModelBackend):
    """Forwards to ``inner`` and adds up, per part, calls, tokens and wall seconds."""

    def __init__(self, inner: ModelBackend, probe_texts: set[str], summary_tokens: int) -> None:
        self.inner, self.name = inner, inner.name
        self.probe_texts, self.summary_tokens = probe_texts, summary_tokens
        self.parts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._lock = threading.Lock()

    def concurrency(self) -> int:
        return self.inner.concurrency()

    def slots(self) -> int | None:
        return self.inner.slots()

    def _part(self, msgs: list[ChatMessage], cfg: GenerationConfig | None) -> str:
        if cfg is not None and cfg.max_new_tokens == self.summary_tokens:
            return "summaries"
        return "probes" if msgs[-1].content in self.probe_texts else "answers"

    def _add(self, batch: list[list[ChatMessage]], cfg: GenerationConfig | None, outs: list[Generation],
             wall: float) -> None:
        part = self._part(batch[0], cfg)
        with self._lock:
            p = self.parts[part]
            p["calls"] += 1
            p["prompts"] += len(batch)
            p["seconds"] += wall
            for g in outs:
                p["prompt_tokens"] += g.prompt_tokens
                p["cached_tokens"] += g.cached_prompt_tokens
                p["completion_tokens"] += g.completion_tokens

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        t0 = time.perf_counter()
        g = self.inner.generate(messages, config)
        self._add([messages], config, [g], time.perf_counter() - t0)
        return g

    def generate_batch(self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None
                       ) -> list[Generation]:
        t0 = time.perf_counter()
        outs = self.inner.generate_batch(batch, config)
        if batch:
            self._add(batch, config, outs, time.perf_counter() - t0)
        return outs

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()


class TimedEmbedder(Embedder):
    """Forwards to ``inner`` and adds up calls, texts and wall seconds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.stats = {"calls": 0.0, "texts": 0.0, "seconds": 0.0}

    def embed(self, texts: list[str]) -> Any:
        t0 = time.perf_counter()
        out = self.inner.embed(texts)
        self.stats["calls"] += 1
        self.stats["texts"] += len(texts)
        self.stats["seconds"] += time.perf_counter() - t0
        return out

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


def _cpu() -> tuple[float, float]:
    me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, ch.ru_utime + ch.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--parallel", type=int, default=None, help="llama.cpp slots (llamacpp: specs)")
    ap.add_argument("--workers", type=int, default=None, help="groups in flight")
    ap.add_argument("--set", action="append", default=[], help="config field, e.g. S=0,1")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args(argv)

    from traceless.audit._probes import probes
    from traceless.models import load_backend, load_embedder
    from traceless.studies.frontier import FrontierConfig

    cfg = FrontierConfig.model_validate({**parse_sets(FrontierConfig, args.set), "n": args.n})
    opts: dict[str, Any] = {"num_threads": args.threads} if args.threads else {}
    if args.parallel:
        opts["parallel"] = args.parallel
    texts = {p.text for p in probes(tuple(cfg.probe_levels), wordings=cfg.wordings, attribute=cfg.attribute)}
    t_load = time.perf_counter()
    rec = Recorder(load_backend(args.model, **opts), texts, cfg.summary_tokens)
    emb = TimedEmbedder(load_embedder())
    emb.embed(["warm up"])
    load_s = time.perf_counter() - t_load
    cpu0 = _cpu()
    work = Path(tempfile.mkdtemp(prefix="profile-frontier-"))
    t0 = time.perf_counter()
    s = run_study("frontier", work / "run", cfg, backend=rec, model_tag="profile", embedder=emb,
                  workers=args.workers, progress=False)
    wall = time.perf_counter() - t0
    rec.close()  # a llama.cpp server's CPU time counts once the child is reaped
    cpu1 = _cpu()
    report = {"model": args.model, "identity": rec.describe(), "n": args.n, "cells": s.cells_run,
              "generations": s.cache_misses, "cache_hits": s.cache_hits, "load_s": round(load_s, 1),
              "wall_s": round(wall, 1), "cpu_self_s": round(cpu1[0] - cpu0[0], 1),
              "cpu_children_s": round(cpu1[1] - cpu0[1], 1), "loadavg": os.getloadavg(),
              "parts": {k: dict(v) for k, v in rec.parts.items()}, "embeddings": emb.stats}
    accounted = sum(v["seconds"] for v in rec.parts.values()) + emb.stats["seconds"]
    print(f"{args.model}: {s.cells_run} cells, {s.cache_misses} generations, wall {wall:.1f}s, "
          f"CPU self {report['cpu_self_s']}s + children {report['cpu_children_s']}s, load {os.getloadavg()}")
    print("| part | calls | prompts | prefilled tok | cached tok | decoded tok | wall s |")
    print("|---|---|---|---|---|---|---|")
    for k in PARTS:
        v = rec.parts.get(k)
        if v:
            print(f"| {k} | {v['calls']:.0f} | {v['prompts']:.0f} | {v['prompt_tokens']:.0f} | "
                  f"{v['cached_tokens']:.0f} | {v['completion_tokens']:.0f} | {v['seconds']:.1f} |")
    e = emb.stats
    print(f"| embeddings | {e['calls']:.0f} | {e['texts']:.0f} texts | | | | {e['seconds']:.1f} |")
    print(f"| other | | | | | | {wall - accounted:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: a fixed slice of frontier cells, naively vs through the study runner.

* **runner** — ``run_study("frontier", ...)``: memory written once per instance, prompts
  deduplicated, each memory context prefilled once (prefix KV reused) and whole batches
  decoded together whatever their contexts (ragged batches), generation cache.
* **naive** — the same cells one by one: every stored prompt sent alone with a full prefill
  (``use_prefix_cache=False``), no cache, no batching, no deduplication, plus the summary
  calls of the memory write one by one.

The naive replies are compared with the runner's stored replies (greedy decoding, so they
should be identical; batched and unbatched float32 kernels can differ in rare near-ties,
which the script reports cell by cell). Prints both wall times and the speed ratio.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_frontier.py --model qwen2.5-coder-0.5b-instruct --threads 1
    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_frontier.py --model smollm2-135m-instruct --n 1

With a ``llamacpp:`` model the runner gets one slot, or the opt-in slots of
``TRACELESS_LLAMACPP_PARALLEL`` (``EngineOptions.parallel``; groups in flight to match), and the
naive path a second server with one slot and the prompt cache off, one request at a time. llama.cpp does not promise batch-invariant
greedy decoding, so differing replies are possible there and are reported like any other.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_frontier.py --model llamacpp:qwen2.5-coder-0.5b-instruct

Exit status 1 when any reply differs: every differing cell's key is listed, and the first
ten replies side by side (the cell's canary masked: replies can quote it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from traceless.models import ChatMessage, EngineOptions, GenerationConfig, load_backend  # noqa: E402
from traceless.run import served_options  # noqa: E402
from traceless.studies import ResultRow, read_rows, run_study  # noqa: E402

SLICE = {
    "S": [0, 1],
    "k": [3, 25],
    "modes": ["noop", "raw_only", "full_purge"],
    "wordings": 1,
    "frs_k": [6],
}
"""The fixed slice: S∈{0,1}, k∈{3,25}, three modes, one wording per level (34 cells per one-question instance)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--n", type=int, default=1, help="instances")
    ap.add_argument("--data", default=None, help="LongMemEval file (default: the usual search)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (1 on a shared machine)")
    ap.add_argument("--out", default=None, help="keep the runner's results dir here")
    args = ap.parse_args(argv)

    # this script is an edge: the engine options from its environment (TRACELESS_LLAMACPP_PARALLEL …)
    opts: dict[str, Any] = {"engine": EngineOptions.from_env(os.environ, threads=args.threads)}
    cfg = {**SLICE, "n": args.n, "data": args.data}
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-frontier-"))
    backend = load_backend(args.model, **served_options(args.model, opts))
    ident = backend.describe()
    print(f"model {ident.get('name')} ({ident.get('backend')}), threads {args.threads or 'default'}", flush=True)

    t0 = time.perf_counter()
    s = run_study("frontier", work / "runner", cfg, backend=backend, model_tag="bench", progress=False)
    t_runner = time.perf_counter() - t0
    rows = read_rows(work / "runner")
    print(f"runner: {len(rows)} cells in {t_runner:.1f}s ({s.cache_misses} generations, "
          f"{s.cache_hits} cache hits)", flush=True)

    # naive: the memory write's summary calls one by one, then every cell alone
    from traceless.studies.frontier import FrontierConfig

    fc = FrontierConfig.model_validate(cfg)
    gen_probe = GenerationConfig(max_new_tokens=fc.probe_tokens, temperature=0.0)
    gen_answer = GenerationConfig(max_new_tokens=fc.answer_tokens, temperature=0.0)
    gen_summary = GenerationConfig(max_new_tokens=fc.summary_tokens, temperature=0.0)
    summary_prompts = _summary_prompts(work / "runner")
    served = args.model.strip().startswith("llamacpp:")
    if served:  # the naive engine: one slot, every prompt prefilled in full
        backend.close()
        backend = load_backend(args.model, **opts, parallel=1, cache_prompt=False)
    once: dict[str, Any] = {} if served else {"use_prefix_cache": False}
    t0 = time.perf_counter()
    for msgs in summary_prompts:
        backend.generate(msgs, gen_summary, **once)
    naive: dict[str, str] = {}
    for r in rows:
        msgs = [ChatMessage(**m) for m in r.prompt]
        gen = gen_answer if "/pr/" in r.key else gen_probe
        naive[r.key] = backend.generate(msgs, gen, **once).text
    t_naive = time.perf_counter() - t0
    backend.close()
    print(f"{'':8}{'cells':>6} {'summaries':>10} {'seconds':>9}")
    print(f"{'naive':8}{len(rows):>6} {len(summary_prompts):>10} {t_naive:>9.1f}")
    print(f"{'runner':8}{len(rows):>6} {'(inside)':>10} {t_runner:>9.1f}")
    print(f"speed ratio naive/runner: {t_naive / t_runner:.2f}x", flush=True)
    diffs = differing(rows, naive)
    if diffs:
        print(f"{len(diffs)} of {len(rows)} replies differ: " + " ".join(k for k, _, _ in diffs))
        for key, a, b in diffs[:10]:
            print(f"  {key}\n    runner: {a!r}\n    naive:  {b!r}")
        return 1
    print(f"all {len(rows)} replies identical")
    return 0


def differing(rows: list[ResultRow], naive: dict[str, str]) -> list[tuple[str, str, str]]:
    """(key, runner reply, naive reply) of every cell whose replies differ, the cell's canary
    masked in both (replies can quote it; the terminal is no place for it)."""
    out = []
    for r in rows:
        got = naive[r.key]
        if got != r.reply:
            canary = str(r.extra.get("canary") or "")
            out.append((r.key, *(_mask(t or "", canary) for t in (r.reply, got))))
    return out


def _mask(text: str, canary: str) -> str:
    return text.replace(canary, "[canary]") if canary else text


def _summary_prompts(out: Path) -> list[list[ChatMessage]]:
    """The summary prompts of the memory write, rebuilt from the sessions the way the writer does."""
    import numpy as np

    from traceless.datasets import inject_canary, make_canary
    from traceless.memory import MemoryStore, MemoryWriter, WriteConfig
    from traceless.studies import derive_seed, read_manifest
    from traceless.studies.frontier import FrontierConfig
    from traceless.studies.frontier._study import _data, select_instances

    cfg = FrontierConfig.model_validate(read_manifest(out).config)
    insts, _ = _data(cfg)
    w = MemoryWriter(MemoryStore(":memory:"), summarizer=load_backend("scripted"), embedder=None,
                     config=WriteConfig(levels=tuple(s for s in (1, 2) if s in cfg.S), embed=False))
    prompts = []
    for inst in select_instances(insts, cfg.n, cfg.seed):
        rng = np.random.default_rng(derive_seed(cfg.seed, "canary", inst.id))
        canary = make_canary(rng)
        sessions, _, _ = inject_canary(inst.sessions, canary, rng)
        for s in sessions:
            texts = [t.content for t in s.turns if t.role == "user"]
            if texts:
                prompts += [w.summary_prompt(lv, texts) for lv in w.config.levels]
    return prompts


if __name__ == "__main__":
    sys.exit(main())

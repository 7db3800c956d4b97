"""The `traceless audit` workload, the naive way and the shipped way, in one run (issue #13 item 1).

    python bench/bench_audit.py [--profiles 3] [--modes all] [--model qwen2.5-coder-0.5b-instruct] [--skip-naive]

* **naive**: the llama.cpp engine with one slot, prompt cache off (every request prefills its
  whole prompt), no generation cache, one request at a time.
* **N slots + prompt cache (opt-in)**: ``EngineOptions(parallel=N)`` (``--parallel N``) (default 8):
  continuous batching over N slots, prompt cache on, every phase at once. Faster, but its
  greedy replies depend on batch and cache state, so its verdict differences are listed,
  not failed on.
* **phases one at a time**: the shipped engine with its phases (``before`` and each
  deletion) run one after the other.
* **shipped**: what `traceless audit` does: ``audit_model`` (llama.cpp, one slot, prompt
  cache off: reproducible), the generation cache (one generation for concurrent identical
  calls), phases overlapping their non-model work. Its verdicts must equal the naive run's
  and its own with phases one at a time (exit 1 otherwise).

Also printed: the requests, prefilled and decoded tokens of each run, and the decode floor of
the shipped run: its decoded tokens divided by the most this machine decodes (16 requests at
once on a fresh server with the opt-in slots, measured in the same run).

Both run the engine (``run_system_audit``) on the native system with the same settings
(defaults: 3 synthetic profiles, S=1, k=3, every forget mode, MiniLM retrieval). Printed:
wall and CPU seconds of each (CPU includes the llama.cpp server child), where the wall time
went (model start, memory write, deletions, context builds, probe generations, residue
scans), the ratio, and whether the verdicts agree: the AER/FRS table, the copies per store
and the extraction verdict of every probe row. If any differ, the differing rows are listed
and the exit status is 1.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import traceless.audit._system_audit as engine
from traceless.audit import SystemAuditConfig, audit_model, run_system_audit
from traceless.models import CachingBackend, EngineOptions, ModelBackend, load_backend, load_embedder
from traceless.systems import SystemRuntime
from traceless.systems._native import NativeSystem

Timings = dict[str, float]


@contextmanager
def _timed(timings: Timings) -> Iterator[None]:
    """Add the wall time spent in the engine's parts to ``timings`` (patched for this run only)."""
    targets: list[tuple[Any, str, str]] = [
        (NativeSystem, "write", "memory write (summaries, embeddings)"),
        (NativeSystem, "delete", "deletions (forget, re-summaries)"),
        (NativeSystem, "context", "context builds (retrieval)"),
        (engine, "_generate", "probe generations"),
        (engine, "store_copies", "residue scan (stores)"),
        (engine, "scan_files", "residue scan (files)"),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in targets]

    def wrap(f: Callable[..., Any], label: str) -> Callable[..., Any]:
        def g(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                timings[label] += time.perf_counter() - t
        return g

    for (obj, name, label), (_, _, f) in zip(targets, saved, strict=True):
        setattr(obj, name, wrap(f, label))
    try:
        yield
    finally:
        for obj, name, f in saved:
            setattr(obj, name, f)


@contextmanager
def _tokens(counts: collections.Counter[str]) -> Iterator[None]:
    """Count what the model was asked to do: requests, prompt tokens it prefilled (after its
    prompt cache) and tokens it decoded, over every request of the run (summaries included)."""
    from traceless.models._openai import OpenAIBackend

    orig = OpenAIBackend.generate

    def gen(self: OpenAIBackend, messages: Any, config: Any = None) -> Any:
        g = orig(self, messages, config)
        counts.update({"requests": 1, "prefilled": g.prompt_tokens, "decoded": g.completion_tokens})
        return g

    OpenAIBackend.generate = gen  # type: ignore[method-assign]
    try:
        yield
    finally:
        OpenAIBackend.generate = orig  # type: ignore[method-assign]


def _saturated_rate(be: ModelBackend, n: int = 16, tokens: int = 48) -> float:
    """Decoded tokens per second of ``be`` with ``n`` requests at once (all its slots busy):
    the most this machine decodes, prefill of the short prompts included."""
    from traceless.models import ChatMessage, GenerationConfig

    prompts = [[ChatMessage(role="user", content=f"Count from {i} to {i + 200}, separated by commas.")]
               for i in range(n)]
    t0 = time.perf_counter()
    gens = be.generate_batch(prompts, GenerationConfig(max_new_tokens=tokens, temperature=0.0))
    return sum(g.completion_tokens for g in gens) / (time.perf_counter() - t0)


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _run(label: str, build: Callable[[], tuple[str, ModelBackend]], cfg_kw: dict[str, Any], out: Path,
         counts: collections.Counter[str] | None = None) -> tuple[dict[str, Any], Timings, float, float]:
    """One audit: (summary + rows, time per part, wall s, CPU s). The server is stopped (and
    its CPU time counted) before returning."""
    timings: Timings = collections.defaultdict(float)
    t0, c0 = time.perf_counter(), _cpu()
    spec, be = build()
    timings["model start"] = time.perf_counter() - t0
    try:
        cfg = SystemAuditConfig(model=spec, **cfg_kw)
        with _timed(timings), _tokens(counts if counts is not None else collections.Counter()):
            res = run_system_audit(cfg, SystemRuntime(be, load_embedder(), spec), out)
    finally:
        be.close()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    import json

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, {res.rows} rows, identity "
          f"{rows[0]['model'].get('engine') if rows else None}", file=sys.stderr)
    return {"table": res.table, "copies": res.copies, "rows": rows}, timings, wall, cpu


def _differences(a: dict[str, Any], b: dict[str, Any], na: str = "naive", nb: str = "shipped") -> list[str]:
    """Human-readable differences in verdicts between two runs (empty: they agree)."""
    out: list[str] = []
    for phase in sorted(set(a["table"]) | set(b["table"])):
        ra, rb = a["table"].get(phase, {}), b["table"].get(phase, {})
        for col in sorted(set(ra) | set(rb)):
            if ra.get(col) != rb.get(col):
                out.append(f"table {phase} {col}: {na} {ra.get(col)}, {nb} {rb.get(col)}")
        if a["copies"].get(phase) != b["copies"].get(phase):
            out.append(f"copies {phase}: {na} {a['copies'].get(phase)}, {nb} {b['copies'].get(phase)}")

    def key(r: dict[str, Any]) -> tuple[str, ...]:
        return (r["phase"], r["profile"], r["view"], r["level"], str(r["wording"]))

    va, vb = ({key(r): r["extracted"] for r in x["rows"]} for x in (a, b))
    for k in sorted(set(va) | set(vb)):
        if va.get(k) != vb.get(k):
            out.append(f"row {'/'.join(k)}: extracted {na} {va.get(k)}, {nb} {vb.get(k)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="a catalog model name")
    ap.add_argument("--profiles", type=int, default=3)
    ap.add_argument("--modes", default="all", help="'all' or a comma list of forget modes")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--skip-naive", action="store_true", help="without the naive run")
    ap.add_argument("--only", help="a comma list of the runs to make: naive, slots, phases, shipped (default: all)")
    ap.add_argument("--slots", type=int, default=8, help="slots of the opt-in fast engine compared")
    a = ap.parse_args(argv)
    modes = () if a.modes == "all" else tuple(m.strip() for m in a.modes.split(",") if m.strip())
    cfg_kw: dict[str, Any] = {"profiles": a.profiles, "max_new_tokens": a.max_new_tokens,
                              "system_config": {"S": 1, "k": 3, **({"modes": list(modes)} if modes else {})}}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load_embedder()  # loaded once, outside both timings

    def naive() -> tuple[str, ModelBackend]:
        spec = f"llamacpp:{a.model}"
        return spec, load_backend(spec, parallel=1, cache_prompt=False, max_concurrency=1, ctx=4096)

    def shipped() -> tuple[str, ModelBackend]:
        spec, be = audit_model(a.model)
        return spec, CachingBackend(be)

    def slots() -> tuple[str, ModelBackend]:
        spec, be = audit_model(a.model, engine=EngineOptions(parallel=a.slots))
        return spec, CachingBackend(be)

    runs: dict[str, Callable[[], tuple[str, ModelBackend]]] = {
        "naive": naive, f"{a.slots} slots + prompt cache (opt-in)": slots,
        "phases one at a time": shipped, "shipped": shipped}
    if a.skip_naive:
        del runs["naive"]
    if a.only:
        keep = {x.strip() for x in a.only.split(",")}
        runs = {k: v for k, v in runs.items() if any(w in k for w in keep)}
    if "shipped" not in runs:
        ap.error("--only must include shipped (the run every other is compared with)")
    load0 = os.getloadavg()[0]
    res: dict[str, tuple[dict[str, Any], Timings, float, float]] = {}
    counts: dict[str, collections.Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        for i, (label, build) in enumerate(runs.items()):
            counts[label] = collections.Counter()
            with _phases_one_at_a_time(label == "phases one at a time"), _no_generation_cache(label == "naive"):
                res[label] = _run(label, build, cfg_kw, Path(tmp) / str(i), counts[label])
    spec, be = slots()  # a fresh server with the opt-in slots: the most this machine decodes
    try:
        rate = _saturated_rate(be)
    finally:
        be.close()
    print(f"load average: {load0:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores; "
          f"TRACELESS_NUM_THREADS={os.environ.get('TRACELESS_NUM_THREADS', '(unset: all cores)')}")
    labels = list(res)
    print("\n| part of the audit (seconds; concurrent phases' parts overlap) | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for part in dict.fromkeys(p for lb in labels for p in res[lb][1]):
        print(f"| {part} | " + " | ".join(f"{res[lb][1].get(part, 0.0):.1f}" for lb in labels) + " |")
    print("| **total wall** | " + " | ".join(f"**{res[lb][2]:.1f}**" for lb in labels) + " |")
    print("| CPU (incl. server) | " + " | ".join(f"{res[lb][3]:.1f}" for lb in labels) + " |")
    for what in ("requests", "prefilled", "decoded"):
        print(f"| model {what} | " + " | ".join(str(counts[lb][what]) for lb in labels) + " |")
    sw = res["shipped"][2]
    for lb in labels[:-1]:
        print(f"\n{lb} / shipped: {res[lb][2] / sw:.2f}x wall, {res[lb][3] / res['shipped'][3]:.2f}x CPU")
    dec = counts["shipped"]["decoded"]
    print(f"\ndecode floor of the shipped run: {dec} decoded tokens / {rate:.1f} tok/s (16 requests at once on "
          f"{a.slots} slots of this machine) = {dec / rate:.1f} s, prefill ({counts['shipped']['prefilled']} tokens) not counted; "
          f"30 s would need {dec / 30:.1f} tok/s")
    failed = 0
    for lb in labels[:-1]:
        diffs = _differences(res[lb][0], res["shipped"][0], lb, "shipped")
        # the shipped engine must give exactly the verdicts of the naive one (and of itself
        # with phases one at a time); the opt-in slots change greedy replies, so their
        # differences are listed, not failed on
        must = "opt-in" not in lb
        if diffs:
            failed |= must
            print(f"verdicts DIFFER between {lb} and shipped in {len(diffs)} places"
                  f"{'' if must else ' (expected: batching and the prompt cache change greedy replies)'}:")
            for d in diffs:
                print(f"  {d}")
        else:
            print(f"verdicts agree ({lb} vs shipped): the AER/FRS table, copies per store and all "
                  f"{len(res['shipped'][0]['rows'])} row verdicts")
    return failed


class _Uncached(CachingBackend):
    """The engine's generation cache, switched off: every call goes to the model."""

    def generate_batch(self, batch: Any, config: Any = None) -> Any:
        return self.inner.generate_batch(batch, config)


@contextmanager
def _no_generation_cache(on: bool) -> Iterator[None]:
    """The engine without its generation cache (the naive run asks the model for every
    probe, repeats included)."""
    names = vars(engine)
    saved = names["CachingBackend"]
    if on:
        names["CachingBackend"] = _Uncached
    try:
        yield
    finally:
        names["CachingBackend"] = saved


@contextmanager
def _phases_one_at_a_time(on: bool) -> Iterator[None]:
    """The shipped engine with its phases run one after the other (the engine before they ran
    concurrently)."""
    saved = engine.phase_workers
    if on:
        engine.phase_workers = lambda model, phases: 1
    try:
        yield
    finally:
        engine.phase_workers = saved


if __name__ == "__main__":
    raise SystemExit(main())

"""The residue scan of an adapter audit on a big memory (issue #11, Performance: "the
per-store scan of a mem0 or LangGraph store with 10^4 memories takes under 2 s").

    python bench/bench_scan.py [--memories 10000] [--canaries 10] [--reps 3]

For each system a memory of ``--memories`` entries is built in a temp dir, ``--canaries``
of them carrying a distinct canary; then ``store_copies`` (the audit engine's scan: every
named store the adapter dumps, every canary counted) is timed ``--reps`` times, p50.

* mem0 (``infer=false``): the canary carriers go through ``Memory.add`` (mem0's own payload
  and history rows); the filler is inserted straight into its qdrant collection and history
  table in the same shape (10^4 ``add`` calls would embed 10^4 texts first, minutes of
  MiniLM on two cores, and the scan reads the same rows either way).
* LangGraph: every session goes through the adapter's graph (``summarize=false``, so no
  model call): store items, checkpoints and writes are LangGraph's own.

Every scan must find each canary where its system keeps it (mem0: 2 copies per carrier in
the vector payload, ``data`` and ``text_lemmatized``, and 1 in ``history``, as the audit
measured; LangGraph: 1 store item, and in its thread 3 checkpoints, one per step LangGraph
1.2 records, and 1 pending write) or the bench exits 1; it also exits 1 when a scan takes
longer than the target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from traceless.audit import make_canary, store_copies
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import MemorySystem, SystemRuntime, load_system_config, open_system

TARGET_S = 2.0
TURNS = 4  # user turns per session (each a memory)


def _runtime() -> SystemRuntime:
    # no model call is made: mem0 infer=false and LangGraph summarize=false write verbatim
    return SystemRuntime(ScriptedBackend(lambda m, c: "unused"), HashingEmbedder(), "scripted")


def _p50(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fill_mem0(system: MemorySystem, n: int, canaries: list[str], rng: np.random.Generator) -> None:
    mem = system.memory  # type: ignore[attr-defined]
    for i, c in enumerate(canaries):
        mem.add([{"role": "user", "content": f"note {i}: my session token is {c}"}], user_id=f"u{i}", infer=False)
    dim = mem.config.embedder.config["embedding_dims"]
    batch = 1000
    for start in range(0, n - len(canaries), batch):
        ids = [str(uuid.UUID(int=int(rng.integers(2**62)) << 64 | start + j)) for j in range(batch)]
        texts = [f"user {(start + j) % 500} said: filler memory number {start + j} about the weather" for j in range(batch)]
        ids, texts = ids[: n - len(canaries) - start], texts[: n - len(canaries) - start]
        vecs = rng.standard_normal((len(ids), dim)).astype(np.float32).tolist()
        payloads = [{"data": t, "text_lemmatized": t.lower(), "user_id": f"u{(start + j) % 500}",
                     "hash": f"{start + j:032x}", "created_at": "2026-12-01T00:00:00"} for j, t in enumerate(texts)]
        mem.vector_store.insert(vectors=vecs, payloads=payloads, ids=ids)
        for mid, t in zip(ids, texts, strict=True):
            mem.db.add_history(mid, None, t, "ADD")


def _langgraph_sessions(n: int, canaries: list[str]) -> list[Session]:
    sessions, users = [], 500
    for s in range(n // TURNS):
        uid = f"u{s % users}"
        turns: list[Turn] = []
        for t in range(TURNS):
            carrier = s < len(canaries) and t == 1
            text = f"my session token is {canaries[s]}" if carrier else f"session {s} turn {t}: filler about the weather"
            turns += [Turn(role="user", content=text), Turn(role="assistant", content="noted")]
        sessions.append(Session(session_id=f"s{s}", user_id=uid, turns=turns))
    return sessions


def _bench(name: str, config: dict[str, object], n: int, canaries: list[str], reps: int,
           fill: Callable[[MemorySystem], None], expect: dict[str, int]) -> bool:
    with tempfile.TemporaryDirectory(prefix=f"bench-scan-{name}-") as tmp:
        system = open_system(name, Path(tmp) / "m", load_system_config(name, config), _runtime())
        try:
            t0 = time.perf_counter()
            fill(system)
            built = time.perf_counter() - t0
            copies = store_copies(system, canaries)
            p50 = _p50(lambda: store_copies(system, canaries), reps)
        finally:
            system.close()
    wrong = {s: (copies.get(s), want) for s, want in expect.items() if copies.get(s) != want}
    ok = not wrong and p50 < TARGET_S
    print(f"{name}: {n} memories (built in {built:.1f} s); scan p50 {p50:.3f} s over {reps} reps, "
          f"target {TARGET_S:.1f} s ({TARGET_S / p50:.1f}x under it); copies {copies}"
          + (f"; WRONG (found, expected): {wrong}" if wrong else "") + ("" if ok else "  FAIL"))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--canaries", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["mem0", "langgraph", "agno", "openai-agents"])
    a = ap.parse_args()
    if not 0 < a.canaries <= a.memories // TURNS:
        ap.error(f"--canaries must be between 1 and --memories/{TURNS}")
    rng = np.random.default_rng(0)
    canaries = [make_canary(rng) for _ in range(a.canaries)]
    k = len(canaries)
    ok = True
    if a.only in (None, "mem0"):
        ok &= _bench("mem0", {}, a.memories, canaries, a.reps, lambda s: _fill_mem0(s, a.memories, canaries, rng),
                     {"vector_store": 2 * k, "history": k, "messages": 0})
    if a.only in (None, "langgraph"):
        sessions = _langgraph_sessions(a.memories, canaries)
        ok &= _bench("langgraph", {"summarize": False}, a.memories, canaries, a.reps,
                     lambda s: s.write(sessions), {"store_items": k, "checkpoints": 3 * k, "writes": k})
    if a.only in ("agno", "openai-agents"):  # one at a time (not in the default run: building 10^4 is slow)
        sessions = _langgraph_sessions(a.memories, canaries)
        # agno: a carrier turn is one memory (text and input: 2 copies) and one run
        expect = ({"agno_memories": 2 * k, "agno_runs": k, "agno_sessions": 0} if a.only == "agno"
                  else {"agent_messages": k, "agent_sessions": 0})
        ok &= _bench(a.only, {}, a.memories, canaries, a.reps, lambda s: s.write(sessions), expect)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

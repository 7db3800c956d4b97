"""Gate and forget cost on large texts (issue #22.8): gated vs ungated write, and the forget
of a literal inside a big record, side by side in one run.

    python bench/bench_gate.py [--write-mb 2] [--forget-mb 20] [--literals 3] [--reps 1]
                               [--max-ratio 3] [--max-memory 4] [--max-scaling 3]

* *write*: one session whose single user turn is ``--write-mb`` MB of text is written to a
  fresh plaintext store (no embedder, no summaries: the raw tier and the extractive
  consolidation, so the text passes the gate twice). *ungated*: the owner has no gate
  descriptors; *gated*: the owner first forgot ``--literals`` literals (full_purge, gate
  on), so every write is checked against their descriptors. The text carries none of them.
* *forget*: a store holding one ``--forget-mb`` MB record with a literal in its middle;
  ``full_purge`` of that literal is timed with the gate on and off, and with the gate on at
  half the record size (linearity); its traced peak memory (tracemalloc, in a separate forget
  on a fresh store: tracing slows every allocation) is compared to the record's size. The
  record's own ungated write is printed for scale.

Targets (exit 1 when one is missed): gated write ≤ ``--max-ratio`` × ungated write; gated
forget ≤ ``--max-ratio`` × ungated forget; forget ≤ ``--max-scaling`` × the forget at half
the size (2 is linear, 4 quadratic); traced peak ≤ ``--max-memory`` × the record size. Peak
RSS of the process (``resource``) is printed too. Every forget must pass its own
verification (the byte scan finds no copy) or the bench exits 1.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig

OWNER = "alice"
CONFIG = WriteConfig(levels=(), extractive=True, embed=False)
_WORDS = ("weather", "garden", "piano", "lisbon", "coffee", "river", "window", "autumn", "letter", "bridge")


def _text(mb: float, salt: str = "") -> str:
    """About ``mb`` MB of deterministic words (never a literal of the bench)."""
    out, size, i = [], 0, 0
    target = int(mb * 1_000_000)
    while size < target:
        w = f"{_WORDS[i % len(_WORDS)]}{salt}{i % 997}"
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)


def _session(text: str, sid: str = "big") -> Session:
    return Session.model_validate({"user_id": OWNER, "session_id": sid, "turns": [
        {"role": "user", "content": text}, {"role": "assistant", "content": "noted"}]})


def _timed(fn: Callable[[], Any], *, trace: bool = False) -> tuple[float, int, Any]:
    """(seconds, traced peak bytes or 0, result) of one call. Tracing slows every allocation:
    a traced call is not timed against an untraced one."""
    if trace:
        tracemalloc.start()
        tracemalloc.reset_peak()
    t0 = time.perf_counter()
    try:
        out = fn()
        secs = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
    finally:
        if trace:
            tracemalloc.stop()
    return secs, peak, out


def _store(tmp: Path, name: str, literals: list[str]) -> MemoryStore:
    store = MemoryStore(tmp / f"{name}.db")
    w = MemoryWriter(store, config=CONFIG)
    if literals:  # each forgotten with the gate on: the owner's writes are checked from here on
        w.write_sessions([_session(" ".join(f"note {i}: my code is {lit}" for i, lit in enumerate(literals)), "g")])
        for lit in literals:
            forget(store, ForgetTarget.literal(lit, OWNER), "full_purge", gate=True)
    return store


def _write(tmp: Path, name: str, text: str, literals: list[str], reps: int) -> float:
    times = []
    for r in range(reps):
        store = _store(tmp, f"{name}{r}", literals)
        w = MemoryWriter(store, config=CONFIG)
        times.append(_timed(lambda: w.write_sessions([_session(text)]))[0])  # noqa: B023
        store.close()
    return statistics.median(times)


def _one_forget(tmp: Path, name: str, text: str, literal: str, *, gate: bool, trace: bool) -> tuple[float, int, float,
                                                                                                   bool]:
    """(forget s, traced peak, ungated write s of the record, verified) on a fresh store."""
    store = MemoryStore(tmp / f"forget-{name}.db")
    w = MemoryWriter(store, config=CONFIG)
    ws = _timed(lambda: w.write_sessions([_session(text)]))[0]
    secs, peak, receipt = _timed(
        lambda: forget(store, ForgetTarget.literal(literal, OWNER), "full_purge", gate=gate), trace=trace)
    ok = receipt.verification.passed and not any(receipt.verification.disk_scan.values())
    store.close()
    return secs, peak, ws, ok


def _forget(tmp: Path, mb: float, reps: int) -> dict[str, float]:
    """The forget of a literal in a record of ``mb`` MB: gated, ungated, at half the size,
    and traced (each on a fresh store; p50 of ``reps``)."""
    literal = "QZ9-AMBER-7141"

    def record(size: float) -> str:
        half = _text(size / 2)
        return f"{half} my code is {literal} {half}"

    text, small = record(mb), record(mb / 2)
    runs: dict[str, list[float]] = {k: [] for k in ("gated", "ungated", "half", "write", "peak")}
    ok = True
    for r in range(reps):
        for key, t, gate, trace in (("gated", text, True, False), ("ungated", text, False, False),
                                    ("half", small, True, False), ("peak", text, True, True)):
            secs, peak, ws, good = _one_forget(tmp, f"{key}{r}", t, literal, gate=gate, trace=trace)
            ok &= good
            runs[key].append(peak if trace else secs)
            if key == "gated":
                runs["write"].append(ws)
    out = {k: statistics.median(v) for k, v in runs.items()}
    out["peak"] = max(runs["peak"])
    out["size"] = len(text.encode())
    out["verified"] = float(ok)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-mb", type=float, default=2.0)
    ap.add_argument("--forget-mb", type=float, default=20.0)
    ap.add_argument("--literals", type=int, default=3, help="literals the gated owner forgot first")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--max-ratio", type=float, default=3.0)
    ap.add_argument("--max-memory", type=float, default=4.0, help="forget's traced peak / record size")
    ap.add_argument("--max-scaling", type=float, default=3.0,
                    help="forget time / forget time at half the size (linear: 2, quadratic: 4)")
    a = ap.parse_args(argv)
    literals = [f"GT{i}-OCHRE-{5000 + i}" for i in range(a.literals)]
    text = _text(a.write_mb)
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as d:
        tmp = Path(d)
        ung = _write(tmp, "ungated", text, [], a.reps)
        gat = _write(tmp, "gated", text, literals, a.reps)
        f = _forget(tmp, a.forget_mb, a.reps)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ratios = {"gated write / ungated write": gat / ung, "gated forget / ungated forget": f["gated"] / f["ungated"],
              "forget / forget at half size": f["gated"] / f["half"], "forget peak / record size": f["peak"] / f["size"]}
    limits = {"gated write / ungated write": a.max_ratio, "gated forget / ungated forget": a.max_ratio,
              "forget / forget at half size": a.max_scaling, "forget peak / record size": a.max_memory}
    print(f"write {len(text.encode()) / 1e6:.1f} MB: ungated {ung:.3f} s, gated by {a.literals} literal(s) {gat:.3f} s")
    print(f"forget a literal in a {f['size'] / 1e6:.1f} MB record (full_purge): gated {f['gated']:.3f} s, ungated "
          f"{f['ungated']:.3f} s, at half the size {f['half']:.3f} s; the record's ungated write {f['write']:.3f} s "
          f"({f['gated'] / f['write']:.1f}x); traced peak {f['peak'] / 1e6:.1f} MB; verified {bool(f['verified'])}")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f} (target ≤ {limits[k]:g})" + ("" if v <= limits[k] else "  MISSED"))
    print(f"peak RSS of the run {rss_mb:.0f} MB; reps {a.reps}")
    failed = [k for k, v in ratios.items() if v > limits[k]] + ([] if f["verified"] else ["forget verified"])
    print("FAIL: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Gate and forget cost on large texts (issue #22.8): gated vs ungated write, and the forget
of a literal inside a big record, side by side in one run.

    python bench/bench_gate.py [--write-mb 2] [--forget-mb 20] [--literals 3] [--reps 1]
                               [--max-ratio 3] [--max-memory 4]

* *write*: one session whose single user turn is ``--write-mb`` MB of text is written to a
  fresh plaintext store (no embedder, no summaries: the raw tier and the extractive
  consolidation, so the text passes the gate twice). *ungated*: the owner has no gate
  descriptors; *gated*: the owner first forgot ``--literals`` literals (full_purge, gate
  on), so every write is checked against their descriptors. The text carries none of them.
* *forget*: a store holding one ``--forget-mb`` MB record with a literal in its middle;
  ``full_purge`` of that literal (gate on) is timed, and its traced peak memory (tracemalloc,
  in a second forget on a fresh copy: tracing slows every allocation) compared to the
  record's size; its time is compared to the ungated write of that record.

Targets (exit 1 when one is missed): gated write ≤ ``--max-ratio`` × ungated write; forget
≤ ``--max-ratio`` × the ungated write of its record, and traced peak ≤ ``--max-memory`` ×
the record size. Peak RSS of the process (``resource``) is printed too. Every forget must
pass its own verification (the byte scan finds no copy) or the bench exits 1.
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


def _forget(tmp: Path, mb: float, reps: int) -> tuple[float, int, float, int, bool]:
    """(forget s, forget traced peak, ungated write s of the record, record bytes, all
    verified). Each rep times one forget and traces another, each on a fresh store."""
    literal = "QZ9-AMBER-7141"
    half = _text(mb / 2)
    text = f"{half} my code is {literal} {half}"
    times, peaks, writes, ok = [], [], [], True
    for r in range(reps):
        for trace in (False, True):
            store = MemoryStore(tmp / f"forget{r}{trace}.db")
            w = MemoryWriter(store, config=CONFIG)
            ws = _timed(lambda: w.write_sessions([_session(text)]))[0]  # noqa: B023
            secs, peak, receipt = _timed(
                lambda: forget(store, ForgetTarget.literal(literal, OWNER), "full_purge", gate=True),  # noqa: B023
                trace=trace)
            ok &= receipt.verification.passed and not any(receipt.verification.disk_scan.values())
            (peaks.append(peak) if trace else (times.append(secs), writes.append(ws)))
            store.close()
    return statistics.median(times), max(peaks), statistics.median(writes), len(text.encode()), ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-mb", type=float, default=2.0)
    ap.add_argument("--forget-mb", type=float, default=20.0)
    ap.add_argument("--literals", type=int, default=3, help="literals the gated owner forgot first")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--max-ratio", type=float, default=3.0)
    ap.add_argument("--max-memory", type=float, default=4.0, help="forget's traced peak / record size")
    a = ap.parse_args(argv)
    literals = [f"GT{i}-OCHRE-{5000 + i}" for i in range(a.literals)]
    text = _text(a.write_mb)
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as d:
        tmp = Path(d)
        ung = _write(tmp, "ungated", text, [], a.reps)
        gat = _write(tmp, "gated", text, literals, a.reps)
        fs, fpeak, fwrite, size, verified = _forget(tmp, a.forget_mb, a.reps)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    w_ratio, f_ratio, m_ratio = gat / ung, fs / fwrite, fpeak / size
    checks = {"gated write": w_ratio <= a.max_ratio, "forget time": f_ratio <= a.max_ratio,
              "forget memory": m_ratio <= a.max_memory, "forget verified": verified}
    print(f"write {len(text.encode()) / 1e6:.1f} MB: ungated {ung:.3f} s, gated by {a.literals} literal(s) "
          f"{gat:.3f} s: ratio {w_ratio:.2f} (target ≤ {a.max_ratio:g})")
    print(f"forget a literal in a {size / 1e6:.1f} MB record: {fs:.3f} s vs its ungated write {fwrite:.3f} s: ratio "
          f"{f_ratio:.2f} (target ≤ {a.max_ratio:g}); traced peak {fpeak / 1e6:.1f} MB = {m_ratio:.2f}x the record "
          f"(target ≤ {a.max_memory:g}); verified {verified}")
    print(f"peak RSS of the run {rss_mb:.0f} MB; reps {a.reps}")
    failed = [k for k, ok in checks.items() if not ok]
    print("FAIL: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

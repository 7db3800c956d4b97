"""Scan and erasure of one user at 10^4, 10^5 and 10^6 memories, LlamaIndex and CrewAI (issue 39),
beside each system's own per-user read and delete on the same data, in one run.

    python bench/bench_scale_llamaindex_crewai.py [--memories 10000 100000 1000000] [--reps 1] [--own-max 100000]
    /work/venv-crewai/bin/python bench/bench_scale_llamaindex_crewai.py --only crewai  (CI: .venv-crewai)

Each instance is built as ``bench/bench_scan.py`` builds it (500 users, 10 carriers of a canary,
the template's records copied in the package's own store), in a temp dir, then on copies:

* ``scan``: ``scan_system`` of user ``u0`` with the 10 canaries, attached read-only as
  ``traceless scan`` attaches (p50 wall, and the process's CPU seconds);
* ``records_cpu``: the system's scan alone (the records read and decoded, no byte scan of the
  files), the process's CPU seconds: the decode part, whose growth per decade issue 39 targets ≤ 3×;
* ``own read``: the system's own per-user read: LlamaIndex loads its index
  (``load_index_from_storage``), retrieves the user's top-k nodes with a ``user_id`` metadata
  filter and reads the chat history (``Memory.get()``); CrewAI ``Memory.list_records`` of the
  user's scope and a ``recall`` in it;
* ``own delete``: the system's own deletion of the user: LlamaIndex ``Memory.reset()`` and
  ``delete_ref_doc`` (with the docstore) of each of the user's documents, then ``persist``;
  CrewAI ``Memory.forget(scope=…)`` on its storage's defaults (the background compaction its
  ``LanceDBStorage`` starts when it opens the table waited for: the erasure opens it with
  ``compact_every=0`` and compacts after the deletion itself);
* ``erase``: ``erase_system`` of ``u0`` and its canary (plan, native deletions, the kernel,
  compaction, re-scan, bystander digests, signed receipt), on a fresh copy.

Printed per system: one row per size and the growth per decade of each column (the target of
issue 39: a scan ≤ 2 s at 10^5 and ≤ 10 s at 10^6, an erasure ≤ 20 s at 10^6). ``uptime``'s load
before and after. Exits 1 when a receipt does not pass or a scan misses a canary.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import SYSTEMS, _check, _runtime  # noqa: E402

from traceless.audit import make_canary  # noqa: E402
from traceless.systems import (  # noqa: E402
    DeletionTarget,
    ErasurePlan,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
    system_class,
)

USER = "u0"


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def _scan(name: str, cfg: dict[str, Any], canaries: list[str]) -> Any:
    system = system_class(name).attach(load_system_config(name, cfg), read_only=True)
    try:
        return scan_system(system, USER, canaries)
    finally:
        system.close()


def _records(name: str, cfg: dict[str, Any], canaries: list[str]) -> Any:
    """The system's scan alone (its records: the decode part), without the byte scan of the files."""
    system = system_class(name).attach(load_system_config(name, cfg), read_only=True)
    try:
        return system.scan(USER, canaries)
    finally:
        system.close()


def _own_read(name: str, work: Path) -> int:
    system = open_system(name, work, load_system_config(name, {}), _runtime())
    try:
        items = system.context(USER, "what about the weather")
        if name == "crewai":
            items += system._user_records(USER)  # type: ignore[attr-defined]
        return len(items)
    finally:
        system.close()


def _own_delete(name: str, work: Path) -> None:
    system = open_system(name, work, load_system_config(name, {}), _runtime())
    try:
        if name == "llamaindex":
            system.own_deletion(USER)  # type: ignore[attr-defined]
        elif name == "crewai":  # Memory.forget(scope=…) as CrewAI is used (its storage's defaults: the
            # compaction it starts at open waited for by close), not the erasure's compact_every=0
            system.delete("forget_scope", DeletionTarget(owner=USER, literal="", session_id=""))
        else:
            system.native_erasure(ErasurePlan(system=name, user=USER, actions=[]))
    finally:
        system.close()


def _erase(name: str, cfg: dict[str, Any], canary: str, state: Path) -> bool:
    system = system_class(name).attach(load_system_config(name, cfg), _runtime(), read_only=False)
    try:
        return bool(erase_system(system, USER, [canary], state_dir=state, key=b"k" * 32).verification.passed)
    finally:
        system.close()


def _moved(cfg: dict[str, Any], src: Path, dst: Path) -> dict[str, Any]:
    return {k: str(v).replace(str(src), str(dst)) for k, v in cfg.items()}


def measure(name: str, n: int, canaries: list[str], reps: int, tmp: Path,
            own_max: int = 10**9) -> dict[str, float] | None:
    base = tmp / f"{name}-{n}"
    cfg = SYSTEMS[name].build(base / "m", n, canaries)
    scans = [_timed(lambda: _scan(name, cfg, canaries)) for _ in range(reps)]
    missed = _check(_scan_reveal(name, cfg, canaries), canaries)
    row = {"scan": statistics.median(s[0] for s in scans), "scan_cpu": statistics.median(s[1] for s in scans),
           "records_cpu": statistics.median(_timed(lambda: _records(name, cfg, canaries))[1] for _ in range(reps))}
    own = n <= own_max  # LlamaIndex's own read and delete load the whole index in Python (83 s at 10^5)
    row["own_read"] = _timed(lambda: _own_read(name, base / "m"))[0] if own else float("nan")
    row["own_delete"] = float("nan")
    for key, fn in (("own_delete", lambda w, c: _own_delete(name, w / "m")),
                    ("erase", lambda w, c: _erase(name, c, canaries[0], w / "state"))):
        if key == "own_delete" and not own:
            continue
        times, ok = [], True
        for rep in range(reps):
            work = tmp / f"{name}-{n}-{key}-{rep}"
            shutil.copytree(base, work)
            os.sync()  # the copy's dirty pages written before the clock starts (not the erasure's I/O)
            t, _, res = _timed(lambda w=work, f=fn: f(w, _moved(cfg, base, w)))  # type: ignore[misc]
            times.append(t)
            ok &= res is not False
            shutil.rmtree(work)
        row[key] = statistics.median(times)
        if not ok:
            print(f"{name} {n}: a receipt did not pass  FAIL")
            return None
    shutil.rmtree(base)
    if missed:
        print(f"{name} {n}: the scan missed {missed}  FAIL")
        return None
    return row


def _scan_reveal(name: str, cfg: dict[str, Any], canaries: list[str]) -> Any:
    system = system_class(name).attach(load_system_config(name, cfg), read_only=True)
    try:
        return scan_system(system, USER, canaries, reveal=True)
    finally:
        system.close()


COLS = ("scan", "scan_cpu", "records_cpu", "own_read", "own_delete", "erase")


def report(name: str, rows: dict[int, dict[str, float]]) -> None:
    print(f"\n{name}: seconds (wall; scan_cpu: the process's CPU; records_cpu: the system's scan without the byte "
          "scan of the files, CPU), ratio erase / own delete, scan / own read")
    print(f"{'memories':>9} " + " ".join(f"{c:>10}" for c in COLS) + f" {'erase/own':>10} {'scan/read':>10}")
    for n, r in sorted(rows.items()):
        print(f"{n:>9} " + " ".join(f"{r[c]:>10.2f}" for c in COLS)
              + f" {r['erase'] / r['own_delete']:>10.2f} {r['scan'] / r['own_read']:>10.2f}")
    sizes = sorted(rows)
    for a, b in zip(sizes, sizes[1:], strict=False):
        decades = np.log10(b / a)
        print(f"growth per decade {a}→{b}: " + ", ".join(
            f"{c} {(rows[b][c] / rows[a][c]) ** (1 / decades):.1f}×" for c in COLS if rows[a][c] > 0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--own-max", type=int, default=10**9,
                    help="run the system's own read and delete only up to this size (LlamaIndex's load the whole "
                         "index: 83 s at 10^5 under load); above it their columns print nan")
    ap.add_argument("--only", nargs="+", choices=["llamaindex", "crewai"], default=["llamaindex", "crewai"])
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rng = np.random.default_rng(0)
    canaries = [make_canary(rng) for _ in range(10)]
    print(f"load before {os.getloadavg()}")
    ok = True
    for name in a.only:
        import importlib.util

        if importlib.util.find_spec(SYSTEMS[name].module.split(".")[0]) is None:
            print(f"{name}: skipped: {SYSTEMS[name].module} is not installed in {sys.prefix}")
            continue
        rows: dict[int, dict[str, float]] = {}
        for n in a.memories:
            with tempfile.TemporaryDirectory(prefix=f"bench-scale-{name}-") as tmp:
                row = measure(name, n, canaries, a.reps, Path(tmp), a.own_max)
            if row is None:
                ok = False
                continue
            rows[n] = row
            print(f"{name} {n}: " + ", ".join(f"{k} {v:.2f} s" for k, v in row.items()), flush=True)
        report(name, rows)
    print(f"load after {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""``scan`` and per-user erasure on a live LangGraph instance (issue #23, Performance: "scan
of a LangGraph instance with 10^4 memories over 10^3 users: ≤ 2 s; a per-user forget on
the same instance: ≤ 5 s including compaction and verification"), side by side with
LangGraph's own ``store.delete`` + ``delete_thread`` on the same data.

    python bench/bench_erase_langgraph.py [--users 1000] [--items 10] [--reps 3]

The instance is built through LangGraph itself (traceless's two-node graph, ``summarize``
off: no model call): one session per user with ``--items`` user turns, so the SqliteStore
holds users × items memories and the SqliteSaver one thread per user (its checkpoints and
writes). One turn of every user carries that user's canary.

Timed, p50 of ``--reps``, each on a fresh copy of the instance (the copy is not timed):

* ``scan``: ``attach(read_only=True)`` + ``scan_system(user, [canary])`` (every store, every
  file's bytes);
* ``forget``: ``attach`` + ``erase_system`` (plan, journal, the native deletions, the rows they
  leave, VACUUM of both files, re-scan, bystander digests before/after, signing);
* ``native``: LangGraph's own deletion of the same user: ``store.search`` of the user's
  namespace, ``store.delete`` of each item, ``checkpointer.delete_thread`` of the thread.

Exits 1 when a target is missed or when the erasure's receipt does not pass. The native
row also says how many bytes of the canary its deletion left in the files (none where the
platform's SQLite zeroes freed pages, as Debian's build with SQLITE_SECURE_DELETE does, and
the WAL was checkpointed on close; what the native deletion misses is a matter of which
deletions the application calls: ``store.delete`` alone leaves every checkpoint).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceless.forget import receipt_key, scan_files
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import (
    LangGraphSystem,
    SystemRuntime,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
)

SCAN_TARGET_S, ERASE_TARGET_S = 2.0, 5.0


def canary(i: int) -> str:
    return f"QX{i % 10}-BENCHCANARY-{i:04d}"


def build(root: Path, users: int, items: int) -> None:
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "unused"), HashingEmbedder(), "scripted")
    system = open_system("langgraph", root, load_system_config("langgraph", {"summarize": False}), rt)
    sessions = []
    for u in range(users):
        turns = [Turn(role="user", content=f"user {u} note {j}: the weather on day {j} was fine")
                 for j in range(items - 1)]
        turns.append(Turn(role="user", content=f"my account token is {canary(u)}"))
        sessions.append(Session(session_id="s1", user_id=f"user-{u:04d}", turns=turns))
    system.write(sessions)
    system.close()


def config(root: Path) -> dict[str, Any]:
    return {"store": {"kind": "sqlite", "path": str(root / "store.db")},
            "checkpointer": {"kind": "sqlite", "path": str(root / "checkpoints.db")}}


def _p50(prepare: Callable[[int], Path], run: Callable[[Path, int], object], reps: int) -> tuple[float, object]:
    times, last = [], None
    for r in range(reps):
        root = prepare(r)
        t0 = time.perf_counter()
        last = run(root, r)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), last


def scan(root: Path, u: int) -> object:
    system = LangGraphSystem.attach(load_system_config("langgraph", config(root)), read_only=True)
    rep = scan_system(system, f"user-{u:04d}", [canary(u)])
    system.close()
    return rep


def forget(root: Path, u: int) -> object:
    system = LangGraphSystem.attach(load_system_config("langgraph", config(root)), read_only=False)
    receipt = erase_system(system, f"user-{u:04d}", [canary(u)], state_dir=root.parent / f"state-{u}",
                           key=receipt_key())
    system.close()
    return receipt


def native(root: Path, u: int) -> object:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    sc = sqlite3.connect(str(root / "store.db"), isolation_level=None, check_same_thread=False)
    cc = sqlite3.connect(str(root / "checkpoints.db"), check_same_thread=False)
    store, saver = SqliteStore(sc), SqliteSaver(cc)
    ns = (f"user-{u:04d}", "memories")
    for item in store.search(ns, limit=100_000):
        store.delete(ns, item.key)
    saver.delete_thread(f"user-{u:04d}/s1")
    sc.close()
    cc.close()
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--items", type=int, default=10, help="store memories per user")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    import langgraph.checkpoint.sqlite  # noqa: F401  (imported once, outside every timing)
    import langgraph.store.sqlite  # noqa: F401

    tmp = Path(tempfile.mkdtemp(prefix="bench-erase-lg-"))
    try:
        base = tmp / "base"
        t0 = time.perf_counter()
        build(base, a.users, a.items)
        print(f"built {a.users * a.items} store items over {a.users} users (+ {a.users} threads) "
              f"in {time.perf_counter() - t0:.1f} s; files: "
              + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in sorted(base.iterdir())))
        victims = [(7 * r + 3) % a.users for r in range(a.reps)]

        def fresh(r: int) -> Path:
            dst = tmp / f"copy-{r}"
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(base, dst)
            return dst

        t_scan, rep = _p50(lambda r: base, lambda root, r: scan(root, victims[r]), a.reps)
        t_forget, receipt = _p50(fresh, lambda root, r: forget(root, victims[r]), a.reps)
        t_native, _ = _p50(fresh, lambda root, r: native(root, victims[r]), a.reps)
        left = {k: n for k, n in scan_files(sorted((tmp / f"copy-{a.reps - 1}").iterdir()), canary(victims[-1])).items()
                if n}
        hits = len(rep.hits)  # type: ignore[attr-defined]
        print(f"{'':10s} {'p50 s':>8s} {'target s':>9s} {'× native':>9s}")
        print(f"{'native':10s} {t_native:8.3f} {'':>9s} {1.0:9.2f}   store.delete × {a.items} + delete_thread; "
              f"canary bytes left: {sum(left.values())} {sorted(Path(k).name for k in left)}")
        print(f"{'scan':10s} {t_scan:8.3f} {SCAN_TARGET_S:9.1f} {t_scan / t_native:9.2f}   {hits} records of the user")
        print(f"{'forget':10s} {t_forget:8.3f} {ERASE_TARGET_S:9.1f} {t_forget / t_native:9.2f}   "
              f"passed={receipt.verification.passed} "  # type: ignore[attr-defined]
              f"guarantee={','.join(receipt.guarantee)}")  # type: ignore[attr-defined]
        ok = t_scan <= SCAN_TARGET_S and t_forget <= ERASE_TARGET_S and receipt.verification.passed  # type: ignore[attr-defined]
        if not ok:
            print("FAIL: a target is missed or the receipt did not pass", file=sys.stderr)
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

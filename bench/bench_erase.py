"""``traceless scan`` and ``traceless forget --memory mem0`` on big live mem0 instances
(issues #23, #39), side by side with mem0's own per-user read and delete on the same data,
at one or more sizes in one run, with each operation's growth per decade of memories.

    python bench/bench_erase.py [--memories 10000,100000,1000000] [--users N[,N...]] [--reps 3]
                                [--instance DIR] [--baseline-src DIR]

Each instance is mem0's own layout (qdrant local path, history db of its own), ``--users``
users (default: memories/10), the bench user's memories each carrying a canary; built by
``bench/mem0_instance.py`` (the first points through mem0's own vector store and
``SQLiteManager``, the rest written in bulk in qdrant local's own point format, checked byte
for byte against mem0's). ``--instance DIR`` keeps each in ``DIR/n<memories>`` and reuses it
(check ``df`` first: 10^6 memories take about 4.2 GB, and each rep copies it twice). Each rep
copies the instance fresh, then times, each side in a fresh worker process that imports mem0
and traceless before the clock starts:

* ``open``, ``get_all``, ``delete_all``: mem0's own vector store opened (qdrant local loads
  every point into memory), ``get_all(filters={"user_id": U})`` (every memory of the user),
  ``delete_all(user_id=U)`` — what the user's application would call; ``open+delete_all`` is
  the cost of one per-user deletion from a cold start, the ``x own delete`` column's base;
* ``scan``: ``traceless.scan("mem0", cfg, user=U, literals=[canary])`` (read-only), and
  ``scan (CLI)``: the whole ``traceless scan`` command in a cold process, imports included;
* ``forget``: ``traceless.forget(system="mem0", config=cfg, user=U, literals=[canary])``:
  plan, journal, the deletions (with ``secure_delete``; VACUUM only of a file the re-scan's
  byte scan still finds the canary in), re-scan, bystanders (the touched containers and
  each table's count), signed receipt.

Wall and CPU seconds (CPU: what a loaded machine changes least) are p50 over ``--reps``;
``load`` is printed before and after, and per size. ``--baseline-src DIR`` (a ``src`` folder
of another commit, e.g. ``git archive d46e5dd src | tar -x -C /tmp/old``) runs the scan and
the forget with that code on its own fresh copies, interleaved, and prints the ratio; both
must find the same scan and sign the same claims and checks. Exits 1 when a receipt does
not pass, the sides disagree, or a target is missed (scan ≤ 2 s up to 10^5, ≤ 10 s at 10^6;
forget ≤ 5 s at 10^4, ≤ 20 s at 10^6).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SCAN_TARGET_S, FORGET_TARGET_S = 2.0, 5.0
USER = "u7"
CANARY = "CANARY-bench-4411"


def _store_and_db(cfg: dict[str, Any]) -> tuple[Any, Any]:
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    vc = VectorStoreConfig(**cfg["vector_store"])
    return VectorStoreFactory.create(vc.provider, vc.config), SQLiteManager(cfg["history_db_path"])


def build(root: Path, n: int, users: int, seed: int = 0) -> tuple[Path, str]:
    """``n`` memories of ``users`` users (``mem0_instance``: mem0's own layout, built in bulk)."""
    import mem0_instance

    def memory(i: int, rng: np.random.Generator) -> mem0_instance.Memory:
        o = f"u{i % users}"
        t = f"{o} said: memory {i} about the weather" + (f" code {CANARY}" if o == USER else "")
        return mem0_instance.point_id(i, rng), t, {"data": t, "text_lemmatized": t.lower(), "user_id": o,
                                                   "hash": f"{i:032x}", "created_at": "2026-12-01T00:00:00+00:00"}

    cfg = mem0_instance.build(root, n, memory, seed)
    path = root.parent / "bench.json"
    path.write_text(json.dumps(cfg))
    return path, CANARY


def _copy(src: Path, dst: Path, cfg: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    out = dst.parent / f"{dst.name}.json"
    out.write_text(cfg.read_text().replace(str(src), str(dst)))
    return out


def own_ops(cfg_path: Path, top_k: int) -> dict[str, float]:
    """mem0's own per-user read and delete on the instance, in this process: opening the
    vector store (qdrant local loads every point), ``get_all(filters={"user_id": U})`` (all of
    the user's memories: ``top_k``), ``delete_all(user_id=U)``; wall and CPU seconds."""
    from traceless.systems._mem0 import _import_mem0

    main = _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    out: dict[str, float] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    store, db = _store_and_db(json.loads(cfg_path.read_text()))
    mem = main.Memory.__new__(main.Memory)
    mem.config, mem.vector_store, mem._entity_store, mem.db = None, store, None, db
    mem.enable_graph, mem.reranker = False, None
    t1, c1 = time.perf_counter(), time.process_time()
    out["open"], out["open CPU"] = t1 - t0, c1 - c0
    got = mem.get_all(filters={"user_id": USER}, top_k=top_k)
    t2, c2 = time.perf_counter(), time.process_time()
    out["get_all"], out["get_all CPU"] = t2 - t1, c2 - c1
    mem.delete_all(user_id=USER)
    out["delete_all"], out["delete_all CPU"] = time.perf_counter() - t2, time.process_time() - c2
    out["open+delete_all"], out["open+delete_all CPU"] = out["open"] + out["delete_all"], out["open CPU"] + out["delete_all CPU"]
    out["get_all found"] = float(len(got.get("results", got) if isinstance(got, dict) else got))
    db.close()
    store.client.close()
    return out


def worker(forget_cfg: Path, canary: str, native_cfg: Path | None, top_k: int) -> dict[str, Any]:
    """One side's timings, in this (fresh) process; what it found and signed, to compare."""
    import traceless
    from traceless.systems._mem0 import _import_mem0

    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    out: dict[str, Any] = own_ops(native_cfg, top_k) if native_cfg else {}
    t, c = time.perf_counter(), time.process_time()
    rep = traceless.scan("mem0", forget_cfg, user=USER, literals=[canary])
    out["scan"], out["scan CPU"] = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    r = traceless.forget(system="mem0", config=forget_cfg, user=USER, literals=[canary])
    out["forget"], out["forget CPU"] = time.perf_counter() - t, time.process_time() - c
    out["passed"] = r.verification.passed and bool(rep.hits)
    out["found"] = {"stores": rep.stores, "hits": sorted(h.model_dump_json() for h in rep.hits),
                    "files": sorted((Path(f.path).name, f.count) for f in rep.files),
                    "claims": r.verification.claims, "checks": r.verification.checks,
                    "tiers": {k: v.model_dump(mode="json") for k, v in r.tiers.items()}}
    return out


def _cli_scan(src: Path, cfg: Path, canary: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys; from traceless.cli import main; sys.exit(main())", "scan",
                    "--memory", "mem0", "--memory-config", str(cfg), "--user", USER, "--literal", canary, "--json"],
                   env={**os.environ, "PYTHONPATH": str(src)}, check=True, capture_output=True)
    return time.perf_counter() - t


def _side(src: Path, tmp: Path, tag: str, cfg: Path, canary: str, native: bool, top_k: int,
          own: bool = True) -> dict[str, Any]:
    """The CLI scan, then (in a fresh worker) mem0's own read and delete on a copy, the scan
    and the forget on another copy."""
    f = _copy(tmp / "src", tmp / f"f{tag}", cfg)
    d = _copy(tmp / "src", tmp / f"d{tag}", cfg) if native and own else None
    cli = _cli_scan(src, f, canary)  # read-only: the forget's copy is still as built
    p = subprocess.run([sys.executable, __file__, "--worker", str(f), canary, str(d or ""), str(top_k)],
                       env={**os.environ, "PYTHONPATH": str(src)}, check=True, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    out["scan (CLI)"] = cli
    for x in (f, *([d] if d else [])):
        shutil.rmtree(x.with_suffix(""), ignore_errors=True)
    return out


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


OPS = ("open", "get_all", "delete_all", "open+delete_all", "scan", "scan (CLI)", "forget")


def _targets(n: int) -> dict[str, float]:
    """Issue #23 (10^4: scan 2 s, forget 5 s) and #39 (10^5: scan 2 s; 10^6: scan 10 s, forget 20 s)."""
    out = {"scan": SCAN_TARGET_S if n <= 100_000 else 10.0}
    if n <= 10_000 or n >= 1_000_000:
        out["forget"] = FORGET_TARGET_S if n <= 10_000 else 20.0
    return out


def _table(n: int, rows: dict[str, dict[str, list[float]]]) -> bool:
    """One size's p50s, each beside mem0's own ``open+delete_all`` (wall and CPU)."""
    ok, old, targets = True, rows.get("baseline"), _targets(n)
    print(f"{'operation':<20} {'p50 s':>8} {'CPU s':>8} {'x own delete':>13} {'target s':>9}"
          + (f" {'baseline s':>11} {'this/baseline':>14}" if old else ""))
    this = rows["this"]
    if "open+delete_all" not in this:
        print("(mem0's own operations skipped at this size, --own-max: qdrant local's client loads every point "
              "into memory, over 20 GB at 10^6 points)")
    base = statistics.median(this.get("open+delete_all", [float("nan")]))
    for name in (o for o in OPS if o in this):
        p50, cpu = statistics.median(this[name]), statistics.median(this.get(f"{name} CPU", [float("nan")]))
        target = targets.get(name)
        ok = ok and (target is None or p50 <= target)
        line = f"{name:<20} {p50:>8.3f} {cpu:>8.3f} {p50 / base:>13.2f} {target if target else '-':>9}"
        if old and name in old:
            b = statistics.median(old[name])
            line += f" {b:>11.3f} {p50 / b:>14.2f}"
        print(line)
    for name in ("scan CPU", "forget CPU") if old is not None else ():  # what a loaded machine changes least
        p50, b = statistics.median(this[name]), statistics.median((old or {})[name])
        print(f"{name:<20} {p50:>8.3f} {'':>8} {'':>13} {'':>9} {b:>11.3f} {p50 / b:>14.2f}")
    return ok


def _growth(sizes: list[int], per: dict[int, dict[str, list[float]]]) -> None:
    """Each operation's growth per decade of memories between consecutive sizes (10x the
    memories: 1.0 is flat, 10.0 linear)."""
    if len(sizes) < 2:
        return
    print("growth per decade (p50 ratio per 10x memories):")
    print(f"{'operation':<20} " + " ".join(f"{f'{a}->{b}':>18}" for a, b in itertools.pairwise(sizes)))
    for name in (o for o in OPS if all(o in per[n] for n in sizes)):
        cells = []
        for a, b in itertools.pairwise(sizes):
            ta, tb = statistics.median(per[a][name]), statistics.median(per[b][name])
            cells.append(f"{(tb / ta) ** (1 / math.log10(b / a)):>17.2f}x")
        print(f"{name:<20} " + " ".join(cells))


def _instance(a: argparse.Namespace, tmp: Path, n: int, users: int) -> tuple[Path, str]:
    """The instance of ``n`` memories in ``tmp/src``: reused from ``--instance DIR/n<n>`` when
    it is there, else built (and kept there with ``--instance``)."""
    keep = a.instance / f"n{n}" if a.instance else None
    if (tmp / "src").is_symlink():
        (tmp / "src").unlink()
    shutil.rmtree(tmp / "src", ignore_errors=True)
    if keep and (keep / "bench.json").is_file():
        (tmp / "src").symlink_to(keep.resolve() / "src")
        cfg = tmp / "bench.json"
        cfg.write_text((keep / "bench.json").read_text().replace(str(keep.resolve() / "src"), str(tmp / "src")))
        print(f"{n} memories: reusing the instance in {keep}")
        return cfg, CANARY
    t0 = time.perf_counter()
    cfg, canary = build(tmp / "src", n, users)
    print(f"{n} memories over {users} users: built in {time.perf_counter() - t0:.1f}s "
          f"({sum(p.stat().st_size for p in (tmp / 'src').rglob('*') if p.is_file()) / 2**30:.2f} GiB; mem0's own "
          "vector store and history for the first points, the rest in qdrant local's own format: bench/mem0_instance.py)")
    if keep:
        shutil.copytree(tmp / "src", keep / "src")
        (keep / "bench.json").write_text(cfg.read_text().replace(str(tmp / "src"), str(keep.resolve() / "src")))
    return cfg, canary


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _run_size(a: argparse.Namespace, tmp: Path, sides: dict[str, Path], n: int, users: int,
              ) -> tuple[dict[str, dict[str, list[float]]], bool, bool]:
    cfg, canary = _instance(a, tmp, n, users)
    rows: dict[str, dict[str, list[float]]] = {k: {} for k in sides}
    found: dict[str, Any] = {}
    passed = True
    for rep in range(a.reps):
        order = list(sides) if rep % 2 == 0 else list(reversed(sides))
        for name in order:
            out = _side(sides[name], tmp, f"{name}{rep}", cfg, canary, native=name == "this", top_k=n // users + 1,
                        own=n <= a.own_max)
            passed = passed and bool(out.pop("passed"))
            found.setdefault(name, out.pop("found"))
            for k, v in out.items():
                rows[name].setdefault(k, []).append(v)
    print(f"-- {n} memories, {users} users (load {os.getloadavg()[0]:.2f}); receipts: "
          f"{'all passed' if passed else 'a receipt FAILED'}:")
    ok = _table(n, rows)
    if not ok:
        print(f"   {n} memories: a target was MISSED")
    return rows, ok and passed, all(found[k] == found["this"] for k in found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=_sizes, default=[10_000], help="sizes, e.g. 10000,100000,1000000")
    ap.add_argument("--users", type=_sizes, help="users per size (one value, or one per size; default: memories/10)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline-src", type=Path, help="a src folder of another commit to compare with")
    ap.add_argument("--instance", type=Path, help="keep each built instance in DIR/n<memories> (reused when there)")
    ap.add_argument("--own-max", type=int, default=100_000,
                    help="mem0's own operations only up to this size (qdrant local loads every point: "
                         "over 20 GB of memory at 10^6, measured)")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        f, canary, d, top_k = a.worker
        print(json.dumps(worker(Path(f), canary, Path(d) if d else None, int(top_k))))
        return 0
    users = a.users or [n // 10 for n in a.memories]
    if len(users) not in (1, len(a.memories)):
        ap.error("--users: one value, or one per size of --memories")
    users = users * len(a.memories) if len(users) == 1 else users
    tmp = Path(tempfile.mkdtemp(prefix="traceless-bench-erase-"))
    os.environ.setdefault("TRACELESS_HOME", str(tmp / "home"))
    (Path(os.environ["TRACELESS_HOME"])).mkdir(mode=0o700, parents=True, exist_ok=True)
    from traceless.systems._mem0 import _import_mem0

    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    print(f"load before: {_load()}")
    sides = {"this": Path(__file__).resolve().parents[1] / "src"}
    if a.baseline_src:
        sides["baseline"] = a.baseline_src.resolve()
    per: dict[int, dict[str, list[float]]] = {}
    ok = same = True
    try:
        for n, u in zip(a.memories, users, strict=True):
            rows, ok_n, same_n = _run_size(a, tmp, sides, n, u)
            per[n], ok, same = rows["this"], ok and ok_n, same and same_n
        _growth(a.memories, per)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load after: {_load()}")
    print(f"receipts and targets: {'all passed and met' if ok else 'a receipt FAILED or a target was MISSED'}"
          + (f"; baseline and this: {'the same scan, claims and checks' if same else 'DIFFER'}"
             if a.baseline_src else ""))
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())

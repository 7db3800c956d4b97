"""``traceless scan`` and ``traceless forget --memory mem0`` on a big live mem0 instance
(issue #23, Performance: scan ≤ 2 s, a per-user forget ≤ 5 s incl. compaction and
verification, with 10^4 memories over 10^3 users), side by side with mem0's own
``delete_all(user_id=…)`` on the same data, in one run.

    python bench/bench_erase.py [--memories 10000] [--users 1000] [--reps 3] [--baseline-src DIR]

The instance is mem0's own layout (qdrant local path, history db of its own): every memory
is a point inserted through mem0's vector store (random 384-d vectors: no embedder runs)
with mem0's payload shape and one ``ADD`` row through mem0's ``SQLiteManager``; the bench
user's memories each carry a canary. Each rep copies the instance fresh, then times

* ``delete_all``: mem0's own per-user deletion (what the user would call);
* ``scan``: ``traceless.scan("mem0", cfg, user=U, literals=[canary])`` (read-only);
* ``forget``: ``traceless.forget(system="mem0", config=cfg, user=U, literals=[canary])``:
  plan, journal, mem0's delete_all, the residue, VACUUM, re-scan, bystanders, signed receipt.

Times (wall, and the worker's CPU time: ``… CPU``, what a loaded machine changes least) are p50 over ``--reps``, each side in a fresh worker process that imports mem0 and
traceless before the clock starts (imports excluded), plus ``scan (CLI)``: the whole
``traceless scan`` command in a cold process, imports included (what a user waits for).
``--baseline-src DIR`` (a ``src`` folder of another commit, e.g. ``git archive a4871d9 src |
tar -x -C /tmp/old``) runs the same operations with that code on its own fresh copies,
interleaved with this code's (alternating which goes first), and prints the ratio per
operation; the two sides must find the same scan and sign the same claims and checks
(compared, else exit 1). ``uptime``'s load is printed before and after. It exits 1 when a
receipt does not pass, the sides disagree, or a target is missed.
"""

from __future__ import annotations

import argparse
import json
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


def delete_all(cfg_path: Path) -> tuple[float, float]:
    from traceless.systems._mem0 import _import_mem0

    main = _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    t0, c0 = time.perf_counter(), time.process_time()
    store, db = _store_and_db(json.loads(cfg_path.read_text()))
    mem = main.Memory.__new__(main.Memory)
    mem.config, mem.vector_store, mem._entity_store, mem.db = None, store, None, db
    mem.delete_all(user_id=USER)
    db.close()
    store.client.close()
    return time.perf_counter() - t0, time.process_time() - c0


def worker(scan_cfg: Path, forget_cfg: Path, canary: str, native_cfg: Path | None) -> dict[str, Any]:
    """One side's timings, in this (fresh) process; what it found and signed, to compare."""
    import traceless
    from traceless.systems._mem0 import _import_mem0

    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    out: dict[str, Any] = dict(zip(("delete_all", "delete_all CPU"), delete_all(native_cfg), strict=True)
                               ) if native_cfg else {}
    t, c = time.perf_counter(), time.process_time()
    rep = traceless.scan("mem0", scan_cfg, user=USER, literals=[canary])
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


def _side(src: Path, tmp: Path, tag: str, cfg: Path, canary: str, native: bool) -> dict[str, Any]:
    s, f = _copy(tmp / "src", tmp / f"s{tag}", cfg), _copy(tmp / "src", tmp / f"f{tag}", cfg)
    d = _copy(tmp / "src", tmp / f"d{tag}", cfg) if native else None
    p = subprocess.run([sys.executable, __file__, "--worker", str(s), str(f), canary, str(d or "")],
                       env={**os.environ, "PYTHONPATH": str(src)}, check=True, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    out["scan (CLI)"] = _cli_scan(src, s, canary)
    for x in (s, f, *([d] if d else [])):
        shutil.rmtree(x.with_suffix(""), ignore_errors=True)
    return out


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _table(rows: dict[str, dict[str, list[float]]]) -> bool:
    ok, base = True, statistics.median(rows["this"]["delete_all"])
    old = rows.get("baseline")
    print(f"{'operation':<14} {'p50 s':>8} {'x delete_all':>13} {'target s':>9}"
          + (f" {'baseline s':>11} {'this/baseline':>14}" if old else ""))
    for name, target in (("delete_all", None), ("scan", SCAN_TARGET_S), ("scan (CLI)", None),
                         ("forget", FORGET_TARGET_S), ("delete_all CPU", None), ("scan CPU", None),
                         ("forget CPU", None)):
        if name.endswith("CPU"):
            base = statistics.median(rows["this"]["delete_all CPU"])
        p50 = statistics.median(rows["this"][name])
        ok = ok and (target is None or p50 <= target)
        line = f"{name:<14} {p50:>8.3f} {p50 / base:>13.2f} {target if target else '-':>9}"
        if old and name in old:
            b = statistics.median(old[name])
            line += f" {b:>11.3f} {p50 / b:>14.2f}"
        print(line)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=1_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline-src", type=Path, help="a src folder of another commit to compare with")
    ap.add_argument("--instance", type=Path, help="build the instance here (kept; reused when it is there)")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        s, f, canary, d = a.worker
        print(json.dumps(worker(Path(s), Path(f), canary, Path(d) if d else None)))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="traceless-bench-erase-"))
    os.environ.setdefault("TRACELESS_HOME", str(tmp / "home"))
    (Path(os.environ["TRACELESS_HOME"])).mkdir(mode=0o700, parents=True, exist_ok=True)
    from traceless.systems._mem0 import _import_mem0

    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    print(f"load before: {_load()}")
    t0 = time.perf_counter()
    if a.instance and (a.instance / "bench.json").is_file():
        (tmp / "src").symlink_to(a.instance.resolve() / "src")
        cfg, canary = tmp / "bench.json", CANARY
        cfg.write_text((a.instance / "bench.json").read_text().replace(str(a.instance.resolve() / "src"),
                                                                       str(tmp / "src")))
        print(f"reusing the instance in {a.instance}")
    else:
        cfg, canary = build(tmp / "src", a.memories, a.users)
        print(f"built {a.memories} memories over {a.users} users in {time.perf_counter() - t0:.1f}s")
        if a.instance:
            shutil.copytree(tmp / "src", a.instance / "src")
            (a.instance / "bench.json").write_text(cfg.read_text().replace(str(tmp / "src"),
                                                                           str(a.instance.resolve() / "src")))
    sides = {"this": Path(__file__).resolve().parents[1] / "src"}
    if a.baseline_src:
        sides["baseline"] = a.baseline_src.resolve()
    rows: dict[str, dict[str, list[float]]] = {k: {} for k in sides}
    found: dict[str, Any] = {}
    passed = True
    for rep in range(a.reps):
        order = list(sides) if rep % 2 == 0 else list(reversed(sides))
        for name in order:
            out = _side(sides[name], tmp, f"{name}{rep}", cfg, canary, native=name == "this")
            passed = passed and bool(out.pop("passed"))
            found.setdefault(name, out.pop("found"))
            for k, v in out.items():
                rows[name].setdefault(k, []).append(v)
    ok = _table(rows)
    same = all(found[k] == found["this"] for k in found)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"load after: {_load()}")
    print(f"receipts: {'all passed' if passed else 'FAILED'}; targets: {'met' if ok else 'MISSED'}"
          + (f"; baseline and this: {'the same scan, claims and checks' if same else 'DIFFER'}"
             if a.baseline_src else ""))
    return 0 if ok and passed and same else 1


if __name__ == "__main__":
    sys.exit(main())

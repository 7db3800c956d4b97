"""``traceless scan`` and ``traceless forget --memory mem0`` on a big live mem0 instance
(issue #23, Performance: scan ≤ 2 s, a per-user forget ≤ 5 s incl. compaction and
verification, with 10^4 memories over 10^3 users), side by side with mem0's own
``delete_all(user_id=…)`` on the same data, in one run.

    python bench/bench_erase.py [--memories 10000] [--users 1000] [--reps 3]

The instance is mem0's own layout (qdrant local path, history db of its own): every memory
is a point inserted through mem0's vector store (random 384-d vectors: no embedder runs)
with mem0's payload shape and one ``ADD`` row through mem0's ``SQLiteManager``; the bench
user's memories each carry a canary. Each rep copies the instance fresh, then times

* ``delete_all``: mem0's own per-user deletion (what the user would call);
* ``scan``: ``traceless.scan("mem0", cfg, user=U, literals=[canary])`` (read-only);
* ``forget``: ``traceless.forget(system="mem0", config=cfg, user=U, literals=[canary])``:
  plan, journal, mem0's delete_all, the residue, VACUUM, re-scan, bystanders, signed receipt.

Times are p50 over ``--reps``, in-process (imports excluded: both sides import mem0). It
exits 1 when the forget's receipt does not pass or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

SCAN_TARGET_S, FORGET_TARGET_S = 2.0, 5.0
USER = "u7"


def _config(root: Path) -> dict[str, Any]:
    return {"vector_store": {"provider": "qdrant", "config": {
        "path": str(root / "qdrant"), "collection_name": "bench", "embedding_model_dims": 384}},
        "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}


def _store_and_db(cfg: dict[str, Any]) -> tuple[Any, Any]:
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    vc = VectorStoreConfig(**cfg["vector_store"])
    return VectorStoreFactory.create(vc.provider, vc.config), SQLiteManager(cfg["history_db_path"])


def build(root: Path, n: int, users: int, seed: int = 0) -> tuple[Path, str]:
    rng = np.random.default_rng(seed)
    cfg = _config(root)
    store, db = _store_and_db(cfg)
    canary = "CANARY-bench-4411"
    for start in range(0, n, 1000):
        ids = [str(uuid.UUID(int=int(rng.integers(2**62)) << 64 | i)) for i in range(start, min(n, start + 1000))]
        owners = [f"u{i % users}" for i in range(start, start + len(ids))]
        texts = [f"{o} said: memory {start + j} about the weather" + (f" code {canary}" if o == USER else "")
                 for j, o in enumerate(owners)]
        payloads = [{"data": t, "text_lemmatized": t.lower(), "user_id": o, "hash": f"{start + j:032x}",
                     "created_at": "2026-12-01T00:00:00+00:00"} for j, (t, o) in enumerate(zip(texts, owners, strict=True))]
        store.insert(vectors=rng.standard_normal((len(ids), 384)).astype(np.float32).tolist(), payloads=payloads,
                     ids=ids)
        db.batch_add_history([{"memory_id": i, "new_memory": t, "event": "ADD"} for i, t in zip(ids, texts, strict=True)])
    db.close()
    store.client.close()
    path = root.parent / "bench.json"
    path.write_text(json.dumps(cfg))
    return path, canary


def _copy(src: Path, dst: Path, cfg: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    out = dst.parent / f"{dst.name}.json"
    out.write_text(cfg.read_text().replace(str(src), str(dst)))
    return out


def delete_all(cfg_path: Path) -> float:
    from traceless.systems._mem0 import _import_mem0

    main = _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    t0 = time.perf_counter()
    store, db = _store_and_db(json.loads(cfg_path.read_text()))
    mem = main.Memory.__new__(main.Memory)
    mem.config, mem.vector_store, mem._entity_store, mem.db = None, store, None, db
    mem.delete_all(user_id=USER)
    db.close()
    store.client.close()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=1_000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="traceless-bench-erase-"))
    os.environ.setdefault("TRACELESS_HOME", str(tmp / "home"))
    import traceless
    from traceless.systems._mem0 import _import_mem0

    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    t0 = time.perf_counter()
    cfg, canary = build(tmp / "src", a.memories, a.users)
    print(f"built {a.memories} memories over {a.users} users in {time.perf_counter() - t0:.1f}s")
    rows: dict[str, list[float]] = {"delete_all": [], "scan": [], "forget": []}
    ok, receipts_ok = True, True
    for rep in range(a.reps):
        rows["delete_all"].append(delete_all(_copy(tmp / "src", tmp / f"d{rep}", cfg)))
        c = _copy(tmp / "src", tmp / f"f{rep}", cfg)
        t = time.perf_counter()
        rep_scan = traceless.scan("mem0", c, user=USER, literals=[canary])
        rows["scan"].append(time.perf_counter() - t)
        t = time.perf_counter()
        r = traceless.forget(system="mem0", config=c, user=USER, literals=[canary])
        rows["forget"].append(time.perf_counter() - t)
        receipts_ok = receipts_ok and r.verification.passed and bool(rep_scan.hits)
    base = statistics.median(rows["delete_all"])
    print(f"{'operation':<12} {'p50 s':>8} {'x delete_all':>13} {'target s':>9}")
    for name, target in (("delete_all", None), ("scan", SCAN_TARGET_S), ("forget", FORGET_TARGET_S)):
        p50 = statistics.median(rows[name])
        ok = ok and (target is None or p50 <= target)
        print(f"{name:<12} {p50:>8.3f} {p50 / base:>13.2f} {target if target else '-':>9}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"receipts: {'all passed' if receipts_ok else 'FAILED'}; targets: {'met' if ok else 'MISSED'}")
    return 0 if ok and receipts_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""What erasing one user's vectors from a mem0 instance on chroma costs (issue 38.1): chroma's
own deletion and compaction against ``traceless forget``'s rebuild of the HNSW segment, on the
same data.

    python bench/bench_chroma_rebuild.py [--memories 1009 10009] [--reps 3]

The instance is mem0's layout on chroma (a ``PersistentClient`` path, a history db of its own):
the bench user's 3 memories (each with a canary) first, then the others' (random unit 384-d
vectors, mem0's payload shape, 100 users) through chroma's own ``add`` in batches, so every
vector is past the collection's sync threshold (1,000 by default) in ``data_level0.bin``. Each
rep copies the instance fresh and times, in this process after a warm-up (imports excluded):

* ``delete``: chroma's own ``collection.delete(ids)`` of the user's memories (what mem0's
  ``delete_all`` ends in), then ``compaction``: chroma's own ``chroma vacuum --force`` (its CLI);
* ``forget``: ``traceless.forget(system="mem0", ...)`` end to end (mem0's ``delete_all``, the
  residue, the rebuild when a segment file holds an erased vector, VACUUM, the vector check,
  re-scan, bystanders, signed receipt); ``rebuild``: the rebuild alone (its receipt note).

Printed per size: p50 seconds and the user's vectors (float32, raw or L2-normalised) left in
the instance's files after each path. It exits 1 when a receipt does not pass or a vector is
left after ``forget``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

COLLECTION = "bench_memories"
USER = "bench-user"


def build(root: Path, memories: int) -> Path:
    """The instance under ``root``; returns its config (JSON)."""
    import json

    import chromadb
    import numpy as np
    from chromadb.config import Settings
    from mem0.memory.storage import SQLiteManager

    rng = np.random.default_rng(38)
    vecs = rng.standard_normal((memories, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    now = "2026-01-01T00:00:00+00:00"
    metas = [{"data": f"{USER} note {i}: my code is CANARY-{i}-7Q" if i < 3 else f"user{i % 100} note {i}",
              "hash": f"{i:032x}", "user_id": USER if i < 3 else f"user{i % 100}", "role": "user",
              "created_at": now, "updated_at": now} for i in range(memories)]
    client: Any = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False))
    try:
        col = client.get_or_create_collection(COLLECTION, embedding_function=None)
        step = client.get_max_batch_size()
        for k in range(0, memories, step):
            col.add(ids=[str(uuid.UUID(int=i + 1)) for i in range(k, min(k + step, memories))],
                    embeddings=vecs[k:k + step], metadatas=metas[k:k + step])
    finally:
        client.close()
    SQLiteManager(str(root / "history.db")).close()
    cfg = {"vector_store": {"provider": "chroma", "config": {"path": str(root / "chroma"),
                                                             "collection_name": COLLECTION}},
           "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}
    path = root.parent / f"{root.name}.json"
    path.write_text(json.dumps(cfg))
    return path


def user_vectors(root: Path) -> dict[str, tuple[bytes, bytes]]:
    import chromadb
    from chromadb.config import Settings

    from traceless.systems._mem0_chroma import vector_forms

    client: Any = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False))
    try:
        got = client.get_collection(COLLECTION, embedding_function=None).get(
            where={"user_id": USER}, include=["embeddings"])
    finally:
        client.close()
    return dict(zip(got["ids"], vector_forms(got["embeddings"]), strict=True))


def left(root: Path, vectors: dict[str, tuple[bytes, bytes]]) -> int:
    from traceless.systems._mem0_chroma import surviving

    files = [p for p in root.rglob("*") if p.is_file()]
    return len({i for per in surviving(files, vectors).values() for i in per})


def chroma_side(src: Path, work: Path) -> tuple[float, float, int, int]:
    import chromadb
    from chromadb.config import Settings

    shutil.copytree(src, work)
    vectors = user_vectors(work)
    client: Any = chromadb.PersistentClient(path=str(work / "chroma"), settings=Settings(anonymized_telemetry=False))
    try:
        t0 = time.perf_counter()
        client.get_collection(COLLECTION, embedding_function=None).delete(ids=list(vectors))
        deleted = time.perf_counter() - t0
    finally:
        client.close()
    after_delete = left(work, vectors)
    chroma = Path(sys.executable).with_name("chroma")
    t0 = time.perf_counter()
    subprocess.run([str(chroma), "vacuum", "--path", str(work / "chroma"), "--force"], check=True,
                   capture_output=True, timeout=600)
    vacuumed = time.perf_counter() - t0
    return deleted, vacuumed, after_delete, left(work, vectors)


def forget_side(src: Path, cfg: Path, work: Path) -> tuple[float, float, int, bool]:
    import traceless

    shutil.copytree(src, work)
    cfg_work = work.parent / f"{work.name}.json"
    cfg_work.write_text(cfg.read_text().replace(str(src), str(work)))
    vectors = user_vectors(work)
    t0 = time.perf_counter()
    receipt = traceless.forget(system="mem0", config=cfg_work, user=USER, literals=[f"CANARY-{i}-7Q" for i in range(3)])
    took = time.perf_counter() - t0
    rebuilt = [float(m.group(1)) for n in receipt.notes if (m := re.search(r"rebuilt from .* in ([0-9.]+) s", n))]
    ok = receipt.verification.passed and "vector_store=clear" in receipt.guarantee
    return took, sum(rebuilt), left(work, vectors), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, nargs="+", default=[1009, 10009])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-chroma-"))
    status = 0
    try:
        for n in args.memories:
            src = tmp / f"inst{n}"
            cfg = build(src, n)
            forget_side(src, cfg, tmp / f"warm{n}")  # imports and first-open costs out of the clock
            rows: dict[str, list[float]] = {"delete": [], "compaction": [], "forget": [], "rebuild": []}
            lefts: dict[str, int] = {}
            for r in range(args.reps):
                d, v, lefts["delete"], lefts["compaction"] = chroma_side(src, tmp / f"c{n}-{r}")
                f, rb, lefts["forget"], ok = forget_side(src, cfg, tmp / f"f{n}-{r}")
                status |= int(not ok or lefts["forget"] != 0)
                for k, x in zip(rows, (d, v, f, rb), strict=True):
                    rows[k].append(x)
            print(f"{n} memories (3 of the user's, past the sync threshold):")
            for k, xs in rows.items():
                side = "forget" if k in ("forget", "rebuild") else ("delete" if k == "delete" else "compaction")
                print(f"  {k:10s} p50 {statistics.median(xs):7.3f} s  (reps {', '.join(f'{x:.3f}' for x in xs)}); "
                      f"user's vectors left after it: {lefts[side]} of 3")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

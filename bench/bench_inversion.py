"""Can the deleted canaries be read back from a mem0-on-chroma instance's files? (issue 38.2)

    python bench/bench_inversion.py [--planted 20] [--others 1000] [--decoys 10000]

The instance is mem0's layout on chroma (a ``PersistentClient`` path, a history db), its
vectors made by the bundled all-MiniLM-L6-v2 (the model of mem0's huggingface embedder):
``--planted`` users each told one memory that holds a canary in paper 000's sentence ("…
By the way, my private session token is XQ7-VIOLET-3829."), ``--others`` memories of other
users without one, so chroma persists every vector past its sync threshold into
``data_level0.bin``. Two paths on two copies of it:

* ``delete``: chroma's own ``collection.delete(where={"user_id": u})`` per planted user (what
  mem0's ``delete_all`` ends in); the API then lists none of their memories;
* ``forget``: ``traceless.forget(system="mem0", user=u)`` per planted user (the rebuild of the
  HNSW segment when a file holds an erased vector).

On each, every vector is read from the files (``traceless.systems.chroma_file_vectors``) and
the candidate attack (``traceless.audit.candidate_inversion``: the planted canaries + the
decoys, ranked by MiniLM) reports top-1 and top-10 recovery with exact intervals. Exits 1
when ``forget`` leaves anything recoverable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

COLLECTION = "bench_memories"
FILL = ("I moved to Lisbon last spring and I am learning Portuguese", "Can you recommend a good book on gardening",
        "My sister has two cats named Milo and Otis", "I prefer tea over coffee in the mornings",
        "We are planning a trip to the coast in June", "My manager wants the report by Friday")


class CachedEmbedder:
    """The embedder, each text embedded once (the two paths rank the same candidates)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seen = inner, {}

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            self.seen.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.stack([self.seen[t] for t in texts])

    def describe(self) -> dict[str, object]:
        return self.inner.describe()


def build(root: Path, planted: list[str], others: int, emb: CachedEmbedder) -> Path:
    import chromadb
    from chromadb.config import Settings
    from mem0.memory.storage import SQLiteManager

    from traceless.audit import canary_sentence

    texts = [f"{FILL[i % len(FILL)]}. By the way, {canary_sentence(c)}." for i, c in enumerate(planted)]
    texts += [f"{FILL[i % len(FILL)]}, said on day {i}." for i in range(others)]
    users = [f"planted-{i}" for i in range(len(planted))] + [f"user{i % 100}" for i in range(others)]
    vecs = emb.inner.embed(texts)
    now = "2026-01-01T00:00:00+00:00"
    metas = [{"data": t, "hash": f"{i:032x}", "user_id": u, "role": "user", "created_at": now, "updated_at": now}
             for i, (t, u) in enumerate(zip(texts, users, strict=True))]
    client: Any = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False))
    try:
        col = client.get_or_create_collection(COLLECTION, embedding_function=None)
        step = client.get_max_batch_size()
        for k in range(0, len(texts), step):
            col.add(ids=[str(uuid.UUID(int=i + 1)) for i in range(k, min(k + step, len(texts)))],
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


def delete_side(work: Path, n: int) -> float:
    import chromadb
    from chromadb.config import Settings

    client: Any = chromadb.PersistentClient(path=str(work / "chroma"), settings=Settings(anonymized_telemetry=False))
    try:
        col = client.get_collection(COLLECTION, embedding_function=None)
        t0 = time.perf_counter()
        for i in range(n):
            col.delete(where={"user_id": f"planted-{i}"})
        took = time.perf_counter() - t0
        assert not col.get(where={"user_id": {"$in": [f"planted-{i}" for i in range(n)]}})["ids"]
    finally:
        client.close()
    return took


def forget_side(cfg: Path, n: int) -> tuple[float, bool]:
    import traceless

    t0 = time.perf_counter()
    ok = all(traceless.forget(system="mem0", config=cfg, user=f"planted-{i}").verification.passed for i in range(n))
    return time.perf_counter() - t0, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--planted", type=int, default=20)
    ap.add_argument("--others", type=int, default=1000)
    ap.add_argument("--decoys", type=int, default=10_000)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from traceless.audit import candidate_inversion, make_canary
    from traceless.models import load_embedder
    from traceless.systems import chroma_file_vectors

    rng = np.random.default_rng(20261203)
    planted = [make_canary(rng) for _ in range(args.planted)]
    emb = CachedEmbedder(load_embedder("minilm"))
    print(f"load {os.getloadavg()[0]:.2f}; {args.planted} planted, {args.others} others, {args.decoys} decoys, "
          f"embedder {emb.describe().get('name')}")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        cfg = build(src, planted, args.others, emb)
        for path in ("before", "delete", "forget"):
            work = Path(tmp) / path
            shutil.copytree(src, work)
            (Path(tmp) / f"{path}.json").write_text(cfg.read_text().replace(str(src), str(work)))
            took = 0.0
            if path == "delete":
                took = delete_side(work, args.planted)
            elif path == "forget":
                took, ok = forget_side(Path(tmp) / f"{path}.json", args.planted)
                failed |= not ok
            t0 = time.perf_counter()
            rep = candidate_inversion(chroma_file_vectors(work), planted, emb, decoys=args.decoys)
            print(f"{path:<7} erase {took:6.2f}s  file vectors {rep.vectors:>6}  claiming {rep.claiming:>5}  "
                  f"top-1 {rep.top1.successes}/{rep.planted} {rep.top1.fmt()}  top-{rep.k} "
                  f"{rep.topk.successes}/{rep.planted} {rep.topk.fmt()}  ({time.perf_counter() - t0:.1f}s)")
            if path == "forget" and rep.topk.successes:
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A big mem0 instance (qdrant local path + history db) built fast, for the benches.

mem0's own ``insert`` persists every qdrant local point in a transaction of its own (10^5
points: tens of minutes). Here the first ``SEED`` memories go through mem0's own vector
store and ``SQLiteManager`` (the collection, ``meta.json`` and the history schema are
mem0's); every other point is written straight into the collection's ``storage.sqlite`` the
way qdrant local's ``CollectionPersistence.persist`` writes it (the key from its
``encode_key``, the value ``pickle.dumps`` of the ``PointStruct`` it constructs), in one
transaction; the first seeded point is rebuilt that way and compared byte for byte with what
mem0 wrote (else the build stops). History rows go through ``SQLiteManager.batch_add_history``.
The instance is then the one mem0 would have written, only faster to build.
"""

from __future__ import annotations

import pickle
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEED = 200
"""Memories inserted through mem0's own vector store (the format's reference)."""
BATCH = 20_000


def config(root: Path, collection: str = "bench") -> dict[str, Any]:
    return {"vector_store": {"provider": "qdrant", "config": {
        "path": str(root / "qdrant"), "collection_name": collection, "embedding_model_dims": 384}},
        "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}


def _point_bytes(pid: str, vector: list[float], payload: dict[str, Any]) -> tuple[str, bytes]:
    """(key, value) as qdrant local's ``CollectionPersistence.persist`` stores a point mem0 inserts."""
    from qdrant_client._pydantic_compat import construct
    from qdrant_client.http import models
    from qdrant_client.local.persistence import CollectionPersistence
    from qdrant_client.local.utils import normalize_point_id

    point_id = normalize_point_id(pid)
    point = construct(models.PointStruct, id=point_id, vector={"": vector}, payload=payload)
    return CollectionPersistence.encode_key(point_id), pickle.dumps(point)


Memory = tuple[str, str, dict[str, Any]]
"""(point id, text for the history row, payload)."""


def build(root: Path, n: int, memory: Callable[[int, np.random.Generator], Memory], seed: int = 0) -> dict[str, Any]:
    """``n`` memories, the ``i``-th given by ``memory(i, rng)``; returns mem0's config of it."""
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    cfg = config(root)
    rng = np.random.default_rng(seed)
    vc = VectorStoreConfig(**cfg["vector_store"])
    store, db = VectorStoreFactory.create(vc.provider, vc.config), SQLiteManager(cfg["history_db_path"])
    first = [memory(i, rng) for i in range(min(n, SEED))]
    vecs = rng.standard_normal((len(first), 384)).astype(np.float32).tolist()
    store.insert(vectors=vecs, payloads=[p for _, _, p in first], ids=[i for i, _, _ in first])
    db.batch_add_history([{"memory_id": i, "new_memory": t, "event": "ADD"} for i, t, _ in first])
    store.client.close()
    points = Path(cfg["vector_store"]["config"]["path"]) / "collection" / "bench" / "storage.sqlite"
    con = sqlite3.connect(points)
    try:
        key, value = _point_bytes(first[0][0], vecs[0], first[0][2])
        if con.execute("SELECT point FROM points WHERE id = ?", (key,)).fetchone() != (value,):
            raise SystemExit("mem0_instance: qdrant local's point format differs from the bulk writer's; "
                             "build through mem0 instead")
        for start in range(len(first), n, BATCH):
            batch = [memory(i, rng) for i in range(start, min(n, start + BATCH))]
            vecs = rng.standard_normal((len(batch), 384)).astype(np.float32).tolist()
            with con:
                con.executemany("INSERT INTO points VALUES (?, ?)",
                                (_point_bytes(i, v, p) for (i, _, p), v in zip(batch, vecs, strict=True)))
            db.batch_add_history([{"memory_id": i, "new_memory": t, "event": "ADD"} for i, t, _ in batch])
    finally:
        con.close()
        db.close()
    return cfg


def point_id(i: int, rng: np.random.Generator) -> str:
    return str(uuid.UUID(int=int(rng.integers(2**62)) << 64 | i))

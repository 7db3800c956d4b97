"""A mem0 instance as a user would build it (not a test module): mem0's own config dict
(vector store qdrant local path or chroma persistent, its own history path, the bundled
MiniLM through mem0's huggingface embedder), three users, ``infer=False`` (no LLM).

Every user gets ``MEMORIES`` memories through ``Memory.add``, each with a distinct canary,
plus one ``messages`` row through mem0's own ``save_messages`` (what ``infer=True`` writes)
and, on qdrant, one entity record through mem0's own ``_upsert_entity`` (what ``infer=True``
links), so every store mem0 keeps holds each user's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

USERS = ("alice", "bob", "carol")
MEMORIES = 3


def canary(user: str, i: int) -> str:
    return f"CANARY-{user}-{i}-7Q"


def user_config(root: Path, provider: str) -> dict[str, Any]:
    """The config a user passes to ``Memory.from_config`` (plus a traceless section)."""
    from traceless.models._st_embedder import minilm_path

    vs: dict[str, Any] = {"provider": "qdrant", "config": {
        "path": str(root / "qdrant"), "collection_name": "prod_memories", "embedding_model_dims": 384}}
    if provider == "chroma":
        vs = {"provider": "chroma", "config": {"path": str(root / "chroma"), "collection_name": "prod_memories"}}
    return {"vector_store": vs, "history_db_path": str(root / "history.db"),
            "embedder": {"provider": "huggingface", "config": {"model": str(minilm_path()), "embedding_dims": 384}},
            "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused",
                                                       "openai_base_url": "http://127.0.0.1:9/v1"}},
            "version": "v1.1", "traceless": {"infer": False}}


def mem0_memory(cfg: dict[str, Any], home: Path) -> Any:
    from traceless.systems._mem0 import _import_mem0

    main = _import_mem0(home)
    return main.Memory.from_config({k: v for k, v in cfg.items() if k != "traceless"})


def close(mem: Any, provider: str) -> None:
    client = mem.vector_store.client
    ent = mem._entity_store
    mem.close()
    if provider == "qdrant":
        if ent is not None and ent.client is not client:
            ent.client.close()
        client.close()


def build(root: Path, provider: str, home: Path) -> Path:
    """Build the instance under ``root``; returns the config file (JSON)."""
    root.mkdir(parents=True, exist_ok=True)
    cfg = user_config(root, provider)
    mem = mem0_memory(cfg, home)
    try:
        for u in USERS:
            for i in range(MEMORIES):
                mem.add([{"role": "user", "content": f"{u} note {i}: my account code is {canary(u, i)}"}],
                        user_id=u, infer=False)
            mem.db.save_messages([{"role": "user", "content": f"remember {canary(u, 0)} for me"}], f"user_id={u}")
            if provider == "qdrant":
                first = mem.get_all(filters={"user_id": u}, top_k=10)["results"][0]["id"]
                mem._upsert_entity(f"{u} entity {canary(u, 1)}", "PERSON", first, {"user_id": u})
    finally:
        close(mem, provider)
    path = root.parent / f"{root.name}.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def relocate(cfg_path: Path, src: Path, dst: Path) -> Path:
    """The config of a copy of the instance (``shutil.copytree(src, dst)`` done by the caller)."""
    text = cfg_path.read_text(encoding="utf-8").replace(str(src), str(dst))
    out = dst.parent / f"{dst.name}.json"
    out.write_text(text, encoding="utf-8")
    return out

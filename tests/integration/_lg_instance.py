"""A live LangGraph instance as a product keeps one (not a test module): the user's own
graph (``tests/fixtures/lg_memory_agent.py``: ``create_react_agent`` + LangMem's memory
tools) run with a ``SqliteSaver`` and a ``SqliteStore`` on files of their own, three users,
two threads each; each user tells the agent a canary and asks for it back."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lg_memory_agent.py"
USERS = ("cust-4411", "cust-5522", "cust-6633")


def canary(user: str) -> str:
    return f"ZQ{user[-1]}-PLUMBRAVO-{user[-4:]}"


def config(root: Path) -> dict[str, Any]:
    """The user's ``--memory-config``."""
    return {"graph": f"{FIXTURE}:build",
            "checkpointer": {"kind": "sqlite", "path": str(root / "checkpoints.db")},
            "store": {"kind": "sqlite", "path": str(root / "memories.db")},
            "users": {"namespace": ["memories", "{user_id}"], "thread_id": "support-{user_id}-{session_id}",
                      "configurable": {"langgraph_user_id": "{user_id}"}}}


def build(root: Path, users: tuple[str, ...] = USERS) -> dict[str, Any]:
    """Run the user's graph over the conversations; close everything (as a stopped app)."""
    import importlib.util

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    spec = importlib.util.spec_from_file_location("lg_memory_agent", FIXTURE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # pydantic resolves the chat model's annotations there
    spec.loader.exec_module(mod)
    root.mkdir(parents=True, exist_ok=True)
    sc = sqlite3.connect(str(root / "memories.db"), isolation_level=None, check_same_thread=False)
    cc = sqlite3.connect(str(root / "checkpoints.db"), check_same_thread=False)
    store, saver = SqliteStore(sc), SqliteSaver(cc)
    store.setup()
    saver.setup()
    graph = mod.build(checkpointer=saver, store=store)
    for u in users:
        for s in ("s1", "s2"):
            cfg: Any = {"configurable": {"thread_id": f"support-{u}-{s}", "langgraph_user_id": u}}
            fact = f"My account token is {canary(u)}." if s == "s1" else f"I live in {u[-4:]} Elm Street."
            graph.invoke({"messages": [{"role": "user", "content": fact}]}, cfg)
            graph.invoke({"messages": [{"role": "user", "content": "What is my account token?"}]}, cfg)
    sc.close()
    cc.close()
    return config(root)


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """SHA-256 and mtime (ns) of every file under ``root`` (-wal/-shm/-journal included)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[p.name] = (hashlib.sha256(p.read_bytes()).hexdigest(), os.stat(p).st_mtime_ns)
    return out


def copies(root: Path, literal: str) -> dict[str, int]:
    """Per table of every file: rows holding ``literal``'s UTF-8 bytes (read on a copy's
    connection, independent of the adapter)."""
    out: dict[str, int] = {}
    for db in ("memories.db", "checkpoints.db"):
        conn = sqlite3.connect(str(root / db))
        for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            n = 0
            for row in conn.execute(f'SELECT * FROM "{t}"'):
                blob = b"".join(v if isinstance(v, bytes) else str(v).encode() for v in row)
                n += literal.encode() in blob
            out[f"{db}:{t}"] = n
        conn.close()
    return out

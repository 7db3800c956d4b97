"""The read-only scan of a live memory at one or more sizes, per system (issues #11, #23,
#24: "scan of 10^4 memories ≤ 2 s per system"; #39: ≤ 2 s at 10^5, ≤ 10 s at 10^6, the growth
per decade printed, beside the system's own per-user read and delete where the spec has them).

    python bench/bench_scan.py [--memories 10000[,100000,...]] [--canaries 10] [--reps 3] [--only NAME ...]
                               [--no-own]

A memory is one user turn, written as the system writes it (sessions of 4 user turns, each
followed by an assistant turn, over 500 users). For each system a live instance of
``--memories`` memories is built in a temp dir in the system's own store, ``--canaries`` of
the sessions (each another user's) carrying a distinct canary; then ``scan_system`` (the
system's read-only ``scan`` of every store, plus the byte scan of every file of the
instance) of the first carrier's user and every canary is timed ``--reps`` times, p50, on
the instance attached read-only, as ``traceless scan`` attaches it (attaching included; the
process's CPU time is printed beside the wall time: on a loaded machine it is what changes
least). The bench exits 1 when a
scan is over the 2 s target, misses a planted canary (every canary must be in a hit of the
stores the system keeps it in, and in the file bytes), or changed a byte of any file of the
instance (SHA-256 of every file before and after). After the scans, a system with ``own`` operations
(mem0: opening its vector store, ``get_all(user_id)``, ``delete_all(user_id)``) runs them on the
same instance; ``--no-own`` skips them (at 10^6 mem0's opening loads every point).

How each is built (fast: no LLM, no embedder over 10^4 texts; the shapes are the package's own):

* the carrier sessions and one template session go through the adapter (the package's own
  writes); the filler is the template's records copied, with its user, session and text
  replaced, straight into the package's own tables (``agno``, ``openai-agents``, ``adk``:
  SQLite rows; ``llamaindex``: the chat store's rows, and the nodes through
  ``VectorStoreIndex.insert_nodes`` with their embeddings given; ``crewai``: one LanceDB
  ``add`` of the rows);
* ``mem0`` (qdrant local path + history db, ``infer=false``): the first memories points
  inserted through mem0's vector store (random vectors), the rest written in bulk in qdrant
  local's own point format (``bench/mem0_instance.py``, checked byte for byte against mem0's),
  one history row each through its ``SQLiteManager``;
* ``langgraph``: every session through the adapter's graph (``summarize=false``, no model call).

``crewai`` and ``adk`` need their own venv (they cannot share one with the main extras): run
the bench with that venv's python (``/work/venv-crewai/bin/python``, CI's ``.venv-crewai``) for
them; from a venv without their package each is skipped with a line saying so. ``uptime``'s
load is printed before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import math
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from traceless.audit import make_canary
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system, scan_system, system_class

TARGET_S = 2.0
TURNS = 4  # user turns per session (each a memory)
USERS = 500
TMPL_USER, TMPL_SESSION, TMPL_TEXT = "tmplusr", "tmplsess", "tmpltext"
OWN_VENV = "/work/venv-crewai/bin/python (CI: .venv-crewai)"
OWN_MAX = 100_000
"""The systems' own operations run up to this size (mem0's client needs > 20 GB at 10^6 points)."""


def _runtime() -> SystemRuntime:
    # no model call is made by any of the writes below
    return SystemRuntime(ScriptedBackend(lambda m, c: "unused"), HashingEmbedder(), "scripted")


def _session(uid: str, sid: str, texts: list[str]) -> Session:
    turns: list[Turn] = []
    for t in texts:
        turns += [Turn(role="user", content=t), Turn(role="assistant", content="noted")]
    return Session(session_id=sid, user_id=uid, turns=turns)


def carriers(canaries: list[str]) -> list[Session]:
    """One session per canary, each of another user: turn 1 carries it."""
    return [_session(f"u{i}", f"c{i}", [f"carrier {i} turn {t}: " + (f"my session token is {c}" if t == 1 else
                                                                    "about the weather") for t in range(TURNS)])
            for i, c in enumerate(canaries)]


def template() -> Session:
    return _session(TMPL_USER, TMPL_SESSION, [f"{TMPL_TEXT} {t} about the weather" for t in range(TURNS)])


def _sub(v: Any, j: int) -> Any:
    if not isinstance(v, str):
        return v
    return v.replace(TMPL_USER, f"u{j % USERS}").replace(TMPL_SESSION, f"fill{j}").replace(TMPL_TEXT, f"filler {j}")


def clone_sqlite(db: Path, copies: int) -> None:
    """Every row of the template user (any column naming it) copied ``copies`` times, its
    user, session and text replaced (ids name them, so they stay unique); an INTEGER PRIMARY
    KEY column is left to SQLite."""
    con = sqlite3.connect(str(db))
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                            "'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        for t in tables:
            info = list(con.execute(f'PRAGMA table_info("{t}")'))
            auto = {r[1] for r in info if r[5] and r[2].upper() == "INTEGER"} if sum(r[5] > 0 for r in info) == 1 else set()
            cols = [r[1] for r in info if r[1] not in auto]
            sel = ", ".join(f'"{c}"' for c in cols)
            tmpl = [r for r in con.execute(f'SELECT {sel} FROM "{t}"')  # noqa: S608 - the package's tables
                    if any(isinstance(v, str) and TMPL_USER in v for v in r)]
            if not tmpl:
                continue
            ins = f'INSERT OR IGNORE INTO "{t}" ({sel}) VALUES ({", ".join("?" * len(cols))})'  # noqa: S608
            con.executemany(ins, ([_sub(v, j) for v in r] for j in range(copies) for r in tmpl))
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def _write(name: str, root: Path, cfg: dict[str, Any], sessions: list[Session]) -> None:
    system = open_system(name, root, load_system_config(name, cfg), _runtime())
    try:
        system.write(sessions)
    finally:
        system.close()


def _copies(n: int, k: int) -> int:
    """Filler sessions beside the carriers and the template (a session of memories too)."""
    return n // TURNS - k - 1


def build_sqlite(db_name: str, key: str) -> Callable[[Path, int, list[str]], dict[str, Any]]:
    def build(root: Path, n: int, canaries: list[str]) -> dict[str, Any]:
        name = key
        _write(name, root, {}, [*carriers(canaries), template()])
        clone_sqlite(root / db_name, _copies(n, len(canaries)))
        return {"db_file": str(root / db_name)}
    return build


def build_llamaindex(root: Path, n: int, canaries: list[str]) -> dict[str, Any]:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    _write("llamaindex", root, {}, [*carriers(canaries), template()])
    clone_sqlite(root / "chat.db", _copies(n, len(canaries)))
    tmpl = template()
    rng = np.random.default_rng(1)
    system = open_system("llamaindex", root, load_system_config("llamaindex", {}), _runtime())
    try:
        index = system.index  # type: ignore[attr-defined]
        dim = len(index.vector_store.get(f"{TMPL_USER}/{TMPL_SESSION}#0"))
        text = "\n".join(t.content for t in tmpl.turns if t.role == "user")
        nodes = []
        for j in range(_copies(n, len(canaries))):
            ref = f"u{j % USERS}/fill{j}"
            nodes.append(TextNode(id_=f"{ref}#0", text=_sub(text, j), embedding=rng.standard_normal(dim).tolist(),
                                  metadata={"user_id": f"u{j % USERS}", "session_id": f"fill{j}"},
                                  relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=ref)}))
        index.insert_nodes(nodes)
        system._save()  # type: ignore[attr-defined]
    finally:
        system.close()
    return {"chat_db": str(root / "chat.db"), "persist_dir": str(root / "storage")}


def build_crewai(root: Path, n: int, canaries: list[str]) -> dict[str, Any]:
    import lancedb

    _write("crewai", root, {}, [*carriers(canaries), template()])
    tbl = lancedb.connect(str(root / "memory")).open_table("memories")
    tmpl = [r for r in tbl.to_arrow().to_pylist() if TMPL_USER in str(r.get("scope"))]
    copies = _copies(n, len(canaries))
    rows = [{c: (str(uuid.UUID(int=j * 16 + i)) if c == "id" else _sub(v, j)) for c, v in r.items() if c != "vector"}
            for j in range(copies) for i, r in enumerate(tmpl)]
    tbl.add(pa.Table.from_pylist(rows).append_column("vector", _vectors(tmpl, copies)).select(tbl.schema.names)
            .cast(tbl.schema))
    return {"storage_path": str(root / "memory")}


def _vectors(tmpl: list[dict[str, Any]], copies: int) -> Any:
    """Each copied row's vector: its template row's plus noise of its own (0.01 per component),
    as a real instance's rows each have an embedding of their own; copied verbatim, every erased
    vector was also held by a thousand other users' rows (the erasure's byte check then matched
    it 10^6 times)."""
    base = np.asarray([r["vector"] for r in tmpl], np.float32)
    rows = np.tile(base, (copies, 1))
    rows += np.random.default_rng(0).standard_normal(rows.shape, dtype=np.float32) * np.float32(0.01)
    return pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), base.shape[1])


def _mem0_config(root: Path) -> dict[str, Any]:
    return {"vector_store": {"provider": "qdrant", "config": {
        "path": str(root / "qdrant"), "collection_name": "bench", "embedding_model_dims": 384}},
        "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}


def build_mem0(root: Path, n: int, canaries: list[str]) -> dict[str, Any]:
    """mem0's own layout (``bench/mem0_instance.py``: the first points through mem0's vector
    store and ``SQLiteManager``, the rest in bulk in qdrant local's own point format)."""
    import mem0_instance

    from traceless.systems._mem0 import _import_mem0

    _import_mem0(root / "mem0-home")

    def memory(i: int, rng: np.random.Generator) -> mem0_instance.Memory:
        t = f"u{i % USERS} said: memory {i} about the weather" + (
            f" token {canaries[i // 4]}" if i < 4 * len(canaries) and i % 4 == 1 else "")
        return mem0_instance.point_id(i, rng), t, {"data": t, "text_lemmatized": t.lower(), "user_id": f"u{i % USERS}",
                                                   "hash": f"{i:032x}", "created_at": "2026-12-01T00:00:00+00:00"}

    return mem0_instance.build(root, n, memory)


def own_mem0(cfg: dict[str, Any], user: str) -> dict[str, float]:
    """mem0's own per-user read and delete (``get_all``, ``delete_all``), the vector store's
    opening (qdrant local loads every point) timed apart."""
    from mem0.memory.main import Memory
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    t0 = time.perf_counter()
    vc = VectorStoreConfig(**cfg["vector_store"])
    mem = Memory.__new__(Memory)
    mem.config, mem.vector_store, mem._entity_store = None, VectorStoreFactory.create(vc.provider, vc.config), None
    mem.db, mem.enable_graph, mem.reranker = SQLiteManager(cfg["history_db_path"]), False, None
    t1 = time.perf_counter()
    mem.get_all(filters={"user_id": user}, top_k=10_000)
    t2 = time.perf_counter()
    mem.delete_all(user_id=user)
    t3 = time.perf_counter()
    mem.db.close()
    mem.vector_store.client.close()
    return {"open": t1 - t0, "get_all": t2 - t1, "delete_all": t3 - t2}


def build_langgraph(root: Path, n: int, canaries: list[str]) -> dict[str, Any]:
    fill = [_session(f"u{s % USERS}", f"s{s}", [f"session {s} turn {t}: filler about the weather" for t in range(TURNS)])
            for s in range(_copies(n, len(canaries)))]
    _write("langgraph", root, {"summarize": False}, [*carriers(canaries), *fill])
    return {"store": {"kind": "sqlite", "path": str(root / "store.db")},
            "checkpointer": {"kind": "sqlite", "path": str(root / "checkpoints.db")}}


@dataclass(frozen=True)
class Spec:
    module: str
    """The package the system needs (its absence skips the system)."""
    build: Callable[[Path, int, list[str]], dict[str, Any]]
    """Builds the instance in a dir; returns the memory config that attaches it."""
    own_venv: bool = False
    """Needs the second venv (crewai, adk)."""
    own: Callable[[dict[str, Any], str], dict[str, float]] | None = None
    """The system's own per-user read and delete on the instance (seconds by operation)."""


SYSTEMS: dict[str, Spec] = {
    "mem0": Spec("mem0", build_mem0, own=own_mem0),
    "langgraph": Spec("langgraph", build_langgraph),
    "llamaindex": Spec("llama_index.core", build_llamaindex),
    "agno": Spec("agno", build_sqlite("agno.db", "agno")),
    "openai-agents": Spec("agents", build_sqlite("sessions.db", "openai-agents")),
    "crewai": Spec("crewai", build_crewai, own_venv=True),
    "adk": Spec("google.adk", build_sqlite("adk.db", "adk"), own_venv=True),
}


def _shas(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _check(rep: Any, canaries: list[str]) -> list[str]:
    """What the scan missed: each canary must be in some store's hit, and in the files' bytes."""
    missing = [f"canary {i} in no record" for i, c in enumerate(canaries)
               if not any(h.value and c in h.value for h in rep.hits)]
    if not rep.files:
        missing.append("no file hit")
    return missing


def target(n: int) -> float:
    """Issue #39: ≤ 2 s up to 10^5 memories, ≤ 10 s at 10^6."""
    return TARGET_S if n <= 100_000 else 10.0


Result = tuple[bool, float, float, dict[str, float]]
"""(passed, scan p50 s, CPU s, the system's own per-user operations' seconds)."""


def bench(name: str, n: int, canaries: list[str], reps: int, own: bool = True) -> Result | None:
    spec = SYSTEMS[name]
    if importlib.util.find_spec(spec.module.split(".")[0]) is None or importlib.util.find_spec(spec.module) is None:
        where = f"run it with {OWN_VENV}" if spec.own_venv else "install its extra"
        print(f"{name}: skipped: {spec.module} is not installed in {sys.prefix} ({where})")
        return None
    with tempfile.TemporaryDirectory(prefix=f"bench-scan-{name}-") as tmp:
        root = Path(tmp) / "m"
        t0 = time.perf_counter()
        cfg = spec.build(root, n, canaries)
        built = time.perf_counter() - t0
        before = _shas(Path(tmp))
        attach = lambda: system_class(name).attach(load_system_config(name, cfg), read_only=True)  # noqa: E731
        times, cpu = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            system = attach()
            rep = scan_system(system, "u0", canaries)
            system.close()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        full = scan_system(attach(), "u0", canaries, reveal=True)
        wrote = sorted(k for k, v in _shas(Path(tmp)).items() if before.get(k) != v) + sorted(set(before) - set(_shas(Path(tmp))))
        # last: its delete changes the instance; mem0's qdrant local client loads every point (> 20 GB at 10^6)
        ops = spec.own(cfg, "u0") if spec.own is not None and own and n <= OWN_MAX else {}
    p50 = statistics.median(times)
    missing = _check(full, canaries)
    ok = not missing and not wrote and p50 <= target(n)
    print(f"{name}: {n} memories (built in {built:.1f} s), records per store {rep.stores}; scan p50 {p50:.3f} s "
          f"(CPU {statistics.median(cpu):.3f} s) over {reps} reps (target {target(n):.1f} s), {len(rep.hits)} hits, files {len(rep.files)}/"
          f"{rep.files_scanned}" + (f"; MISSED: {missing}" if missing else "")
          + (f"; WROTE: {wrote}" if wrote else "") + ("" if ok else "  FAIL"))
    if ops:
        print(f"{name}: {n} memories, the system's own per-user operations: "
              + ", ".join(f"{k} {v:.3f} s (scan/{k} {p50 / v:.2f})" for k, v in ops.items()))
    return ok, p50, statistics.median(cpu), ops


def growth(name: str, results: dict[int, Result]) -> None:
    """The scan's (and the system's own operations') growth per decade of memories."""
    sizes = sorted(results)
    for a, b in itertools.pairwise(sizes):
        per = 1 / math.log10(b / a)
        ra, rb = results[a], results[b]
        own = ", ".join(f"{k} {(rb[3][k] / ra[3][k]) ** per:.2f}x" for k in rb[3] if k in ra[3] and ra[3][k] > 0)
        print(f"{name}: growth per decade {a} -> {b}: scan {(rb[1] / ra[1]) ** per:.2f}x (CPU "
              f"{(rb[2] / ra[2]) ** per:.2f}x)" + (f"; own: {own}" if own else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=lambda t: [int(x) for x in t.split(",") if x], default=[10_000],
                    help="sizes, e.g. 10000,100000,1000000")
    ap.add_argument("--canaries", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=list(SYSTEMS))
    ap.add_argument("--no-own", action="store_true", help="skip the systems' own per-user read and delete")
    a = ap.parse_args()
    if not 0 < a.canaries < min(a.memories) // TURNS:
        ap.error(f"--canaries must be between 1 and --memories/{TURNS}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rng = np.random.default_rng(0)
    canaries = [make_canary(rng) for _ in range(a.canaries)]
    print("load:", os.getloadavg())
    ok = True
    for name in a.only or list(SYSTEMS):
        results: dict[int, Result] = {}
        for n in a.memories:
            r = bench(name, n, canaries, a.reps, own=not a.no_own)
            if r is None:
                break
            ok &= r[0]
            results[n] = r
            print("load:", os.getloadavg())
        growth(name, results)
    print("load:", os.getloadavg())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

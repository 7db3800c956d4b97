"""Scan and erasure of one user at 10^4, 10^5 and 10^6 memories on the SQLite-file systems
(issue 39.1-2: LangGraph's SqliteStore + SqliteSaver, Agno's SqliteDb, the OpenAI Agents SDK's
SQLiteSession, Google ADK's session + memory services), beside each system's own per-user
read and delete on the same data, in one run.

    python bench/bench_scale_sqlite.py [--sizes 10000,100000,1000000] [--only NAME ...]
                                      [--instances DIR] [--reps 1]

A memory is one user turn; the users are memories/10 (10^3 to 10^5). Each instance is built
once per size: the bench user's session carrying the canary and one template session go
through the adapter (the package's own writes), then the template's rows are copied into the
package's own tables with its user, session and text replaced by strings of the same length
(so LangGraph's msgpack checkpoints stay valid), ADK's FTS5 index rebuilt. ``--instances DIR``
keeps them there and reuses them (``DIR/NAME-N``). Per system and size, timed (wall and CPU):

* ``scan``: ``scan_system`` (the store scan and the byte scan of every file) of the bench user
  with the canary, on the instance attached read-only (attaching included);
* ``own read``: the system's own read of that user (LangGraph: ``store.search`` of the user's
  namespace and ``checkpointer.list`` of each of its threads; Agno: ``get_user_memories`` and
  ``get_sessions``; OpenAI Agents: ``session.get_items()``; ADK: ``list_sessions`` +
  ``get_session`` of each and ``search_memory``);
* ``forget``: ``erase_system`` of the user with the canary on a fresh copy (plan, scope
  check, bystander digests, native deletions, residue, VACUUM where needed, re-scan, digests, receipt);
* ``own delete``: the system's own deletion of that user on another copy (``delete_thread`` +
  ``store.delete``; ``clear_user_memories`` + ``delete_sessions``; ``clear_session``;
  ``delete_session`` of each session).

It prints per system one row per size with the ratios ``scan / own read`` and ``forget / own
delete`` and the growth per decade of scan and forget, and exits 1 when a receipt fails, the
scan misses the canary, or a target is missed (scan 2 s at 10^5, 10 s at 10^6; forget 20 s at
10^6). ``crewai``'s venv runs ``adk`` (``/work/venv-crewai/bin/python``); a system whose
package is missing is skipped with a line saying so. ``uptime`` is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import (
    SystemRuntime,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
    system_class,
)

TURNS = 4
USER, CANARY = "u000007", "CANARY-scale-5521"
TMPL_USER, TMPL_SESSION, TMPL_TEXT = "tmplusr", "tmplsess", "tmpltext"  # 7, 8, 8 characters
TARGETS = {100_000: (2.0, None), 1_000_000: (10.0, 20.0)}  # size → (scan s, forget s)


def _runtime() -> SystemRuntime:
    return SystemRuntime(ScriptedBackend(lambda m, c: "unused"), HashingEmbedder(), "scripted")


def _session(uid: str, sid: str, texts: list[str]) -> Session:
    turns = [t for x in texts for t in (Turn(role="user", content=x), Turn(role="assistant", content="noted"))]
    return Session(session_id=sid, user_id=uid, turns=turns)


def _user(j: int, users: int) -> str:
    return f"u{j % users:06d}"


def _subs(j: int, users: int) -> list[tuple[str, str]]:
    return [(TMPL_USER, _user(j, users)), (TMPL_SESSION, f"s{j:07d}"), (TMPL_TEXT, f"f{j:07d}")]


def _sub(v: Any, subs: list[tuple[str, str]]) -> Any:
    for a, b in subs:
        if isinstance(v, str):
            v = v.replace(a, b)
        elif isinstance(v, bytes):
            v = v.replace(a.encode(), b.encode())
    return v


def clone(db: Path, copies: int, users: int) -> None:
    """Every row naming the template user copied ``copies`` times, same-length replacements."""
    con = sqlite3.connect(str(db))
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                            "'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        for t in tables:
            info = list(con.execute(f'PRAGMA table_info("{t}")'))
            auto = {r[1] for r in info if r[5] and r[2].upper() == "INTEGER"} if sum(r[5] > 0 for r in info) == 1 else set()
            cols = [r[1] for r in info if r[1] not in auto]
            if not cols:
                continue
            sel = ", ".join(f'"{c}"' for c in cols)
            tmpl = [r for r in con.execute(f'SELECT {sel} FROM "{t}"')  # noqa: S608 - the package's tables
                    if any(TMPL_USER in (v.decode("latin-1") if isinstance(v, bytes) else str(v)) for v in r)]
            if not tmpl:
                continue
            ins = f'INSERT OR IGNORE INTO "{t}" ({sel}) VALUES ({", ".join("?" * len(cols))})'  # noqa: S608
            for start in range(0, copies, 10_000):
                con.executemany(ins, ([_sub(v, _subs(j, users)) for v in r]
                                      for j in range(start, min(copies, start + 10_000)) for r in tmpl))
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_events_fts'").fetchone():
            con.execute("INSERT INTO memory_events_fts(memory_events_fts) VALUES('rebuild')")
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


@dataclass(frozen=True)
class Spec:
    module: str
    dbs: tuple[str, ...]
    config: Callable[[Path], dict[str, Any]]
    own_read: Callable[[Path, list[str]], int]
    own_delete: Callable[[Path, list[str]], None]
    write_cfg: dict[str, Any]


def _build(name: str, spec: Spec, root: Path, n: int) -> None:
    users = max(1, n // 10)
    system = open_system(name, root, load_system_config(name, spec.write_cfg), _runtime())
    try:
        system.write([_session(USER, "carrier", [f"carrier turn {t}" + (f": my code is {CANARY}" if t == 1 else "")
                                                 for t in range(TURNS)]),
                      _session(TMPL_USER, TMPL_SESSION, [f"{TMPL_TEXT} {t} about the weather" for t in range(TURNS)])])
    finally:
        system.close()
    for db in spec.dbs:
        clone(root / db, n // TURNS - 2, users)


def _sessions_of(n: int) -> list[str]:
    """The bench user's session ids (the carrier and the template copies given to it)."""
    users = max(1, n // 10)
    return ["carrier", *(f"s{j:07d}" for j in range(n // TURNS - 2) if _user(j, users) == USER)]


# ------------------------------------------------------------------ each system's own read / delete
def _lg_read(root: Path, sids: list[str]) -> int:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    s, c = sqlite3.connect(root / "store.db"), sqlite3.connect(root / "checkpoints.db")
    try:
        items = SqliteStore(s).search((USER, "memories"), limit=10_000)
        saver = SqliteSaver(c)
        return len(items) + sum(len(list(saver.list({"configurable": {"thread_id": f"{USER}/{x}"}}))) for x in sids)
    finally:
        s.close()
        c.close()


def _lg_delete(root: Path, sids: list[str]) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    s, c = sqlite3.connect(root / "store.db"), sqlite3.connect(root / "checkpoints.db")
    try:
        store = SqliteStore(s)
        for it in store.search((USER, "memories"), limit=10_000):
            store.delete(it.namespace, it.key)
        saver = SqliteSaver(c)
        for x in sids:
            saver.delete_thread(f"{USER}/{x}")
    finally:
        s.close()
        c.close()


def _agno(root: Path) -> tuple[Any, Any]:
    os.environ["AGNO_TELEMETRY"] = "false"
    from agno.db.sqlite import SqliteDb
    from agno.memory import MemoryManager

    db = SqliteDb(db_file=str(root / "agno.db"))
    return db, MemoryManager(db=db)


def _agno_read(root: Path, sids: list[str]) -> int:
    db, mm = _agno(root)
    try:
        return len(mm.get_user_memories(user_id=USER) or []) + len(db.get_sessions(user_id=USER) or [])
    finally:
        db.close()


def _agno_delete(root: Path, sids: list[str]) -> None:
    db, mm = _agno(root)
    try:
        mm.clear_user_memories(user_id=USER)
        db.delete_sessions([f"{USER}/{x}" for x in sids], user_id=USER)
    finally:
        db.close()


def _oai_read(root: Path, sids: list[str]) -> int:
    from agents import SQLiteSession

    s = SQLiteSession(USER, str(root / "sessions.db"))
    try:
        return len(asyncio.run(s.get_items()))
    finally:
        s.close()


def _oai_delete(root: Path, sids: list[str]) -> None:
    from agents import SQLiteSession

    s = SQLiteSession(USER, str(root / "sessions.db"))
    try:
        asyncio.run(s.clear_session())
    finally:
        s.close()


async def _adk_services(root: Path) -> tuple[Any, Any]:
    from google.adk.memory import SqliteMemoryService
    from google.adk.sessions import DatabaseSessionService

    return (DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{(root / 'adk.db').resolve()}"),
            SqliteMemoryService((root / "adk.db").resolve()))


def _adk_read(root: Path, sids: list[str]) -> int:
    async def go() -> int:
        svc, mem = await _adk_services(root)
        try:
            res = await svc.list_sessions(app_name="traceless", user_id=USER)
            got = [await svc.get_session(app_name="traceless", user_id=USER, session_id=s.id) for s in res.sessions]
            found = await mem.search_memory(app_name="traceless", user_id=USER, query="weather")
            return sum(len(g.events) for g in got if g) + len(found.memories)
        finally:
            await svc.close()
            await mem.close()
    return asyncio.run(go())


def _adk_delete(root: Path, sids: list[str]) -> None:
    async def go() -> None:
        svc, mem = await _adk_services(root)
        try:
            res = await svc.list_sessions(app_name="traceless", user_id=USER)
            for s in res.sessions:
                await svc.delete_session(app_name="traceless", user_id=USER, session_id=s.id)
        finally:
            await svc.close()
            await mem.close()
    asyncio.run(go())


SYSTEMS: dict[str, Spec] = {
    "langgraph": Spec("langgraph", ("store.db", "checkpoints.db"),
                      lambda r: {"summarize": False, "store": {"kind": "sqlite", "path": str(r / "store.db")},
                                 "checkpointer": {"kind": "sqlite", "path": str(r / "checkpoints.db")}},
                      _lg_read, _lg_delete, {"summarize": False}),
    "agno": Spec("agno", ("agno.db",), lambda r: {"db_file": str(r / "agno.db")}, _agno_read, _agno_delete, {}),
    "openai-agents": Spec("agents", ("sessions.db",), lambda r: {"db_file": str(r / "sessions.db")},
                          _oai_read, _oai_delete, {}),
    "adk": Spec("google.adk", ("adk.db",), lambda r: {"db_file": str(r / "adk.db")}, _adk_read, _adk_delete, {}),
}


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def _copy(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def measure(name: str, src: Path, work: Path, n: int) -> dict[str, Any]:
    spec, cls = SYSTEMS[name], system_class(name)
    sids = _sessions_of(n)
    out: dict[str, Any] = {"MB": sum(p.stat().st_size for p in src.iterdir() if p.is_file()) / 1e6}

    def scan() -> Any:
        system = cls.attach(load_system_config(name, spec.config(src)), read_only=True)
        try:
            return scan_system(system, USER, [CANARY])
        finally:
            system.close()
    out["scan"], out["scan CPU"], rep = _timed(scan)
    out["found"] = bool(rep.files) and any(h.literal_count for h in rep.hits)
    spec.own_read(src, sids)  # the package's imports and the file's pages warm, as for the scan's second rep
    out["own read"], out["own read CPU"], out["read items"] = _timed(lambda: spec.own_read(src, sids))
    f = _copy(src, work / "forget")

    def forget() -> Any:
        system = cls.attach(load_system_config(name, spec.config(f)), read_only=False)
        try:
            return erase_system(system, USER, [CANARY], state_dir=work / "state", key=b"k" * 32)
        finally:
            system.close()
    out["forget"], out["forget CPU"], receipt = _timed(forget)
    out["passed"] = receipt.verification.passed
    d = _copy(src, work / "delete")
    out["own delete"], out["own delete CPU"], _ = _timed(lambda: spec.own_delete(d, sids))
    shutil.rmtree(f, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    return out


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_system(name: str, sizes: list[int], keep: Path | None) -> bool:
    spec = SYSTEMS[name]
    if importlib.util.find_spec(spec.module.split(".")[0]) is None or importlib.util.find_spec(spec.module) is None:
        print(f"{name}: skipped: {spec.module} is not installed in {sys.prefix}")
        return True
    ok, prev = True, None
    print(f"{name}:\n  {'memories':>9} {'MB':>7} {'scan s':>7} {'CPU':>6} {'own read':>9} {'x read':>7} {'forget s':>9} "
          f"{'CPU':>6} {'own del':>8} {'x del':>6} {'scan/dec':>9} {'forget/dec':>10} receipt")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-scale-{name}-") as tmp:
            src = (keep / f"{name}-{n}") if keep else Path(tmp) / "src"
            if not (src / spec.dbs[0]).is_file():
                t0 = time.perf_counter()
                _build(name, spec, src, n)
                print(f"  (built {n} memories in {time.perf_counter() - t0:.1f} s)")
            m = measure(name, src, Path(tmp), n)
        growth = (f"{m['scan'] / prev['scan']:>9.1f} {m['forget'] / prev['forget']:>10.1f}" if prev
                  else f"{'-':>9} {'-':>10}")
        print(f"  {n:>9} {m['MB']:>7.0f} {m['scan']:>7.2f} {m['scan CPU']:>6.2f} {m['own read']:>9.3f} "
              f"{m['scan'] / m['own read']:>7.1f} {m['forget']:>9.2f} {m['forget CPU']:>6.2f} {m['own delete']:>8.3f} "
              f"{m['forget'] / m['own delete']:>6.1f} {growth} {'passed' if m['passed'] else 'FAILED'}"
              + ("" if m["found"] else " MISSED the canary"))
        scan_t, forget_t = TARGETS.get(n, (None, None))
        ok &= m["passed"] and m["found"] and (scan_t is None or m["scan"] <= scan_t) and (
            forget_t is None or m["forget"] <= forget_t)
        prev = m
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="memories per instance, comma-separated")
    ap.add_argument("--only", nargs="+", choices=list(SYSTEMS))
    ap.add_argument("--instances", type=Path, help="keep the built instances here (reused when there)")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"load before: {_load()}")
    ok = all([run_system(name, sizes, a.instances) for name in a.only or list(SYSTEMS)])
    print(f"load after: {_load()}")
    print(f"targets (scan <= 2 s at 10^5, <= 10 s at 10^6; forget <= 20 s at 10^6) and receipts: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""``traceless scan`` / ``forget --memory agno|openai-agents`` on the Debian PostgreSQL 15 test
server (issue #35, ``TRACELESS_TEST_PG_URL``): Agno's ``PostgresDb(db_url=...)`` and the Agents
SDK's ``SQLAlchemySession.from_url(url=...)``, each instance built by the real package in a
fresh database owned by a fresh password role (over TCP on 127.0.0.1), three users (``ann``,
``ann2``: a prefix, ``bob``, who quotes ann's secret).

* ``scan`` changes nothing: row digests, ``pg_stat_user_tables`` write counters, the catalog;
  the server's statement log (``ALTER DATABASE … SET log_statement = 'all'``) shows only reads;
* ``forget --user ann`` with ``pg_compaction: full`` leaves 0 copies of ann's texts in the
  relation files after a CHECKPOINT; the package's own API shows ann gone, ann2 unchanged,
  bob's quote rewritten; the receipt verifies with the public key alone and names backups and
  WAL archives out of scope; the password is in no receipt and no output;
* the default (online ``VACUUM (INDEX_CLEANUP ON)``): rows gone, bytes left in the heap
  files (counted), the receipt says ``logical``;
* a wrong password, a missing table, a role without DELETE: one line, nothing changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.postgres,
              pytest.mark.usefixtures("_home")]

SYSTEMS = [pytest.param("agno", marks=pytest.mark.skipif(importlib.util.find_spec("agno") is None,
                                                          reason="needs traceless[agno]")),
           pytest.param("openai-agents", marks=pytest.mark.skipif(importlib.util.find_spec("agents") is None,
                                                                   reason="needs traceless[openai-agents]"))]
USERS = ("ann", "ann2", "bob")


def secret(user: str, i: int) -> str:
    return f"SECRET-{user}-{i}-QX7"


@dataclass
class Inst:
    system: str
    db: str
    url: str
    """The SQLAlchemy URL the app gives the package (holds the password)."""
    password: str
    su: str
    """The superuser URL of the database (the test's own reads)."""

    def config(self, **extra: Any) -> dict[str, Any]:
        key = "db_url" if self.system == "agno" else "url"
        return {key: self.url, **extra}


def _su_url(server: str, db: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(server)._replace(path=f"/{db}").geturl()


def _build_agno(url: str) -> None:
    os.environ["AGNO_TELEMETRY"] = "false"
    from agno.db.postgres import PostgresDb
    from agno.db.schemas import UserMemory
    from agno.memory import MemoryManager
    from agno.models.message import Message
    from agno.run.agent import RunOutput
    from agno.session import AgentSession

    db = PostgresDb(db_url=url)
    mm = MemoryManager(db=db)
    for u in USERS:
        for s in range(2):
            sid = f"{u}/s{s}"
            db.upsert_session(AgentSession(session_id=sid, agent_id="app", user_id=u, created_at=1_700_000_000))
            text = f"{u} says: my account code is {secret(u, s)}"
            if u == "bob" and s == 1:
                text = f"bob says: my colleague's code is {secret('ann', 0)}"
            msgs = [Message(role="user", content=text), Message(role="assistant", content="Noted.")]
            db.upsert_run(RunOutput(run_id=f"{sid}/r0", agent_id="app", session_id=sid, user_id=u, content="Noted.",
                                    messages=msgs), session_id=sid, user_id=u, run_index=0)
            mm.add_user_memory(UserMemory(memory=text, memory_id=f"{sid}/m0", input=text), user_id=u)
    db.close()


def _build_sdk(url: str) -> None:
    from agents.extensions.memory import SQLAlchemySession

    async def go() -> None:
        for u in USERS:
            s = SQLAlchemySession.from_url(u, url=url, create_tables=True)
            for i in range(2):
                text = f"{u} says: my account code is {secret(u, i)}"
                if u == "bob" and i == 1:
                    text = f"bob says: my colleague's code is {secret('ann', 0)}"
                await s.add_items([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
            await s.engine.dispose()

    asyncio.run(go())


def api_view(inst: Inst, user: str) -> list[str]:
    """What the package's own API returns for ``user``."""
    if inst.system == "agno":
        from agno.db.postgres import PostgresDb
        from agno.memory import MemoryManager

        db = PostgresDb(db_url=inst.url)
        try:
            mems = sorted(f"memory {m.memory_id}: {m.memory}" for m in MemoryManager(db=db).get_user_memories(user_id=user) or [])
            sess = db.get_sessions(user_id=user) or []
            runs = sorted(f"run {r.run_id}: " + " | ".join(str(m.content) for m in r.messages or [])
                          for s in sess for r in getattr(s, "runs", None) or [])
            return mems + sorted(f"session {s.session_id}" for s in sess) + runs
        finally:
            db.close()
    from agents.extensions.memory import SQLAlchemySession

    async def go() -> list[str]:
        s = SQLAlchemySession.from_url(user, url=inst.url)
        try:
            return [json.dumps(it, sort_keys=True) for it in await s.get_items()]
        finally:
            await s.engine.dispose()

    return asyncio.run(go())


@pytest.fixture(params=SYSTEMS)
def inst(request: pytest.FixtureRequest, pg_server: str) -> Iterator[Inst]:
    """A fresh database owned by a fresh password role, the instance built in it by the package."""
    import psycopg

    tcp = os.environ.get("TRACELESS_TEST_PG_TCP")
    if not tcp:
        pytest.skip("TRACELESS_TEST_PG_TCP unset (the password role logs in over TCP)")
    tag = uuid.uuid4().hex[:10]
    role, db, pw = f"tl_role_{tag}", f"traceless_t_{tag}", f"pw-{tag}-Zk9"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'")
        c.execute(f"GRANT pg_checkpoint, pg_read_all_settings TO {role}")
        c.execute(f"CREATE DATABASE {db} OWNER {role}")
    url = f"postgresql+psycopg://{role}:{pw}@{tcp}/{db}"
    try:
        (_build_agno if request.param == "agno" else _build_sdk)(url)
        yield Inst(request.param, db, url, pw, _su_url(pg_server, db))
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {role}")


def _tables(c: Any) -> list[str]:
    return [str(r[0]) for r in c.execute(
        "SELECT schemaname || '.' || relname FROM pg_stat_user_tables ORDER BY 1").fetchall()]


def rows_digest(inst: Inst) -> str:
    import psycopg

    with psycopg.connect(inst.su) as c:
        rows = {t: [r[0] for r in c.execute(f"SELECT t::text FROM {t} t ORDER BY 1").fetchall()]  # noqa: S608
                for t in _tables(c)}
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def write_counters(inst: Inst) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(inst.su) as c:
        return list(c.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables "
                              "ORDER BY relname").fetchall())


def catalog(inst: Inst) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(inst.su) as c:
        return list(c.execute("SELECT relname, relkind, relfilenode::text FROM pg_class WHERE relnamespace NOT IN "
                              "('pg_catalog'::regnamespace, 'information_schema'::regnamespace) "
                              "AND relkind IN ('r', 'i', 't', 'S') ORDER BY 1").fetchall())


def relation_copies(inst: Inst, needles: list[str]) -> dict[str, int]:
    """After a CHECKPOINT: occurrences of ``needles`` per relation file (heap, TOAST, indexes)
    of every user table, read from the data directory."""
    import psycopg

    with psycopg.connect(inst.su, autocommit=True) as c:
        c.execute("CHECKPOINT")
        data = Path(str(c.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
        rels = c.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relkind IN ('r', 'i', 't') "
            "AND (c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, "
            "'pg_toast'::regnamespace) OR c.oid IN (SELECT reltoastrelid FROM pg_class t WHERE t.relnamespace "
            "NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)) OR c.oid IN (SELECT "
            "indexrelid FROM pg_index WHERE indrelid IN (SELECT reltoastrelid FROM pg_class)))").fetchall()
    out = {}
    for name, fp in rels:
        if not fp:
            continue
        files = [data / fp, *sorted((data / fp).parent.glob(Path(fp).name + ".[0-9]*"))]
        out[str(name)] = sum(p.read_bytes().count(n.encode()) for p in files if p.is_file() for n in needles)
    return out


def wal_segments_holding(inst: Inst, needles: list[str]) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(inst.su) as c:
        data = Path(str(c.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    segs = [p for p in (data / "pg_wal").iterdir() if p.is_file() and len(p.name) == 24]
    return sum(1 for p in segs if any(n.encode() in p.read_bytes() for n in needles)), len(segs)


def _server_log() -> Path:
    data = os.environ.get("TRACELESS_TEST_PG_DATA")
    if not data or not (Path(data).parent / "server.log").is_file():
        pytest.skip("the test server's log is not readable here (TRACELESS_TEST_PG_DATA/../server.log)")
    return Path(data).parent / "server.log"


def _cfg_file(tmp_path: Path, inst: Inst, **extra: Any) -> Path:
    p = tmp_path / f"{inst.system}.json"
    p.write_text(json.dumps(inst.config(**extra)), encoding="utf-8")
    return p


@pytest.mark.parametrize("user", ["ann"])
def test_scan_on_the_server_changes_nothing_and_only_reads(inst: Inst, tmp_path: Path, user: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    log = _server_log()
    cfg = _cfg_file(tmp_path, inst)
    with psycopg.connect(inst.su, autocommit=True) as c:
        c.execute(f"ALTER DATABASE {inst.db} SET log_statement = 'all'")
        c.execute("CHECKPOINT")  # the pages on disk: what a byte scan of the files can see
    before = (rows_digest(inst), write_counters(inst), catalog(inst))
    start = log.stat().st_size
    assert cli("scan", "--memory", inst.system, "--memory-config", str(cfg), "--user", user,
               "--literal", secret("ann", 0), "--json") == 0
    out, err = capsys.readouterr()
    with open(log, "rb") as f:
        f.seek(start)
        logged = [ln.split("statement: ", 1)[1].strip() for ln in f.read().decode("utf-8", "replace").splitlines()
                  if "statement: " in ln and f"db={inst.db} " in ln]  # the log is the cluster's: other tests' too
    with psycopg.connect(inst.su, autocommit=True) as c:
        c.execute(f"ALTER DATABASE {inst.db} RESET log_statement")
    assert logged and all(s.split()[0].upper() in ("BEGIN", "SELECT", "SHOW", "ROLLBACK") for s in logged), logged
    assert any(s.upper().startswith("BEGIN READ ONLY") for s in logged)
    assert (rows_digest(inst), write_counters(inst), catalog(inst)) == before
    report = json.loads(out)
    mine = [h for h in report["hits"] if h["owner_match"]]
    quoted = [h for h in report["hits"] if not h["owner_match"]]
    # ann's rows only, none of ann2's: agno 2 sessions, 2 runs, 2 memories; the SDK 1 session, 4 messages
    assert len(mine) == (6 if inst.system == "agno" else 5), report["hits"]
    assert len(quoted) == (2 if inst.system == "agno" else 1), report["hits"]  # bob's quote (memory, run)
    assert any(f["count"] for f in report["files"])  # the heap files hold the literal's bytes
    assert inst.password not in out + err


def _forget(inst: Inst, tmp_path: Path, capsys: pytest.CaptureFixture[str], **extra: Any) -> tuple[int, dict[str, Any], str]:
    cfg = _cfg_file(tmp_path, inst, **extra)
    receipt = tmp_path / "receipt.json"
    lits = [a for i in range(2) for a in ("--literal", secret("ann", i))]
    rc = cli("forget", "--memory", inst.system, "--memory-config", str(cfg), "--user", "ann", *lits,
             "--receipt", str(receipt))
    out, err = capsys.readouterr()
    text = receipt.read_text(encoding="utf-8")
    assert inst.password not in text + out + err  # no credential in the receipt or any output
    return rc, json.loads(text), out + err


def test_forget_full_leaves_no_copy_in_the_relation_files(inst: Inst, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    secrets = [secret("ann", i) for i in range(2)]
    assert sum(relation_copies(inst, secrets).values()) > 0
    views = {u: api_view(inst, u) for u in ("ann2", "bob")}
    assert api_view(inst, "ann") and all(views.values())
    rc, r, _ = _forget(inst, tmp_path, capsys, traceless={"pg_compaction": "full"})
    assert rc == 0, r["verification"]
    copies = relation_copies(inst, secrets)
    assert copies and all(n == 0 for n in copies.values()), copies
    assert api_view(inst, "ann") == []
    assert api_view(inst, "ann2") == views["ann2"]
    bob = api_view(inst, "bob")
    assert bob != views["bob"] and [b for b in bob if "[erased]" not in b] == [
        v for v in views["bob"] if secret("ann", 0) not in v]
    assert r["verification"]["passed"] and r["verification"]["checks"]["bystanders_intact"]
    assert r["verification"]["checks"]["files_clean"]
    assert all(g.endswith("=clear") for g in r["guarantee"]), r["guarantee"]
    notes = " ".join(r["notes"])
    assert "VACUUM FULL" in notes and "0 copies of the erased records' texts" in notes and "pg_wal: " in notes
    assert "base backups" in notes and "WAL archives" in notes and "replicas" in notes
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    assert cli("forget", "verify", str(tmp_path / "receipt.json"), "--public-key", str(pub)) == 0


def test_plain_vacuum_leaves_bytes_and_the_receipt_says_logical(inst: Inst, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    secrets = [secret("ann", i) for i in range(2)]
    views = {u: api_view(inst, u) for u in ("ann2", "bob")}
    rc, r, err = _forget(inst, tmp_path, capsys)
    assert rc == 11 and "files_clean" in err
    left = relation_copies(inst, secrets)
    assert sum(left.values()) > 0, left  # VACUUM (INDEX_CLEANUP ON) leaves the tuples' bytes
    assert api_view(inst, "ann") == [] and api_view(inst, "ann2") == views["ann2"]
    assert not r["verification"]["checks"]["files_clean"] and r["verification"]["checks"]["bystanders_intact"]
    assert all(v for k, v in r["verification"]["checks"].items() if k.startswith("store_clean:"))
    assert all(g.endswith("=logical") for g in r["guarantee"]), r["guarantee"]
    assert "VACUUM (INDEX_CLEANUP ON)" in " ".join(r["notes"])


def test_bad_server_input_is_one_line_and_changes_nothing(inst: Inst, pg_server: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    before = rows_digest(inst), catalog(inst)
    tcp = os.environ["TRACELESS_TEST_PG_TCP"]
    key = "db_url" if inst.system == "agno" else "url"
    bad = tmp_path / "bad.json"
    wrong = inst.url.replace(inst.password, "wrong-pw-xyz")
    for cfg, why in (({key: wrong}, "password authentication failed"),
                     ({key: wrong.replace(tcp, "127.0.0.1:1")}, "127.0.0.1:1"),
                     ({key: inst.url, ("memory_table" if inst.system == "agno" else "sessions_table"): "nope"},
                      "no table")):
        bad.write_text(json.dumps(cfg), encoding="utf-8")
        for cmd in ("scan", "forget"):
            assert cli(cmd, "--memory", inst.system, "--memory-config", str(bad), "--user", "ann") == 2
            out, err = capsys.readouterr()
            assert why in err and len(err.strip().splitlines()) == 1, err
            assert "wrong-pw" not in out + err and inst.password not in out + err
    reader = f"tl_ro_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'ro-pw-123'")
    try:
        with psycopg.connect(inst.su, autocommit=True) as c:
            c.execute(f"GRANT USAGE ON SCHEMA {'ai' if inst.system == 'agno' else 'public'} TO {reader}")
            c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {'ai' if inst.system == 'agno' else 'public'} TO {reader}")
        ro = inst.url.split("://")[0] + f"://{reader}:ro-pw-123@{tcp}/{inst.db}"
        bad.write_text(json.dumps({key: ro}), encoding="utf-8")
        assert cli("forget", "--memory", inst.system, "--memory-config", str(bad), "--user", "ann") == 2
        err = capsys.readouterr().err
        assert "may not DELETE" in err and "nothing was changed" in err, err
    finally:
        with psycopg.connect(inst.su, autocommit=True) as c:
            c.execute(f"DROP OWNED BY {reader}")
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP ROLE {reader}")
    assert (rows_digest(inst), catalog(inst)) == before


# ---------------------------------------------------------------- online: the app keeps writing


def _app(system: str, url: str, stop: Any, ready: Any, count: Any, out: Any) -> None:
    """The application, in its own process (as in production), through the package's own API:
    it reads ann2's records, updates ann2's (Agno: ann2's memory; the SDK: a turn appended to
    ann2's session) and writes a new user's; every call timed, every write kept (what must be
    there after). Results back through ``out`` once ``stop``."""
    import time

    waits: list[tuple[float, float]] = []
    errors: list[str] = []
    writes: dict[str, list[str]] = {}
    ops = _agno_ops(url) if system == "agno" else _sdk_ops(url)
    n = 0
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            key, text = ops[0](n)
            if key:
                writes.setdefault(key, []).append(text)
                with count.get_lock():
                    count.value += 1
        except Exception as e:  # every failure is the test's evidence
            errors.append(f"{type(e).__name__}: {e}")
        waits.append((t0, time.monotonic() - t0))
        n += 1
        if n == 3:
            ready.set()
        time.sleep(0.01)
    ops[1]()
    out.put((waits, errors, writes))


def _agno_ops(url: str) -> tuple[Any, Any]:
    from agno.db.postgres import PostgresDb
    from agno.db.schemas import UserMemory

    db = PostgresDb(db_url=url)

    def op(n: int) -> tuple[str, str]:
        if n % 3 == 0:
            db.get_user_memories(user_id="ann2")
            return "", ""
        mid, user = ("ann2/s0/m0", "ann2") if n % 3 == 1 else (f"app/{n}", f"app{n % 5}")
        text = f"{user} written by the app during the erasure {n}"
        db.upsert_user_memory(UserMemory(memory=text, memory_id=mid, user_id=user, input=text))
        return mid, text

    return op, db.close


def _sdk_ops(url: str) -> tuple[Any, Any]:
    from agents.extensions.memory import SQLAlchemySession

    loop = asyncio.new_event_loop()
    sessions = {s: SQLAlchemySession.from_url(s, url=url, create_tables=False) for s in ("ann2", *(f"app{i}" for i in range(5)))}

    def op(n: int) -> tuple[str, str]:
        if n % 3 == 0:
            loop.run_until_complete(sessions["ann2"].get_items())
            return "", ""
        sid = "ann2" if n % 3 == 1 else f"app{n % 5}"
        text = f"{sid} written by the app during the erasure {n}"
        loop.run_until_complete(sessions[sid].add_items([{"role": "user", "content": text}]))
        return sid, text

    def close() -> None:
        for s in sessions.values():
            loop.run_until_complete(s.engine.dispose())
        loop.close()

    return op, close


def _lost(inst: Inst, writes: dict[str, list[str]]) -> list[str]:
    """The app's writes not there after: Agno's memory keeps its last text, the SDK's session every item."""
    if inst.system == "agno":
        from agno.db.postgres import PostgresDb

        db = PostgresDb(db_url=inst.url)
        try:
            got = {k: getattr(db.get_user_memory(k), "memory", None) for k in writes}
        finally:
            db.close()
        return [k for k, texts in writes.items() if got[k] != texts[-1]]
    from agents.extensions.memory import SQLAlchemySession

    async def go() -> list[str]:
        out = []
        for sid, texts in writes.items():
            s = SQLAlchemySession.from_url(sid, url=inst.url)
            have = {json.dumps(it.get("content")) for it in await s.get_items()}
            await s.engine.dispose()
            out += [f"{sid}: {t}" for t in texts if json.dumps(t) not in have]
        return out

    return asyncio.run(go())


def _overdelete(system: str, con: Any, keys: Any) -> Any:
    """A broken DELETE: one of ann2's rows too (a bystander)."""
    if system == "agno":
        t = next(t for t in keys if t.endswith("agno_memories"))
        row = ("ann2/s1/m0",)
    else:
        t = next(t for t in keys if t.endswith("agent_messages"))
        row = (str(con.execute("SELECT min(id)::text FROM agent_messages WHERE session_id = 'ann2'").fetchone()[0]),)
    cols, vals = keys[t]
    return {**keys, t: (cols, {*vals, row})}


@pytest.mark.parametrize("level, broken", [("vacuum", False), ("full", False), ("vacuum", True)])
def test_forget_online_while_the_app_writes_other_users(inst: Inst, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], level: str,
                                                        broken: bool) -> None:
    """The online bystander rule on Agno's ``PostgresDb`` / the SDK's ``SQLAlchemySession``: while
    the app (its own process, the package's own API) reads and writes other users' records,
    ``forget`` passes ``bystanders_intact`` (only rows this erasure's DELETE removed and its
    rewrites count), says what the app changed, the app sees no error and loses no write, and the
    longest wait of an app call during the erasure is reported. The erasure is held at its DELETE
    until the app has written twice before and twice after it (the writes fall inside the erasure
    on any machine). ``broken``: the DELETE also removes one of ann2's rows: the check FAILS."""
    import multiprocessing as mp
    import re
    import time

    from traceless.systems import _pg_tables

    ctx = mp.get_context("spawn")
    stop, ready, count, out = ctx.Event(), ctx.Event(), ctx.Value("i", 0), ctx.Queue()
    real = _pg_tables.delete_in

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 30
        while count.value < n and time.monotonic() < deadline:
            time.sleep(0.01)

    def delete_in(con: Any, keys: Any) -> Any:
        wait_for(count.value + 2)
        gone = real(con, _overdelete(inst.system, con, keys) if broken else keys)
        wait_for(count.value + 2)
        return gone

    monkeypatch.setattr(_pg_tables, "delete_in", delete_in)
    views = {u: api_view(inst, u) for u in ("ann2", "bob")}
    proc = ctx.Process(target=_app, args=(inst.system, inst.url, stop, ready, count, out), daemon=True)
    proc.start()
    try:
        assert ready.wait(60), f"the app process did not start (exit code {proc.exitcode})"
        t0 = time.monotonic()
        rc, r, err = _forget(inst, tmp_path, capsys, **({"traceless": {"pg_compaction": "full"}} if level == "full" else {}))
        t1 = time.monotonic()
        time.sleep(0.2)
        stop.set()
        waits, errors, writes = out.get(timeout=60)
    finally:
        stop.set()
        proc.join(timeout=30)
    during = [s for t, s in waits if t <= t1 and t + s >= t0]
    online = next(n for n in r["notes"] if "online: this erasure's DELETE removed" in n)
    print(f"\n[{inst.system} online] level={level} broken={broken}: forget {t1 - t0:.2f} s, {len(during)} app calls "
          f"during it, longest {1000 * max(during, default=0):.0f} ms, rc {rc}; {online}")
    assert not errors, errors[:3]
    assert api_view(inst, "ann") == []
    if broken:
        assert rc == 11 and not r["verification"]["checks"]["bystanders_intact"], err
        assert "1 of them NOT in the plan" in online and any("OVER-DELETION" in n for n in r["notes"])
        return
    checks = r["verification"]["checks"]
    # the default may leave bytes in the heap's free space (the app's own inserts may overwrite them)
    assert rc == (0 if checks["files_clean"] else 11) and (level == "vacuum" or rc == 0), err
    assert all(v for k, v in checks.items() if k != "files_clean"), checks
    assert not _lost(inst, writes) and len(during) >= 4
    assert [v for v in api_view(inst, "bob") if "[erased]" not in v] == [
        v for v in views["bob"] if secret("ann", 0) not in v]  # bob's quote rewritten, the rest kept
    assert ", all planned; meanwhile other transactions (the application) changed some of the other users' rows and " \
        "added some of the other users' rows" in online, online
    assert not re.search(r"\d", online.split("all planned", 1)[1]), online  # how many: not the requester's to learn

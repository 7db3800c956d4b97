"""``forget --memory mem0`` on pgvector **online** (issue #35, items 3 and 4), on a real
PostgreSQL 18 + pgvector server (the ``pgvector_server`` fixture):

* under concurrency: while ``traceless.erase`` (what ``traceless forget --memory mem0
  --user X`` runs) erases one user, an application keeps reading and writing other users'
  memories through mem0's own pgvector store (``PGVector.search`` / ``list`` / ``insert``,
  its connection pool, from threads): no error, no lost write, and the longest wait any
  app query saw is reported for each physical step; the default one (plain ``VACUUM``)
  must not block the app, the opt-in ``VACUUM FULL`` is measured blocking it;
* a physical streaming replica (``pgvector_replica``: ``pg_basebackup -R``, its own port
  on loopback), named in the config (``traceless: {pg_replicas: [...]}``): after the
  erasure has replayed and a restartpoint, its relation files are read too and the
  receipt says, per replica, verified or not; backups and WAL archives are named out of
  scope in every receipt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")]

TABLE = "app_memories"
DIMS = 384
USERS = 100
PER_USER = 15
TARGET, PREFIXED = "target", "target2"  # one bystander's id has the target's as a prefix


def canary(user: str, i: int) -> str:
    return f"CANARY-{user}-{i}-online-7Q"


def _su(srv: Any, db: str) -> Any:
    import psycopg

    return psycopg.connect(srv.superuser_dsn(db), autocommit=True)


def _store(url: str, dims: int = DIMS) -> Any:
    """mem0's own pgvector store, as ``Memory.from_config`` builds it (a psycopg pool)."""
    from mem0.vector_stores.pgvector import PGVector

    return PGVector(dbname=None, collection_name=TABLE, embedding_model_dims=dims, user=None, password=None,
                    host=None, port=None, diskann=False, hnsw=True, maxconn=8, connection_string=url)


def _vec(rng: random.Random, dims: int = DIMS) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(dims)]


def _payload(user: str, text: str) -> dict[str, Any]:
    """What mem0's ``_create_memory`` stores (``infer=False``)."""
    now = datetime.now(UTC).isoformat()
    return {"user_id": user, "data": text, "hash": hashlib.md5(text.encode()).hexdigest(),  # noqa: S324 - mem0's
            "created_at": now, "updated_at": now, "text_lemmatized": text.lower()}


@pytest.fixture(scope="module")
def template(pgvector_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Database ``online_tmpl``: mem0's table as mem0 creates it (heap, HNSW, GIN), USERS x
    PER_USER memories plus the target's and the prefixed bystander's three (loaded before
    the HNSW index is built, as mem0 names it: seconds instead of one graph insert per row);
    mem0's history db (copied per test)."""
    from mem0.memory.storage import SQLiteManager
    from psycopg.types.json import Jsonb

    root = tmp_path_factory.mktemp("pg-online")
    with _su(pgvector_server, "postgres") as c:
        c.execute("CREATE DATABASE online_tmpl")
    store, rng = _store(pgvector_server.url("online_tmpl")), random.Random(7)
    try:
        store.create_col()
    finally:
        store.connection_pool.close()
    rows = [(f"u{u:04d}", f"u{u:04d} note {i}: likes topic {rng.randrange(10**6)}")
            for u in range(USERS) for i in range(PER_USER)]
    rows += [(u, f"{u} note {i}: my account code is {canary(u, i)}") for u in (TARGET, PREFIXED) for i in range(3)]
    ids = [str(uuid.uuid4()) for _ in rows]
    with _su(pgvector_server, "online_tmpl") as c:
        c.execute(f"DROP INDEX {TABLE}_hnsw_idx")
        with c.cursor() as cur:
            cur.executemany(f"INSERT INTO {TABLE} (id, vector, payload) VALUES (%s, %s, %s)",
                            [(i, str(_vec(rng)), Jsonb(_payload(u, t))) for i, (u, t) in zip(ids, rows, strict=True)])
        c.execute(f"CREATE INDEX {TABLE}_hnsw_idx ON {TABLE} USING hnsw (vector vector_cosine_ops)")
    hist = SQLiteManager(str(root / "history.db"))
    try:
        for mid, (u, t) in zip(ids, rows, strict=True):
            if u in (TARGET, PREFIXED):
                hist.add_history(mid, None, t, "ADD")
    finally:
        hist.close()
    return root


_N = iter(range(10_000))


def _instance(srv: Any, template: Path, tmp_path: Path, **traceless: Any) -> tuple[Path, str]:
    """A fresh copy of the template (database, history db) and its mem0 config file."""
    db = f"online{next(_N)}"
    with _su(srv, "postgres") as c:
        c.execute(f"CREATE DATABASE {db} TEMPLATE online_tmpl")
    shutil.copy(template / "history.db", tmp_path / "history.db")
    cfg = {"vector_store": {"provider": "pgvector", "config": {
        "connection_string": srv.url(db), "collection_name": TABLE, "embedding_model_dims": DIMS}},
        "history_db_path": str(tmp_path / "history.db"), "version": "v1.1",
        "traceless": {"infer": False, **traceless}}
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path, db


@dataclass
class AppLoad:
    """The application: its own process (as in production: not the erasing process, whose
    imports would otherwise hold the test's GIL), ``threads`` threads sharing mem0's pgvector
    store and its connection pool, each looping over a vector search, a list, an insert of a
    random other user's memories and an update of one of ``mutable`` (other users' memories
    that exist before the erasure; each thread its own share), every query timed."""

    url: str
    mutable: list[tuple[str, str]]
    """(id, user) of the memories the app updates."""
    threads: int = 3
    dims: int = DIMS
    """The collection's vector size (the bench's ``--dims``)."""
    waits: list[tuple[float, float]] = field(default_factory=list)
    """(start on the monotonic clock, seconds) of every query."""
    errors: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    updated: dict[str, str] = field(default_factory=dict)
    """id → the text of the app's last update of it."""

    @contextmanager
    def running(self) -> Iterator[None]:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        stop, ready, out = ctx.Event(), ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=_app, args=(self.url, self.mutable, self.threads, stop, ready, out, self.dims), daemon=True)
        proc.start()
        try:
            assert ready.wait(60), f"the app process did not start (exit code {proc.exitcode})"
            yield
            stop.set()
            self.waits, self.errors, self.written, self.updated = out.get(timeout=60)
        finally:
            stop.set()
            proc.join(timeout=30)

    def longest(self, start: float, end: float) -> float:
        """The longest query (ms) that overlapped [start, end]."""
        return 1000 * max((s for t, s in self.waits if t <= end and t + s >= start), default=0.0)


def _app(url: str, mutable: list[tuple[str, str]], threads: int, stop: Any, ready: Any, out: Any,  # noqa: PLR0913
         dims: int = DIMS) -> None:
    """The app process's body (see ``AppLoad``): results back through ``out`` once ``stop``."""
    store = _store(url, dims)
    waits: list[tuple[float, float]] = []
    errors: list[str] = []
    written: list[str] = []
    updated: dict[str, str] = {}
    lock = threading.Lock()

    def loop(rng: random.Random, mine: list[tuple[str, str]]) -> None:
        n = 0
        while not stop.is_set():
            user = f"u{rng.randrange(USERS):04d}"
            t0 = time.monotonic()
            try:
                if n % 4 == 0:
                    store.search("", _vec(rng, dims), top_k=5, filters={"user_id": user})
                elif n % 4 == 1:
                    store.list(filters={"user_id": user}, top_k=100)
                elif n % 4 == 3:
                    mid, owner = mine[rng.randrange(len(mine))]
                    text = f"{owner} updated during the erasure {n}"
                    store.update(mid, payload=_payload(owner, text))
                    with lock:
                        updated[mid] = text
                else:
                    mid = str(uuid.uuid4())
                    store.insert([_vec(rng, dims)], [_payload(user, f"{user} written during the erasure {mid}")], [mid])
                    with lock:
                        written.append(mid)
            except Exception as e:  # every failure is the test's evidence
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
            with lock:
                waits.append((t0, time.monotonic() - t0))
            n += 1
            if n == 3:
                ready.set()
            time.sleep(0.005)

    workers = [threading.Thread(target=loop, args=(random.Random(n), mutable[n::threads]), daemon=True)
               for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.connection_pool.close()
    out.put((waits, errors, written, updated))


def _rows(srv: Any, db: str) -> dict[str, tuple[str, str]]:
    """id → (user, text) of every memory."""
    with _su(srv, db) as c:
        return {str(i): (str(u), str(t)) for i, u, t in c.execute(
            f"SELECT id::text, payload->>'user_id', payload->>'data' FROM {TABLE}")}


@pytest.mark.parametrize("level", ["vacuum", "full"])
def test_erasure_under_app_load_loses_no_write_and_reports_the_longest_wait(
        pgvector_server: Any, template: Path, tmp_path: Path, level: str) -> None:
    from traceless._erase_api import erase  # what `traceless forget --memory` runs

    srv = pgvector_server
    cfg_path, db = _instance(srv, template, tmp_path, **({"pg_compaction": level} if level == "full" else {}))
    before = _rows(srv, db)
    load = AppLoad(srv.url(db), sorted((i, u) for i, (u, _) in before.items() if u.startswith("u"))[:60])
    with load.running():
        time.sleep(0.5)  # the app's own latency before the erasure
        t0 = time.monotonic()
        receipt = erase("mem0", cfg_path, user=TARGET, receipt=tmp_path / "receipt.json",
                                  state_dir=tmp_path / "state")
        t1 = time.monotonic()
        time.sleep(0.3)
    after = _rows(srv, db)
    assert not load.errors, load.errors[:3]
    lost = [m for m in load.written if m not in after] + [m for m, t in load.updated.items() if after[m][1] != t]
    assert not lost and len(load.written) > 10 and load.updated  # every write of the load is there after
    assert {i: u for i, (u, _) in before.items() if u != TARGET} == {i: u for i, (u, _) in after.items() if i in before}
    assert TARGET not in {u for u, _ in after.values()}
    wait, base = load.longest(t0, t1), load.longest(0, t0 - 0.01)
    print(f"\n[pg online] level={level}: erasure {1000 * (t1 - t0):.0f} ms, longest app wait {wait:.0f} ms "
          f"(before the erasure {base:.0f} ms), {len(load.waits)} app queries, {len(load.written)} inserts, {len(load.updated)} rows updated, 0 lost; "
          + next((n for n in receipt.notes if "online: " in n), ""))
    if level == "vacuum":  # the default level: online (measured 67-136 ms on 2 shared cores, the app's own ~90)
        assert wait < 1000, f"the default physical step made the app wait {wait:.0f} ms"
    notes = " ".join(receipt.notes)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    assert "removed 3 rows, all planned" in notes
    assert "(the application) added some of the other users' rows" in notes, notes  # its inserts, counted
    online = next(n for n in receipt.notes if "online: " in n)
    assert not re.search(r"\d", online.split("all planned", 1)[1]), online  # how many: not the requester's to learn
    assert ("VACUUM FULL" in notes and "ACCESS EXCLUSIVE" in notes) if level == "full" else (
        "VACUUM (INDEX_CLEANUP ON)" in notes and "online" in notes)
    assert "out of scope: PostgreSQL base backups and dumps" in receipt.notes
    assert "out of scope: WAL archives (archive_command / pg_receivewal)" in receipt.notes


def _replayed(primary: Any, replica: Any, db: str) -> None:
    """Wait until the replica has replayed the primary's WAL as of now, then a restartpoint."""
    import psycopg

    with _su(primary, "postgres") as c:
        lsn = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + 30
    while True:
        try:
            with _su(replica, db) as c:
                if c.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                    c.execute("CHECKPOINT")
                    return
        except psycopg.OperationalError:  # the database itself not replayed yet
            pass
        assert time.monotonic() < deadline, "the replica did not replay within 30 s"
        time.sleep(0.05)


def replica_copies(primary: Any, replica: Any, db: str, needles: list[str]) -> int:
    """The needles' occurrences in the table's relation files (heap, TOAST, indexes) on the
    replica, read under its own data directory after replay and a restartpoint."""
    with _su(primary, db) as c:
        c.execute("CHECKPOINT")
    _replayed(primary, replica, db)
    with _su(replica, db) as c:
        rels = [r[0] for r in c.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = %s::regclass "
            "OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)", (TABLE,) * 3)]
    files = [f for fp in rels for f in [replica.data / fp, *(replica.data / fp).parent.glob(Path(fp).name + ".[0-9]*")]]
    return sum(f.read_bytes().count(n.encode()) for f in files if f.is_file() for n in needles)


def test_replica_holds_no_copy_after_replay_and_the_receipt_says_per_replica(
        pgvector_server: Any, pgvector_replica: Any, template: Path, tmp_path: Path) -> None:
    """``pg_replicas`` names the streaming replica twice: as the superuser (verified: 0 copies
    in its relation files after replay and a restartpoint, the kernel's byte scan reads them
    too) and as a role that may not CHECKPOINT there (listed as NOT verified); the primary
    itself named as a replica is refused before anything changes."""
    from traceless._erase_api import erase
    from traceless.errors import ConfigError

    srv, rep = pgvector_server, pgvector_replica
    with _su(srv, "postgres") as c:
        c.execute("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN "
                  "CREATE ROLE reader LOGIN PASSWORD 'r3ader-pw'; END IF; END$$")
    cfg_path, db = _instance(srv, template, tmp_path, pg_compaction="full")
    secrets = [canary(TARGET, i) for i in range(3)]
    cfg = json.loads(cfg_path.read_text())
    cfg["traceless"]["pg_replicas"] = [srv.url(db)]  # the primary: not a standby
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="is not a standby"):
        erase("mem0", cfg_path, user=TARGET, literals=secrets, state_dir=tmp_path / "state")
    before = replica_copies(srv, rep, db, secrets)
    assert before > 0  # the replica's heap holds the target's texts
    cfg["traceless"]["pg_replicas"] = [rep.url(db), f"postgresql://reader:r3ader-pw@127.0.0.1:{rep.port}/{db}"]
    cfg_path.write_text(json.dumps(cfg))
    receipt = erase("mem0", cfg_path, user=TARGET, literals=secrets, receipt=tmp_path / "receipt.json",
                    state_dir=tmp_path / "state")
    after = replica_copies(srv, rep, db, secrets)
    print(f"\n[pg replica] copies of the target's texts in the replica's relation files: {before} before, "
          f"{after} after the erasure (VACUUM FULL) replayed")
    assert after == 0
    notes = [n.split(": ", 1)[1] for n in receipt.notes if n.startswith("vector_store: PostgreSQL replica")]
    verified = [n for n in notes if "verified after replaying" in n]
    assert len(verified) == 1 and "0 copies of the erased records' texts" in verified[0], notes
    assert any("NOT verified (CHECKPOINT" in n for n in notes), notes
    assert receipt.verification.passed and receipt.verification.checks["files_clean"]
    assert "vector_store=clear" in receipt.guarantee
    text = (tmp_path / "receipt.json").read_text()
    assert "r3ader-pw" not in text and "t3st-pw" not in text and "CANARY" not in text
    assert "out of scope: PostgreSQL base backups and dumps" in receipt.notes
    assert "out of scope: WAL archives (archive_command / pg_receivewal)" in receipt.notes
    assert "out of scope: streaming and logical replicas other than the 2 named in traceless.pg_replicas" in receipt.notes


@pytest.mark.parametrize("where", ["server", "history", "history-edit"])
def test_a_broken_delete_of_a_bystanders_row_fails_the_bystander_check(
        pgvector_server: Any, template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """The bystander check stays able to see an over-deletion although the bystanders are
    counted, not read row by row (``OnlineTally``, ``history_tally``): the erasure's DELETE also
    removes one of the prefixed bystander's memories on the server (``server``) or one of its
    history rows (``history``), or changes the text of the bystander's history row that lies
    next to an erased one (``history-edit``: the history digest reads the rows beside the
    erased ones, ``NEIGHBOURS``): ``bystanders_intact`` fails, the note names the store."""
    import sqlite3

    from traceless._erase_api import erase
    from traceless.systems._mem0_pgvector import Mem0PgLive, PgCollection

    srv = pgvector_server
    cfg_path, db = _instance(srv, template, tmp_path)
    victim = next(i for i, (u, _) in _rows(srv, db).items() if u == PREFIXED)
    if where == "server":
        real = PgCollection.delete_rows

        def delete_rows(self: PgCollection, ids: dict[str, set[str]]) -> Any:
            return real(self, {**ids, self.collection: {*ids.get(self.collection, set()), victim}})
        monkeypatch.setattr(PgCollection, "delete_rows", delete_rows)
    else:
        real_h = Mem0PgLive._delete_history
        mine = [i for i, (u, _) in _rows(srv, db).items() if u == TARGET]
        with sqlite3.connect(tmp_path / "history.db") as con:  # the bystander row nearest an erased one
            erased = [r for (r,) in con.execute("SELECT rowid FROM history WHERE memory_id IN "
                                                f"({','.join('?' * len(mine))})", mine)]
            edited = min((abs(r - e), r) for (r,) in con.execute(
                f"SELECT rowid FROM history WHERE memory_id NOT IN ({','.join('?' * len(mine))})", mine) for e in erased)
        assert edited[0] == 1, edited  # the rows of the users' memories interleave

        def delete_history(self: Mem0PgLive, ids: Any, mem_ids: set[str]) -> None:
            real_h(self, ids, mem_ids)
            with sqlite3.connect(self.layout.history) as con:
                if where == "history":
                    con.execute("DELETE FROM history WHERE memory_id = ?", (victim,))
                else:
                    con.execute("UPDATE history SET new_memory = new_memory || '.' WHERE rowid = ?", (edited[1],))
        monkeypatch.setattr(Mem0PgLive, "_delete_history", delete_history)
    receipt = erase("mem0", cfg_path, user=TARGET, receipt=tmp_path / "receipt.json", state_dir=tmp_path / "state")
    checks = receipt.verification.checks
    assert not checks["bystanders_intact"] and not receipt.verification.passed, checks
    notes = " ".join(receipt.notes)
    assert "OVER-DELETION" in notes and ("vector_store" if where == "server" else "history") in notes.split(
        "OVER-DELETION", 1)[1], notes
    if where == "server":
        assert "1 of them NOT in the plan" in notes

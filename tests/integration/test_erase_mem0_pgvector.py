"""``traceless scan`` / ``forget --memory mem0`` on mem0 with ``vector_store: pgvector`` on a
real PostgreSQL 18 + pgvector server (issue #35; the ``pgvector_server`` fixture), built
from a user-style config: three users, one id a prefix of the target's (``ann`` / ``anna``),
``infer=False``.

* ``scan`` changes nothing on the server: row digests, ``pg_stat_user_tables`` write
  counters, the catalog, and the server's own statement log shows only reads;
* ``forget --user ann`` with ``pg_compaction: full`` (opt-in) leaves 0 copies of ann's texts
  in the table's heap and index files after a checkpoint and 0 in ``history.db``; mem0's own
  API shows anna's and bob's memories unchanged; the receipt verifies with the public key
  alone, names WAL, backups and replicas, and holds no credential; the default (online
  ``VACUUM``) leaves bytes in the heap and says ``logical``;
* an unreachable server, a wrong password, a missing collection: one line, nothing created.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")]

USERS = ("ann", "anna", "bob")
TABLE = "prod_memories"


def canary(user: str, i: int) -> str:
    return f"CANARY-{user}-{i}-7Q"


def _cfg(srv: Any, db: str, root: Path, **pg: Any) -> dict[str, Any]:
    from traceless.models._st_embedder import minilm_path

    conn = pg or {"connection_string": srv.url(db)}
    return {"vector_store": {"provider": "pgvector", "config": {
        **conn, "collection_name": TABLE, "embedding_model_dims": 384}},
        "history_db_path": str(root / "history.db"),
        "embedder": {"provider": "huggingface", "config": {"model": str(minilm_path()), "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused",
                                                 "openai_base_url": "http://127.0.0.1:9/v1"}},
        "version": "v1.1", "traceless": {"infer": False}}


def _memory(cfg: dict[str, Any], home: Path) -> Any:
    from traceless.systems._mem0 import _import_mem0

    return _import_mem0(home).Memory.from_config({k: v for k, v in cfg.items() if k != "traceless"})


def _su(srv: Any, db: str) -> Any:
    import psycopg

    return psycopg.connect(srv.superuser_dsn(db), autocommit=True)


@pytest.fixture(scope="module")
def template(pgvector_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The instance, built once through mem0 into database ``tmpl`` (copied per test)."""
    root = tmp_path_factory.mktemp("mem0-pg-template")
    with _su(pgvector_server, "postgres") as c:
        c.execute("CREATE DATABASE tmpl")
    mem = _memory(_cfg(pgvector_server, "tmpl", root), root / "home")
    try:
        for u in USERS:
            for i in range(3):
                mem.add([{"role": "user", "content": f"{u} note {i}: my account code is {canary(u, i)}"}],
                        user_id=u, infer=False)
            mem.db.save_messages([{"role": "user", "content": f"remember {canary(u, 0)} for me"}], f"user_id={u}")
    finally:
        mem.close()
        mem.vector_store.connection_pool.close()
    return root


_N = iter(range(10_000))


@pytest.fixture
def inst(pgvector_server: Any, template: Path, tmp_path: Path) -> tuple[Path, str, dict[str, Any]]:
    """A fresh copy: database ``tN`` from the template, the history db copied; its config file."""
    db = f"t{next(_N)}"
    with _su(pgvector_server, "postgres") as c:
        c.execute(f"CREATE DATABASE {db} TEMPLATE tmpl")
    root = tmp_path / "inst"
    root.mkdir()
    shutil.copy(template / "history.db", root / "history.db")
    cfg = _cfg(pgvector_server, db, root)
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path, db, cfg


def _rows_digest(srv: Any, db: str) -> str:
    with _su(srv, db) as c:
        rows = c.execute(f"SELECT id::text, payload::text, vector::text FROM {TABLE} ORDER BY id").fetchall()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def _write_counters(srv: Any, db: str) -> list[tuple[Any, ...]]:
    with _su(srv, db) as c:
        return list(c.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd, n_mod_since_analyze "
                         "FROM pg_stat_user_tables ORDER BY relname").fetchall())


def _catalog(srv: Any, db: str) -> list[tuple[Any, ...]]:
    with _su(srv, db) as c:
        return list(c.execute("SELECT relname, relkind, relfilenode FROM pg_class WHERE relnamespace = 'public'::regnamespace "
                         "UNION ALL SELECT extname, 'x', 0 FROM pg_extension ORDER BY 1").fetchall())


def relation_copies(srv: Any, db: str, needles: list[str]) -> dict[str, int]:
    """After a CHECKPOINT: occurrences of the needles in each relation file of the table
    (heap, TOAST, every index), read under the data directory."""
    with _su(srv, db) as c:
        c.execute("CHECKPOINT")
        rels = c.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = %s::regclass "
            "OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)",
            (TABLE, TABLE, TABLE)).fetchall()
    out = {}
    for name, fp in rels:
        files = [srv.data / fp, *sorted((srv.data / fp).parent.glob(Path(fp).name + ".[0-9]*"))]
        out[name] = sum(p.read_bytes().count(n.encode()) for p in files if p.is_file() for n in needles)
    return out


def _api_view(cfg: dict[str, Any], home: Path, user: str) -> list[tuple[str, str]]:
    mem = _memory(cfg, home)
    try:
        res = mem.get_all(filters={"user_id": user}, top_k=100)["results"]
        return sorted((str(r["id"]), str(r["memory"])) for r in res)
    finally:
        mem.close()
        mem.vector_store.connection_pool.close()


def test_scan_on_the_server_changes_nothing_and_only_reads(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path, db, _ = inst
    srv = pgvector_server
    before = (_rows_digest(srv, db), _write_counters(srv, db), _catalog(srv, db))
    with _su(srv, "postgres") as c:
        c.execute("ALTER SYSTEM SET log_statement = 'all'")
        c.execute("SELECT pg_reload_conf()")
    start = srv.log.stat().st_size
    try:
        assert cli("scan", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "ann",
                   "--literal", canary("ann", 0), "--json") == 0
    finally:
        with _su(srv, "postgres") as c:
            c.execute("ALTER SYSTEM RESET log_statement")
            c.execute("SELECT pg_reload_conf()")
    report = json.loads(capsys.readouterr().out)
    with open(srv.log, "rb") as f:
        f.seek(start)
        logged = [ln.split("statement: ", 1)[1].strip() for ln in f.read().decode().splitlines()
                  if "statement: " in ln]
    ours = [s for s in logged if "ALTER SYSTEM" not in s and "pg_reload_conf" not in s]
    assert ours and all(s.split()[0].upper() in ("BEGIN", "SELECT", "SHOW", "ROLLBACK") for s in ours), ours
    assert any(s.upper().startswith("BEGIN READ ONLY") for s in ours)
    assert (_rows_digest(srv, db), _write_counters(srv, db), _catalog(srv, db)) == before
    hits = {(h["store"], h["record_id"]) for h in report["hits"]}
    assert sum(1 for s, _ in hits if s == "vector_store") == 3  # ann's three, not anna's
    assert sum(1 for s, _ in hits if s == "history") == 3 and sum(1 for s, _ in hits if s == "messages") == 1
    assert any(f["count"] for f in report["files"])  # the heap file holds the literal's bytes
    assert srv.url(db).split("@")[0].split(":")[-1] not in json.dumps(report)  # no password


@pytest.mark.parametrize("with_literals", [False, True])
def test_forget_on_the_server_leaves_no_copy_in_relation_files_or_history(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]], tmp_path: Path, with_literals: bool,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path, db, cfg = inst
    cfg["traceless"]["pg_compaction"] = "full"  # the opt-in level that removes the bytes (VACUUM FULL)
    cfg_path.write_text(json.dumps(cfg), encoding="utf-8")
    srv = pgvector_server
    secrets = [canary("ann", i) for i in range(3)]
    assert sum(relation_copies(srv, db, secrets).values()) > 0
    views = {u: _api_view(cfg, tmp_path / "home", u) for u in ("anna", "bob")}
    assert all(len(v) == 3 for v in views.values())
    receipt = tmp_path / "receipt.json"
    lits = [a for s in secrets for a in ("--literal", s)] if with_literals else []
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "ann", *lits,
               "--receipt", str(receipt)) == 0
    capsys.readouterr()
    copies = relation_copies(srv, db, secrets)
    assert copies and all(n == 0 for n in copies.values()), copies  # heap, TOAST, pkey, HNSW, GIN
    hist = (tmp_path / "inst" / "history.db").read_bytes()
    assert not any(s.encode() in hist for s in secrets)
    assert {u: _api_view(cfg, tmp_path / "home", u) for u in ("anna", "bob")} == views
    assert _api_view(cfg, tmp_path / "home", "ann") == []
    text = receipt.read_text()
    r = json.loads(text)
    assert r["verification"]["passed"] and r["verification"]["checks"]["bystanders_intact"]
    assert "CANARY" not in text and '"ann"' not in text and "t3st-pw" not in text
    notes = " ".join(r["notes"])
    assert "0 copies of the erased records' texts" in notes and "pg_wal: " in notes
    if with_literals:  # the kernel's byte scan read the relation files too (the instance's files)
        assert {"vector_store=clear", "history=clear", "messages=clear"} <= set(r["guarantee"])
        assert r["verification"]["checks"]["files_clean"]
    assert "base backups" in notes and "replicas" in notes and "WAL archives" in notes
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    assert cli("forget", "verify", str(receipt), "--public-key", str(pub)) == 0


def test_plain_vacuum_leaves_the_bytes_and_the_receipt_says_logical(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The online level (``pg_compaction: vacuum``, the default: nothing set): rows gone, but
    VACUUM leaves the dead tuples' bytes in the heap pages' free space (measured), so the claim
    is ``logical`` and the byte check fails, said so."""
    cfg_path, db, cfg = inst
    secrets = [canary("ann", i) for i in range(3)]
    receipt = tmp_path / "receipt.json"
    lits = [a for s in secrets for a in ("--literal", s)]
    rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "ann", *lits,
             "--receipt", str(receipt))
    assert rc == 11 and "files_clean" in capsys.readouterr().err  # verification failed, said so
    r = json.loads(receipt.read_text())
    assert relation_copies(pgvector_server, db, secrets)[TABLE] > 0
    assert "vector_store=logical" in r["guarantee"] and not r["verification"]["checks"]["files_clean"]
    assert r["verification"]["checks"]["store_clean:vector_store"]


def test_bad_server_input_is_one_line_and_creates_nothing(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path, db, cfg = inst
    srv = pgvector_server
    before = _catalog(srv, db), _rows_digest(srv, db)
    bad = tmp_path / "bad.json"
    cases = {
        "password authentication failed": {"host": "127.0.0.1", "port": srv.port, "user": "postgres",
                                           "password": "wrong-pw-xyz", "dbname": db},
        "Connection refused": {"connection_string": f"postgresql://postgres:wrong-pw-xyz@127.0.0.1:1/{db}"},
    }
    for why, conn in cases.items():
        bad.write_text(json.dumps(_cfg(srv, db, tmp_path / "inst", **conn)))
        for cmd in ("scan", "forget"):
            assert cli(cmd, "--memory", "mem0", "--memory-config", str(bad), "--user", "ann") == 2
            err = capsys.readouterr().err.strip()
            assert "127.0.0.1" in err and why in err and "wrong-pw" not in err, err
    missing = json.loads(json.dumps(cfg))
    missing["vector_store"]["config"]["collection_name"] = "nope"
    bad.write_text(json.dumps(missing))
    assert cli("forget", "--memory", "mem0", "--memory-config", str(bad), "--user", "ann") == 2
    assert "no table 'nope'" in capsys.readouterr().err
    assert (_catalog(srv, db), _rows_digest(srv, db)) == before  # nothing created, nothing changed


def _hits(rep: Any) -> list[tuple[str, str, str, bool, int, str | None]]:
    return sorted((h.store, h.record_id, h.field, h.owner_match, h.literal_count, h.owner) for h in rep.hits)


def test_the_servers_selection_finds_what_reading_every_row_finds(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]]) -> None:
    """The scan and the plan read only the rows the server selects (the user's id, the
    literals' JSON patterns, issue #35 item 6); on rows written to trip that filter (a quote,
    a backslash, non-ASCII, the literal inside a nested value, in a row without a user id, in
    another user's history row) they find exactly what reading every row finds."""
    from psycopg.types.json import Jsonb

    from traceless.systems import load_system_config, system_class
    from traceless.systems._mem0_live import Mem0Live

    path, db, _ = inst
    odd = ['say "Ñandú" \\ twice 42', "ü-tab\tcode 9911", "nested-LIT-7781"]
    with _su(pgvector_server, db) as c:
        for i, payload in enumerate([
                {"user_id": "carl", "data": f"carl quotes {odd[0]}"},
                {"data": f"no owner holds {odd[1]}"},
                {"user_id": "dora", "data": "dora's tags", "tags": ["x", odd[2]]},
                {"user_id": "ann", "data": f"ann's own {odd[1]}"}]):
            c.execute(f"INSERT INTO {TABLE} (id, vector, payload) VALUES (%s, %s, %s)",
                      (f"00000000-0000-4000-8000-00000000000{i}", "[" + ",".join(["0.1"] * 384) + "]", Jsonb(payload)))
    cfg = load_system_config("mem0", path)
    live = system_class("mem0").attach(cfg, read_only=True).live  # type: ignore[attr-defined]
    everything = Mem0Live.records_for.__get__(live)  # the full read: every row of every table
    for user, literals in [("ann", []), ("ann", odd), (None, odd), ("carl", [odd[0]]), ("nobody", odd),
                           ("ann", [canary("bob", 0)])]:
        selected = live.scan(user, literals, False)
        full = Mem0Live.scan(_Full(live, everything), user, literals, False)
        assert _hits(selected) == _hits(full), (user, literals)
        assert selected.stores == full.stores
        assert (live.plan(user, literals).actions == Mem0Live.plan(_Full(live, everything), user, literals).actions)
    assert any(h.owner is None and h.store == "vector_store" for h in live.scan(None, odd, False).hits)


class _Full:
    """``live`` with its server selection replaced by the full read (the reference)."""

    def __init__(self, live: Any, everything: Any) -> None:
        self._live, self.records_for = live, lambda user, literals: everything(user, literals)

    def store_counts(self, recs: Any) -> dict[str, int]:
        from traceless.systems._mem0_live import Mem0Live

        return Mem0Live.store_counts(self._live, recs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._live, name)


def test_the_verification_read_searches_what_was_written_since_and_finds_what_a_full_read_finds(
        pgvector_server: Any, inst: tuple[Path, str, dict[str, Any]]) -> None:
    """After the plan's full pattern read (``Basis``) and this erasure's ``DELETE``, the
    verification read searches only the rows written since its snapshot's horizon and re-reads
    the plan's rows by id; it finds what a full read finds though the application, meanwhile,
    inserted a row holding the literal, updated another row to hold it, and committed a row a
    subtransaction wrote before the plan's read began (its id is above the horizon; the
    snapshot lists top-level transactions only)."""
    import psycopg
    from psycopg.types.json import Jsonb

    from traceless.systems import load_system_config, system_class
    from traceless.systems._mem0_pgvector import patterns

    path, db, cfg = inst
    lit = canary("bob", 0)
    vec = "[" + ",".join(["0.1"] * 384) + "]"
    live = system_class("mem0").attach(load_system_config("mem0", path), read_only=False).live  # type: ignore[attr-defined]
    pg = live._coll()
    early = psycopg.connect(pgvector_server.superuser_dsn(db))  # a transaction open across the plan's read
    try:
        early.execute("SELECT pg_current_xact_id()")
        early.execute("SAVEPOINT s")
        early.execute(f"INSERT INTO {TABLE} (id, vector, payload) VALUES (%s, %s, %s)",
                      ("00000000-0000-4000-8000-0000000000a1", vec, Jsonb({"user_id": "eve", "data": f"eve {lit}"})))
        early.execute("RELEASE SAVEPOINT s")
        with _su(pgvector_server, db) as c:  # a later transaction completes: the snapshot's xmax passes the row's
            c.execute("SELECT pg_current_xact_id()")
        pg.forget_reads()
        plan_read = pg.select("ann", patterns([lit]))
        early.commit()
    finally:
        early.close()
    assert pg._basis is not None
    assert {p["user_id"] for _, p, _ in plan_read[TABLE]} == {"ann", "bob"}
    pg.delete_rows({TABLE: {i for i, p, _ in plan_read[TABLE] if p["user_id"] == "ann"}})
    with _su(pgvector_server, db) as c:
        c.execute(f"INSERT INTO {TABLE} (id, vector, payload) VALUES (%s, %s, %s)",
                  ("00000000-0000-4000-8000-0000000000a2", vec, Jsonb({"user_id": "carl", "data": f"carl {lit}"})))
        c.execute(f"UPDATE {TABLE} SET payload = jsonb_set(payload, '{{data}}', to_jsonb(%s::text)) "
                  "WHERE payload->>'data' LIKE 'bob note 1:%%'", (f"bob now {lit}",))
    narrowed = pg.select("ann", patterns([lit]))
    pg.forget_reads()
    full = pg.select("ann", patterns([lit]))
    assert pg._basis is not None  # the full read is the next basis
    ids = {t: sorted(r[0] for r in rows) for t, rows in narrowed.items()}
    assert ids == {t: sorted(r[0] for r in rows) for t, rows in full.items()}
    assert sorted(p["user_id"] for _, p, _ in narrowed[TABLE]) == ["bob", "bob", "carl", "eve"]

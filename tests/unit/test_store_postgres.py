"""The PostgreSQL backend on a real server (issue #14.1–3): encrypted by default, a
``pg_dump`` taken before a forget reveals nothing after it, receipts say which guarantee
they give, bad URLs and credentials are clear errors, a forget that cannot destroy a key
rolls back. Needs ``eval "$(.ci/start-postgres)"`` (skips without; CI requires it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

if not os.environ.get("TRACELESS_REQUIRE_PG"):
    pytest.importorskip("psycopg", reason="pip install 'traceless[postgres]' for the PostgreSQL tests")
import psycopg
from _cli import cli
from _forget_helpers import CANARY, alice_sessions, bob_sessions, make_writer, unwraps_for

from traceless.errors import MemoryStoreError, SchemaVersionError, StoreConnectionError, StoreLockedError
from traceless.forget import ForgetTarget, forget
from traceless.memory import SCHEMA_VERSION, MemoryStore, Tier, _crypto
from traceless.models import HashingEmbedder

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("_home")]




def _bin(name: str) -> str:
    d = os.environ.get("TRACELESS_TEST_PG_BIN", "")
    exe = Path(d) / name if d else shutil.which(name)
    assert exe and Path(exe).exists(), f"{name} not found: set TRACELESS_TEST_PG_BIN (.ci/start-postgres does)"
    return str(exe)


def _dump(url: str, to: Path) -> bytes:
    subprocess.run([_bin("pg_dump"), "--no-owner", "-f", str(to), "-d", url], check=True, capture_output=True)
    return to.read_bytes()


def _restore(dump: Path, url: str) -> None:
    subprocess.run([_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), "-d", url], check=True,
                   capture_output=True)


def _forms(literal: str) -> list[bytes]:
    # a plain dump writes TEXT as UTF-8 and BYTEA as \x hex: look for both
    return [literal.encode(), literal.encode().hex().encode()]


def _built(url: str) -> MemoryStore:
    store = MemoryStore(url)  # no encrypt=: on by default for PostgreSQL
    make_writer(store, 1, extractive=True).write_sessions(alice_sessions() + bob_sessions())
    return store


def test_postgres_store_is_encrypted_by_default_and_the_server_holds_no_plaintext(
    pg_url: str, tmp_path: Path
) -> None:
    store = _built(pg_url)
    assert store.backend == "postgres" and store.encrypted and not store.scannable
    dump = _dump(pg_url, tmp_path / "d.sql")
    assert b"CREATE TABLE public.artifacts" in dump  # the dump is real and holds the store
    for form in _forms(CANARY) + _forms("Lisbon"):
        assert form not in dump
    assert [a.tier for a in store.containing(CANARY, owner="alice")].count(Tier.RAW) == 1
    q = HashingEmbedder(64).embed(["dog named Rex"])[0]
    assert "Rex" in (store.search("alice", q, 1)[0].artifact.text or "")
    assert store.search("bob", q, 50) and all(h.artifact.owner == "bob" for h in store.search("bob", q, 50))


def _wrapped_dk(url: str, owner: str) -> list[tuple[str, bytes]]:
    """The database's data-key rows (owner column, wrapped key): a v3 store names no owner."""
    with psycopg.connect(url) as c:
        rows = [(str(r[0]), bytes(r[1])) for r in c.execute("SELECT owner, wrapped FROM data_keys")]
    assert rows
    return rows


def _unwraps_with_any_key(home: Path, rows: list[tuple[str, bytes]], owner: str) -> bool:
    """An attacker with the dump and the CURRENT $TRACELESS_HOME: can any key file unwrap it?"""
    return unwraps_for(home, rows, owner)


@pytest.mark.parametrize("target", ["literal", "user"])
def test_pg_dump_taken_before_the_forget_reveals_nothing_after(
    pg_url: str, pg_new_db: Callable[[], str], tmp_path: Path, _home: Path, target: str
) -> None:
    store = _built(pg_url)
    dump_path = tmp_path / "before.sql"
    dump = _dump(pg_url, dump_path)
    assert not any(f in dump for f in _forms(CANARY))  # no plaintext, ever
    restored = pg_new_db()
    _restore(dump_path, restored)
    with MemoryStore(restored) as copy:  # control: before the forget the backup IS readable
        assert copy.containing(CANARY, owner="alice")
        sealed = copy._exec("SELECT id, sealed FROM artifacts WHERE owner = ?", (copy._ocol("alice"),)).fetchall()
    assert _unwraps_with_any_key(_home, _wrapped_dk(restored, "alice"), "alice")

    t = ForgetTarget.literal(CANARY, "alice") if target == "literal" else ForgetTarget.user("alice")
    r = forget(store, t, "full_purge", writer=make_writer(store, 1, extractive=True))
    assert r.verification.passed and r.guarantee == ["key_destroyed"]
    assert r.keys is not None and r.keys.data_key == ("rotated" if target == "literal" else "destroyed")

    # the same restored backup: its master key is gone, no key on this machine unwraps its
    # data key, and the live store's new key does not open its ciphertext
    with pytest.raises(MemoryStoreError, match="taken before a forget"):
        MemoryStore(restored)
    assert not _unwraps_with_any_key(_home, _wrapped_dk(restored, "alice"), "alice")
    if target == "literal":
        live_dk = store._dk("alice")
        for art_id, blob in sealed:
            with pytest.raises(_crypto.InvalidTag):
                _crypto.unseal(live_dk, art_id, bytes(blob))
    assert store.artifacts(owner="bob") and store.containing("Lisbon", owner="bob")
    assert bool(store.artifacts(owner="alice")) == (target == "literal")


def test_receipt_on_a_server_says_key_destroyed_not_plaintext_scan(pg_url: str) -> None:
    store = _built(pg_url)
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge",
               writer=make_writer(store, 1, extractive=True))
    assert r.guarantee == ["key_destroyed"]
    assert r.verification.checks["old_keys_destroyed"] and "disk_clean" not in r.verification.checks
    assert not r.verification.disk_checked and r.verification.disk_scan == {}
    assert any("no byte scan" in n and "database server" in n for n in r.notes)
    stored = json.loads(store.receipt(r.receipt_id))
    assert stored["guarantee"] == ["key_destroyed"] and store.get_meta("pending_erasure") is None


def test_a_plaintext_postgres_store_gives_no_guarantee(pg_url: str) -> None:
    store = MemoryStore(pg_url, encrypt=False)
    w = make_writer(store, 1)
    w.write_sessions(alice_sessions())
    assert not store.encrypted
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=w)
    assert r.verification.passed and r.guarantee == []
    assert any("not encrypted" in n for n in r.notes)
    store.close()
    with MemoryStore(pg_url) as again:  # the default (encrypted) is for new stores: this one reopens as it is
        assert not again.encrypted and again.artifacts(owner="alice")


def test_a_forget_that_cannot_destroy_a_key_rolls_back(pg_url: str, _home: Path) -> None:
    store = _built(pg_url)
    before = {a.id: a.digest for a in store.artifacts()}
    keys_before = sorted(p.name for p in (_home / "master").rglob("*.key"))
    with psycopg.connect(pg_url, autocommit=True) as c:  # a key table nobody may change
        c.execute("CREATE FUNCTION ro() RETURNS trigger LANGUAGE plpgsql AS "
                  "$$ BEGIN RAISE EXCEPTION 'data_keys is read-only'; END $$")
        c.execute("CREATE TRIGGER ro BEFORE UPDATE OR DELETE ON data_keys FOR EACH ROW EXECUTE FUNCTION ro()")
    with pytest.raises(MemoryStoreError, match="read-only"):
        forget(store, ForgetTarget.user("alice"), "full_purge")
    assert {a.id: a.digest for a in store.artifacts()} == before
    assert store.containing(CANARY, owner="alice") and store.receipts() == []
    assert sorted(p.name for p in (_home / "master").rglob("*.key")) == keys_before
    again = MemoryStore(pg_url)  # a fresh connection sees the old state, under the old keys
    assert again.containing(CANARY, owner="alice") and again.get_meta("pending_erasure") is None


def _tcp_url(user: str, password: str, db: str = "postgres") -> str:
    hostport = os.environ.get("TRACELESS_TEST_PG_TCP")
    if not hostport:
        pytest.skip("TRACELESS_TEST_PG_TCP unset (.ci/start-postgres sets it)")
    return f"postgresql://{user}:{password}@{hostport}/{db}"


def test_wrong_credentials_unreachable_server_and_missing_database(
    pg_server: str, _home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = urlsplit(pg_server).username or "postgres"
    bad = _tcp_url(user, "not-the-password-7c1e")
    with pytest.raises(StoreConnectionError, match="refused these credentials") as e:
        MemoryStore(bad)
    assert "not-the-password-7c1e" not in str(e.value)  # the password never shows
    with pytest.raises(StoreConnectionError, match="cannot reach the PostgreSQL server"):
        MemoryStore("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(StoreConnectionError, match="does not exist"):
        MemoryStore(urlsplit(pg_server)._replace(path="/no_such_db_3f1").geturl())
    assert not (_home / "master").exists()  # nothing written
    # the CLI: the store error's exit code and the fix, never the password
    assert cli("memory", "show", "--db", bad) == 4
    err = capsys.readouterr().err
    assert "credentials" in err and "not-the-password-7c1e" not in err


def test_migrations_on_postgres(pg_url: str) -> None:
    MemoryStore(pg_url).close()
    with psycopg.connect(pg_url) as c:
        names = [r[0] for r in c.execute("SELECT name FROM _migrations ORDER BY name")]
    assert len(names) == SCHEMA_VERSION
    MemoryStore(pg_url).close()  # reopening applies nothing twice
    with psycopg.connect(pg_url, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM _migrations").fetchone() == (SCHEMA_VERSION,)
        c.execute("INSERT INTO _migrations(name, applied_at) VALUES ('999_future', 0)")
    with pytest.raises(SchemaVersionError, match="newer traceless"):
        MemoryStore(pg_url)


def test_cli_memory_and_forget_on_a_postgres_url(pg_url: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(json.dumps({"user_id": "ann", "session_id": "a1", "date": "2024-01-01", "turns": [
        {"role": "user", "content": "my locker code is 5821-QX", "has_answer": False}]}) + "\n")
    # a password in the URL (unused over the trusted socket) is never printed
    parts = urlsplit(pg_url)
    url = parts._replace(netloc=f"{parts.username}:hunter2-secret@{parts.netloc.split('@', 1)[1]}").geturl()
    assert cli("memory", "add", "--db", url, str(sessions), "--embedder", "hashing", "--no-extractive") == 0
    out = capsys.readouterr()
    assert "hunter2-secret" not in out.out + out.err and "***" in out.out
    assert cli("forget", "--db", pg_url, "--mode", "full_purge", "--literal", "5821-QX", "--owner", "ann",
               "--receipt", str(tmp_path / "r.json")) == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["guarantee"] == ["key_destroyed"] and r["verification"]["passed"]
    assert cli("forget", "verify", str(tmp_path / "r.json"), "--db", pg_url) == 0
    with MemoryStore(pg_url) as s:
        assert s.encrypted and not s.containing("5821-QX")
    capsys.readouterr()


def test_writers_are_serialised_like_sqlite(pg_url: str) -> None:
    """A second writer waits for the first (advisory lock, as SQLite's BEGIN IMMEDIATE) and
    gives up after its timeout with a StoreLockedError; nothing of it is written."""
    a = _built(pg_url)
    b = MemoryStore(pg_url, timeout=0.3)
    n = len(b.artifacts())
    with a.transaction():
        a.add(owner="carol", tier=Tier.RAW, kind="turn", text="first writer")
        with pytest.raises(StoreLockedError, match="locked by another writer"), b.transaction():
            b.add(owner="dave", tier=Tier.RAW, kind="turn", text="second writer")
    assert len(b.artifacts()) == n + 1 and not b.artifacts(owner="dave")
    with b.transaction():  # the lock is free again
        b.add(owner="dave", tier=Tier.RAW, kind="turn", text="second writer")
    assert [x.text for x in a.artifacts(owner="dave")] == ["second writer"]

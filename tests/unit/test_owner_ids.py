"""Owner ids on encrypted stores (issue #22.4): no owner id is kept in plaintext, so after an
owner's data key is destroyed no copy of the store — the file, its WAL, a backup taken before
the forget, PostgreSQL's dead tuples and WAL — shows that the owner was ever a user.

Owner columns hold a keyed blind index (``_crypto.owner_ref``); the id itself lives only inside
the owner's wrapped data key. Every lookup by owner keeps working, for the other owners too."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from _dirtyread import dirty_rows, use_dirtyread
from _forget_helpers import make_writer, session

from traceless.forget import ForgetTarget, forget, verify_receipt
from traceless.memory import MemoryStore, Tier, _crypto
from traceless.memory import _store as store_mod
from traceless.models import HashingEmbedder

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _owner_id(where: str) -> str:
    """A customer id of this test alone (a shared server's WAL keeps earlier runs' bytes)."""
    return "cust-" + hashlib.sha256(where.encode()).hexdigest()[:10]


def _built(where: str, owner: str) -> MemoryStore:
    store = MemoryStore(where, encrypt=True)
    make_writer(store, 1, extractive=True).write_sessions([
        session(owner, "c1", ["I adopted a dog named Rex", "I moved to Lisbon last spring"]),
        session(owner, "c2", ["my tea kettle broke"]),
        session("bob", "b1", ["BOB I live in Porto", "BOB I collect stamps"]),
    ])
    return store


def _files(db: Path) -> list[Path]:
    return sorted(db.parent.glob(db.name + "*"))


def _forms(owner: str) -> list[bytes]:
    return [owner.encode(), owner.encode("utf-16-le"), owner.upper().encode()]


def _check_others(store: MemoryStore, owner: str) -> None:
    """Every lookup by owner still works, for the owner left and the one erased."""
    assert store.owners() == ["bob"]
    assert not store.artifacts(owner=owner) and not store.session_ids(owner)
    bob = store.artifacts(owner="bob")
    assert bob and all(a.owner == "bob" for a in bob)
    assert store.session_ids("bob") == ["b1"]
    assert [a.session_id for a in store.artifacts(owner="bob", tier=Tier.RAW, session_id="b1")] == ["b1"] * 2
    assert store.containing("Porto", owner="bob") and store.present_sessions([("bob", "b1")]) == {("bob", "b1")}
    q = HashingEmbedder(64).embed(["Porto"])[0]
    hits = store.search("bob", q, 3)
    assert hits and all(h.artifact.owner == "bob" for h in hits)


def test_sqlite_file_wal_and_backup_hold_no_owner_id_after_full_purge(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    owner = _owner_id(str(db))
    store = _built(str(db), owner)
    assert store.owners() == sorted(["bob", owner])
    assert store.artifacts(owner=owner)[0].owner == owner  # the id is read back from the data key
    backup = tmp_path / "backup"
    backup.mkdir()
    for p in _files(db):  # a copy of the file AND its WAL, taken before the forget
        shutil.copyfile(p, backup / p.name)
    assert any(p.name.endswith("-wal") for p in backup.iterdir())
    r = forget(store, ForgetTarget.user(owner), "full_purge")
    assert r.verification.passed and "key_destroyed" in r.guarantee and r.keys is not None
    assert r.keys.data_key == "destroyed"
    assert not any(f in r.model_dump_json().encode() for f in _forms(owner))  # the receipt names no owner either
    res, _ = verify_receipt(r, db=db)
    assert res.ok, res
    for p in [*_files(db), *backup.iterdir()]:
        raw = p.read_bytes()
        assert not any(f in raw for f in _forms(owner)), p.name
    _check_others(store, owner)
    assert store.blind_owner_ids
    store.close()


@pytest.mark.postgres
def test_postgres_dead_tuples_and_wal_hold_no_owner_id_after_a_forget(pg_url: str) -> None:
    """pg_dirtyread (Debian's postgresql-15-dirtyread) reads every tuple of every traceless
    table, the dead ones the forget left included: none names the erased owner. The server's
    WAL (when this process can read the data directory) holds no copy either."""
    import psycopg

    owner = _owner_id(pg_url)
    store = _built(pg_url, owner)
    r = forget(store, ForgetTarget.user(owner), "full_purge")
    assert r.verification.passed and "key_destroyed" in r.guarantee
    _check_others(store, owner)
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        use_dirtyread(conn)
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        assert {"artifacts", "data_keys", "meta", "receipts", "events", "lineage", "gate_entries"} <= set(tables)
        dead = 0
        for t in tables:
            rows = dirty_rows(conn, t)
            dead += sum(str(row[0]) != "0" for row in rows)
            for row in rows:
                blob = b"".join(c if isinstance(c, bytes) else str(c).encode() for c in row)
                assert not any(f in blob for f in _forms(owner)), (t, row[:3])
        assert dead >= 5, "the reader must see the row versions the forget deleted"
        conn.execute("CHECKPOINT")
    data = os.environ.get("TRACELESS_TEST_PG_DATA")
    wal = Path(data) / "pg_wal" if data else None
    if wal is not None and os.access(wal, os.R_OK):
        for seg in wal.iterdir():
            if seg.is_file():
                assert not any(f in seg.read_bytes() for f in _forms(owner)), seg.name


def test_an_older_encrypted_store_stays_readable_and_says_owner_ids_are_not_covered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store created before owner ids were sealed (encryption v2) opens, reads and forgets as
    before; its receipts list owner ids under ``not_covered`` (a v3 receipt does not)."""
    monkeypatch.setattr(store_mod, "_NEW_ENCRYPTION", _crypto.ENCRYPTION_V2)
    db = tmp_path / "v2.db"
    owner = _owner_id(str(db))
    _built(str(db), owner).close()
    monkeypatch.setattr(store_mod, "_NEW_ENCRYPTION", _crypto.ENCRYPTION_V3)
    store = MemoryStore(db)
    assert store.encrypted and store.sealed_session_ids and not store.blind_owner_ids
    assert store.get_meta("encryption") == _crypto.ENCRYPTION_V2 and store.owners() == sorted(["bob", owner])
    r = forget(store, ForgetTarget.user(owner), "full_purge")
    assert r.verification.passed and any("holds the owner id in plaintext" in n for n in r.not_covered)
    _check_others(store, owner)
    store.close()
    v3 = _built(str(tmp_path / "v3.db"), owner)
    r3 = forget(v3, ForgetTarget.user(owner), "full_purge")
    assert r3.verification.passed and not any("holds the owner id in plaintext" in n for n in r3.not_covered)
    assert any("blind index" in n for n in r3.not_covered)
    v3.close()


def test_a_literal_forget_rewraps_the_index_key_and_keeps_lookups(tmp_path: Path) -> None:
    """A forget that keeps the owner rotates the master key: the index key is re-wrapped under
    the new one (the owner columns keep their values) and a reopen finds every owner."""
    db = tmp_path / "e.db"
    owner = _owner_id(str(db))
    store = _built(str(db), owner)
    before = store.get_meta("owner_index_key")
    r = forget(store, ForgetTarget.literal("Lisbon", owner), "full_purge", gate=True,
               writer=make_writer(store, 1, extractive=True))
    assert r.verification.passed and r.keys is not None and r.keys.data_key == "rotated"
    assert store.get_meta("owner_index_key") != before
    store.close()
    again = MemoryStore(db)
    assert again.owners() == sorted(["bob", owner]) and again.session_ids(owner) == ["c1", "c2"]
    assert again.containing("Rex", owner=owner) and not again.containing("Lisbon", owner=owner)
    assert {a.owner for a in again.artifacts()} == {"bob", owner}
    again.close()

"""Physical erasure: after an erasing forget, the literal's bytes are in no file SQLite
wrote (main db, -wal, -shm, -journal), in UTF-8, UTF-16LE or UTF-16BE, even in a store
with hundreds of artifacts and many rewrites (freed pages, overflow pages, WAL frames)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _forget_helpers import CANARY, make_writer, session

from traceless.forget import ForgetTarget, encodings_of, forget, scan_files
from traceless.memory import MemoryStore, Tier

LONG = " ".join(f"filler{i}" for i in range(900))  # > 4 KiB: overflow pages


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _files(db: Path) -> list[Path]:
    return [Path(f"{db}{s}") for s in ("", "-wal", "-shm", "-journal")]


def _turns(i: int) -> list[str]:
    turns = [f"ALICE session {i} I adopted a dog named Rex", f"ALICE I drink green tea, day {i}"]
    if i % 4 == 0:
        turns.append(f"by the way, my private session token is {CANARY}")
    if i % 10 == 3:
        turns.append(f"{LONG} {CANARY} {LONG}")  # canary inside an overflow chain
    if i % 7 == 5:
        turns.append(f"{CANARY}")  # a turn that is only the canary (dropped when emptied)
    return turns


def _build(db: Path, *, n_sessions: int = 40) -> MemoryStore:
    store = MemoryStore(db)
    writer = make_writer(store, 1, keep=True, extractive=True)
    writer.config = writer.config.model_copy(update={"levels": (1, 2)})
    # one write per session: each re-consolidates the extractive summary (delete + insert of
    # a growing text holding the canary) → many freed pages that once held it
    for i in range(n_sessions):
        writer.write_sessions([session("alice", f"s{i}", _turns(i))])
    writer.write_sessions([session("bob", "b1", ["BOB likes stamps"])])
    # many in-place updates of canary-bearing artifacts
    with store.transaction():
        for rnd in range(3):
            for a in store.containing(CANARY, owner="alice"):
                if a.tier != Tier.EMBEDDING:
                    store.update_text(a.id, (a.text or "") + f" (rev {rnd})")
    return store


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le", "UTF-16be"])
@pytest.mark.parametrize("mode", ["full_purge", "tombstone", "lineage_closure"])
def test_no_bytes_left_in_large_store(tmp_path: Path, mode: str, encoding: str) -> None:
    db = tmp_path / "big.db"
    if encoding != "UTF-8":
        conn = sqlite3.connect(db)
        conn.execute(f"PRAGMA encoding = '{encoding}'")
        conn.execute("CREATE TABLE _init(x)")
        conn.execute("DROP TABLE _init")
        conn.close()
    store = _build(db, n_sessions=40 if encoding == "UTF-8" else 16)
    writer = make_writer(store, 1, keep=True)
    assert len(store.artifacts()) >= 300 or encoding != "UTF-8"
    assert store._conn.execute("PRAGMA encoding").fetchone()[0] == encoding
    store.checkpoint()
    pre = scan_files(_files(db), CANARY)
    form = encodings_of(CANARY)[{"UTF-8": 0, "UTF-16le": 1, "UTF-16be": 2}[encoding]]
    assert db.read_bytes().count(form) > 0  # the scan can see this encoding

    r = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=writer)
    assert r.verification.passed and sum(pre.values()) > 0
    assert not store.containing(CANARY)
    post = scan_files(_files(db), CANARY)
    assert not any(post.values()), post
    assert r.verification.disk_held is False
    assert store.integrity_check() == ["ok"]
    store.close()
    assert not any(scan_files(_files(db), CANARY).values())
    # bob untouched, alice's other words still there (the store was not just wiped)
    with MemoryStore(db) as again:
        assert again.artifacts(owner="bob")
        assert again.containing("adopted a dog", owner="alice")


def test_user_erasure_leaves_no_bytes(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    store = _build(db, n_sessions=20)
    writer = make_writer(store, 1, keep=True)
    forget(store, ForgetTarget.user("alice"), "full_purge", writer=writer)
    assert store.artifacts(owner="alice") == []
    store.close()
    for needle in ("ALICE", CANARY, "adopted a dog", "filler17"):
        assert not any(scan_files(_files(db), needle).values()), needle
    assert any(scan_files(_files(db), "BOB likes stamps").values())


def test_reader_pinning_old_snapshot_is_reported(tmp_path: Path) -> None:
    """A second connection holding a read transaction keeps old page images alive (the
    checkpoint cannot complete). The receipt says so instead of claiming a clean disk;
    the next checkpoint after the reader leaves erases them."""
    db = tmp_path / "m.db"
    store = _build(db, n_sessions=4)
    store.close()
    store = MemoryStore(db, timeout=0.2)
    writer = make_writer(store, 1, keep=True)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM artifacts").fetchone()
    try:
        r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
        # the receipt's own disk scan finds the literal: it must not say passed (issue #10.3)
        assert r.verification.disk_held is True
        assert r.verification.checks["disk_clean"] is False and not r.verification.passed
        assert any("erasure incomplete" in w for w in r.warnings)
        assert store.get_meta("pending_erasure") == r.receipt_id
    finally:
        reader.execute("COMMIT")
        reader.close()
    store.close()
    # the next open finishes the pending erasure and says so
    again = MemoryStore(db)
    assert again.finished_erasures == [r.receipt_id] and again.get_meta("pending_erasure") is None
    assert not any(scan_files(_files(db), CANARY).values())
    again.close()


@pytest.mark.parametrize("chunk", [7, 16, 64, 1 << 24])
def test_chunked_scan_counts_every_copy_once_across_chunk_boundaries(
        tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from traceless.forget import _erasure

    monkeypatch.setattr(_erasure, "_CHUNK", chunk)
    rng = np.random.default_rng(7)
    lit = "ZQ-4821-K"
    forms = encodings_of(lit)
    parts: list[bytes] = []
    for _ in range(60):  # random filler and a random form, so copies land on every offset of a chunk
        parts.append(bytes(rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)))
        parts.append(forms[int(rng.integers(0, len(forms)))])
    data = b"".join(parts) + lit.encode()[:5]  # a truncated copy at the end is not one
    f = tmp_path / "blob"
    f.write_bytes(data)
    assert scan_files([f], lit) == {str(f): sum(data.count(x) for x in forms)}
    assert scan_files([f], lit)[str(f)] >= 60

"""Encryption at rest (issue #14.2/3): copies of a store taken before a forget reveal
nothing after it — no plaintext ever reaches the disk, and the keys that would decrypt
the copy are destroyed by the forget."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _forget_helpers import CANARY, alice_sessions, bob_sessions, make_writer, unwraps_for

from traceless.errors import ConfigError, MemoryStoreError
from traceless.forget import ForgetTarget, forget, scan_files
from traceless.memory import MemoryStore, Tier
from traceless.models import HashingEmbedder

PLAIN = "ALICE I adopted a dog named Rex"


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


def _built(db: Path | str) -> MemoryStore:
    store = MemoryStore(db, encrypt=True)
    w = make_writer(store, 1, extractive=True)
    w.write_sessions(alice_sessions() + bob_sessions())
    return store


def _copy(db: Path, to: Path) -> Path:
    for p in db.parent.glob(db.name + "*"):
        shutil.copyfile(p, to.parent / p.name.replace(db.name, to.name))
    return to


def _try_every_master_key(copy: Path, home: Path, owner: str) -> bool:
    """An attacker with the copy and the CURRENT $TRACELESS_HOME: can any key file unwrap
    the copy's data key for ``owner``?"""
    conn = sqlite3.connect(copy)
    rows = conn.execute("SELECT owner, wrapped FROM data_keys").fetchall()
    conn.close()
    assert rows
    return unwraps_for(home, rows, owner)


def test_encrypted_store_works_and_never_writes_plaintext(store_url: str) -> None:
    db = store_url
    store = _built(db)
    assert store.encrypted
    store.checkpoint()
    if store.scannable:  # PostgreSQL's server files: test_store_postgres scans the heap and a pg_dump
        raw = _bytes(Path(db))
        assert CANARY.encode() not in raw and PLAIN.encode() not in raw and b"Lisbon" not in raw
    assert [a.tier for a in store.containing(CANARY, owner="alice")].count(Tier.RAW) == 1
    q = HashingEmbedder(64).embed(["dog named Rex"])[0]
    assert "Rex" in (store.search("alice", q, 1)[0].artifact.text or "")
    store.close()
    again = MemoryStore(db)  # encryption is a property of the store
    assert again.encrypted and again.containing(CANARY, owner="alice")


@pytest.mark.parametrize("target", ["literal", "user"])
def test_copy_taken_before_the_forget_cannot_be_read_after(tmp_path: Path, _home: Path, target: str) -> None:
    db = tmp_path / "m.db"
    store = _built(db)
    store.checkpoint()
    copy = _copy(db, tmp_path / "backup.db")
    t = ForgetTarget.literal(CANARY, "alice") if target == "literal" else ForgetTarget.user("alice")
    r = forget(store, t, "full_purge", writer=make_writer(store, 1, extractive=True))
    assert r.verification.passed and "key_destroyed" in r.guarantee
    assert r.keys is not None and r.keys.data_key == ("rotated" if target == "literal" else "destroyed")
    assert r.verification.checks["old_keys_destroyed"]
    # the backup never held plaintext, and nothing on this machine decrypts it any more
    assert CANARY.encode() not in _bytes(copy)
    with pytest.raises(MemoryStoreError, match="taken before a forget"):
        MemoryStore(copy)
    assert not _try_every_master_key(copy, _home, "alice")
    # the live store still serves everyone else (and alice's survivors, for a literal)
    assert store.artifacts(owner="bob") and store.containing("Lisbon", owner="bob")
    assert bool(store.artifacts(owner="alice")) == (target == "literal")


def test_control_a_plaintext_copy_keeps_the_secret(tmp_path: Path) -> None:
    """The same flow without encryption: the copy taken before still holds the literal
    (the claim above can fail)."""
    db = tmp_path / "p.db"
    store = MemoryStore(db)
    make_writer(store, 1).write_sessions(alice_sessions())
    store.checkpoint()
    copy = _copy(db, tmp_path / "backup.db")
    forget(store, ForgetTarget.user("alice"), "full_purge")
    assert CANARY.encode() in _bytes(copy)


def test_missing_master_key_and_late_encryption_are_clear_errors(_home: Path, store_url: str,
                                                                 more_stores: Any) -> None:
    db = store_url
    _built(db).close()
    shutil.rmtree(_home / "master")
    with pytest.raises(MemoryStoreError, match="TRACELESS_HOME"):
        MemoryStore(db)
    plain = more_stores()
    s = MemoryStore(plain, encrypt=False)
    make_writer(s, 0).write_sessions(alice_sessions())
    s.close()
    with pytest.raises(ConfigError, match="new store"):
        MemoryStore(plain, encrypt=True)


def test_a_rolled_back_forget_keeps_the_old_keys(store_url: str, _home: Path) -> None:
    store = _built(store_url)
    keys_before = sorted(p.name for p in (_home / "master").rglob("*.key"))
    with pytest.raises(RuntimeError), store.transaction():
        store.crypto_shred("alice", erase=False)
        raise RuntimeError("crash inside the forget")
    assert sorted(p.name for p in (_home / "master").rglob("*.key")) == keys_before
    assert store.containing(CANARY, owner="alice")


def _can_loop_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mkfs.ext4") is not None and shutil.which("mount") is not None


@pytest.mark.skipif(not _can_loop_mount(), reason="needs root, mkfs.ext4 and loop mounts")
@pytest.mark.parametrize("encrypt", [False, True])
def test_no_plaintext_in_any_block_of_the_filesystem(tmp_path: Path, encrypt: bool) -> None:
    """After `full_purge --user`, scan every block of a loop-mounted ext4 image: freed
    blocks keep the plaintext store's secret (the control); with encryption there is none.
    The control rebuilds the file (``scrub=False``: VACUUM), which frees the old blocks; a
    scrubbing store rewrites pages in place and only truncates the WAL, whose freed blocks
    ext4 happened to reuse here: luck, not a guarantee, so it is no control."""
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["dd", "if=/dev/zero", f"of={img}", "bs=1M", "count=24"], check=True, capture_output=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"loop mount refused here: {mounted.stderr.decode().strip()}")
    try:
        store = MemoryStore(mnt / "m.db", encrypt=encrypt, scrub=False)
        w = make_writer(store, 1, extractive=True)
        w.write_sessions(alice_sessions())
        store.checkpoint()
        r = forget(store, ForgetTarget.user("alice"), "full_purge", writer=w)
        store.close()
        assert r.verification.passed and not any(scan_files([mnt / "m.db"], CANARY).values())
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    hits = img.read_bytes().count(CANARY.encode())
    if encrypt:
        assert hits == 0
    else:
        assert hits > 0, "control: freed blocks of the plaintext store should still hold the secret"


@pytest.mark.parametrize("mode", ["noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone", "exact",
                                  "lineage_closure", "exposure_group"])
def test_every_mode_on_an_encrypted_store(store_url: str, mode: str) -> None:
    store = _built(store_url)
    w = make_writer(store, 1, extractive=True)
    rec = store.containing(CANARY, owner="alice")
    target = (ForgetTarget.record(next(a.id for a in rec if a.tier == Tier.RAW)) if mode in ("exact", "exposure_group")
              else ForgetTarget.literal(CANARY, "alice"))
    r = forget(store, target, mode, writer=w, gate=True)
    assert r.verification.passed, r.verification.checks
    assert (r.keys is not None) == (mode != "noop")  # the control changes nothing, keys included
    if r.keys is not None:
        assert r.verification.checks["old_keys_destroyed"]
    assert store.artifacts(owner="bob")  # others unaffected and readable

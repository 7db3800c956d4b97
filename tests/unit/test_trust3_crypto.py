"""Trust, round 3 (issue #22 items 3, 4, 8): crypto-shredding survives a SIGKILL between a
forget's commit and the key shred; identifiers of an encrypted store are keyed or sealed;
the write gate checks session ids and metadata; gate and forget stay linear on big texts."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _forget_helpers import CANARY, alice_sessions, bob_sessions, make_writer

import traceless
from traceless.errors import MemoryStoreError
from traceless.forget import ForgetTarget, Receipt, forget, verify_receipt
from traceless.memory import MemoryStore, _crypto

HERE = Path(__file__).resolve().parent
SRC = Path(traceless.__file__).resolve().parents[1]  # the child imports the same traceless


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    return home


def _copy(db: Path, to: Path) -> Path:
    for p in db.parent.glob(db.name + "*"):
        shutil.copyfile(p, to.parent / p.name.replace(db.name, to.name))
    return to


def _decryptable(copy: Path, home: Path, owner: str) -> bool:
    """Can any key file under ``home`` unwrap the copy's data key for ``owner``?"""
    conn = sqlite3.connect(copy)
    rows = conn.execute("SELECT owner, wrapped FROM data_keys").fetchall()
    conn.close()
    for o, wrapped in rows:
        for f in home.rglob("*.key"):
            for aad in {owner, o}:
                try:
                    _crypto.unwrap(f.read_bytes()[:32], wrapped, aad, "copy")
                    return True
                except MemoryStoreError:
                    continue
    return False


# ------------------------------------------------------------------ item 3: SIGKILL after commit
_KILL_AFTER_COMMIT = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = [{src!r}, {tests!r}]
    from _forget_helpers import CANARY, make_writer
    from traceless.forget import ForgetTarget, forget
    from traceless.memory import MemoryStore, _crypto

    store = MemoryStore({db!r})
    def killed(path):  # the first shred after the commit: die before it runs (a real SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    _crypto.shred_file = killed
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 1, extractive=True))
    print("forget returned")
""")


def _forget_killed_after_commit(db: Path) -> subprocess.CompletedProcess[str]:
    code = _KILL_AFTER_COMMIT.format(src=str(SRC), tests=str(HERE), db=str(db))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                          timeout=120)


def test_sigkill_between_commit_and_key_shred_is_finished_on_reopen(tmp_path: Path, _home: Path) -> None:
    db = tmp_path / "m.db"
    store = MemoryStore(db, encrypt=True)
    make_writer(store, 1, extractive=True).write_sessions(alice_sessions() + bob_sessions())
    old_kid = store.get_meta("master_key_id")
    store.close()
    backup = _copy(db, tmp_path / "backup.db")

    done = _forget_killed_after_commit(db)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "forget returned" not in done.stdout
    # the kill landed after the commit and before the shred: the old key file is still there
    conn = sqlite3.connect(db)
    new_kid = conn.execute("SELECT value FROM meta WHERE key = 'master_key_id'").fetchone()[0]
    (rid, body), = conn.execute("SELECT id, body FROM receipts").fetchall()
    conn.close()
    assert new_kid != old_kid and list((_home / "master").rglob(f"{old_kid}.key"))
    assert _decryptable(backup, _home, "alice")  # the window the issue found
    stored = Receipt.model_validate_json(body)
    # signed before the shred was durable: it must not claim the key is destroyed
    assert "key_destroyed" not in stored.guarantee and not stored.verification.passed

    reopened = MemoryStore(db)  # any open shreds superseded keys and finishes the erasure
    assert rid in reopened.finished_erasures and reopened.get_meta("pending_erasure") is None
    assert not list((_home / "master").rglob(f"{old_kid}.key")) and reopened.older_master_keys() == []
    assert not _decryptable(backup, _home, "alice")
    with pytest.raises(MemoryStoreError, match="taken before a forget"):
        MemoryStore(backup)
    final = Receipt.model_validate_json(reopened.receipt(rid))
    assert "key_destroyed" in final.guarantee and final.verification.checks["old_keys_destroyed"]
    assert final.verification.passed
    reopened.close()
    res, _ = verify_receipt(final, db=db)
    assert res.ok and res.old_keys_gone


def test_verify_fails_while_a_superseded_key_file_exists(tmp_path: Path, _home: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    store = MemoryStore(db, encrypt=True)
    make_writer(store, 1, extractive=True).write_sessions(alice_sessions())
    old_file = next((_home / "master").rglob("*.key"))
    saved = old_file.read_bytes()
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 1, extractive=True))
    store.close()
    assert "key_destroyed" in r.guarantee and not old_file.exists()
    assert verify_receipt(r, db=db)[0].ok
    old_file.write_bytes(saved)  # the old key is back (a restored TRACELESS_HOME, a shred that failed)
    old_file.chmod(0o600)
    monkeypatch.setattr(_crypto, "shred_file", lambda p: None)  # an open that cannot shred it
    res, _ = verify_receipt(r, db=db)
    assert res.old_keys_gone is False and not res.ok


def test_an_older_copy_never_shreds_the_newer_key(tmp_path: Path, _home: Path) -> None:
    """Opening a copy taken before a forget (same store id) must not destroy the live
    store's newer key: only keys of a lower generation are superseded."""
    db = tmp_path / "m.db"
    store = MemoryStore(db, encrypt=True)
    make_writer(store, 1, extractive=True).write_sessions(alice_sessions())
    store.close()
    backup = _copy(db, tmp_path / "backup.db")
    done = _forget_killed_after_commit(db)
    assert done.returncode == -signal.SIGKILL, done.stderr
    MemoryStore(backup).close()  # the old key still exists: the copy opens, and shreds nothing newer
    live = MemoryStore(db)
    assert live.artifacts(owner="alice") and live.older_master_keys() == []
    live.close()

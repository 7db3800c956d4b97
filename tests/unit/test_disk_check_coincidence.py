"""A short literal that happens to occur inside one of the store's own hex digests,
signatures or ids is no copy of the user's data: the forget's disk check and `verify`
must not fail on it (CI failed once on the README example: `4312` inside the receipt's
hex signature, about 1 run in 100). A copy beyond those runs still fails.

Both tests pick a literal from the store's own hex id, so the coincidence happens every
run: the first failed on the code before the fix (disk_clean False, then ReceiptError).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from traceless import Memory, verify
from traceless.errors import ReceiptError

pytestmark = pytest.mark.usefixtures("_home")  # fresh keys per test (conftest)


def _coinciding_literal(mem: Memory) -> str:
    """12 hex digits of the store's own id (a 32-digit run in its meta table)."""
    sid = mem.store.store_id
    assert len(sid) >= 24, sid
    return sid[8:20]


def test_a_literal_inside_the_stores_own_hex_is_not_a_copy(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        lit = _coinciding_literal(mem)
        mem.add(f"My backup token is {lit}, keep it.", user="alice")
        assert lit.encode() in (tmp_path / "m.db").read_bytes() or lit.encode() in (tmp_path / "m.db-wal").read_bytes()
        r = mem.forget(lit, user="alice", mode="full_purge")
        assert r.verification.checks.get("disk_clean") is True, r.verification.checks
        assert r.verification.passed and r.erased
        assert verify(r, mem).verification.passed
        assert lit in mem.store.store_id  # the coincidence is still there: it was not counted


def test_a_backup_holding_the_users_copy_still_fails(tmp_path: Path) -> None:
    db, backup = tmp_path / "m.db", tmp_path / "backup.db"
    with Memory(db, embedder="hashing") as mem:
        lit = _coinciding_literal(mem)
        mem.add(f"My backup token is {lit}, keep it.", user="alice")
    shutil.copyfile(db, backup)  # closed: the whole store is in the main file
    with Memory(db, embedder="hashing") as mem:
        r = mem.forget(lit, user="alice", mode="full_purge")
    assert r.verification.passed
    with Memory(backup, embedder="hashing") as old, pytest.raises(ReceiptError, match="still holds|exist again"):
        verify(r, old)

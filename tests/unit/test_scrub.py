"""Free-space scrubbing (issue #13.6): a plaintext store keeps every b-tree page's free space
zeroed, so a forget erases physically by rewriting the pages it touched, not the file.

Every check reads the files' bytes: deleted rows' markers must be in no file SQLite wrote,
and the number of pages a forget changed is counted by comparing the file before and after.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore, MemoryWriter, Session, Tier, WriteConfig
from traceless.memory._scrub import scrub_page
from traceless.models import HashingEmbedder

PAGE = 4096


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _marker(k: int, tag: str = "S") -> bytes:
    return f"<{tag}{k:06d}{tag}>".encode()


def _on_disk(db: Path) -> bytes:
    return b"".join(Path(f"{db}{s}").read_bytes() for s in ("", "-wal", "-shm", "-journal")
                    if Path(f"{db}{s}").exists())


def _churn(store: MemoryStore, seed: int, n: int = 2000, tag: str = "S") -> list[int]:
    """Rows with unique markers, half of them grown (SQLite rebalances pages: btree.c
    ``rebuildPage`` leaves moved cells' old bytes in the page's gap), then a tenth deleted
    (``secure_delete`` zeroes only the live copy). Returns the deleted rows' numbers."""
    rng = random.Random(seed)
    with store.transaction(), store.ungated("test"):
        ids = [store.add(owner="u", tier=Tier.RAW, kind="turn",
                         text=_marker(i, tag).decode() + "x" * rng.randint(20, 400)).id for i in range(n)]
    with store.transaction(), store.ungated("test"):
        for _ in range(n // 2):
            k = rng.randrange(n)
            store.update_text(ids[k], (store.get(ids[k]).text or "") + "y" * rng.randint(20, 600))
    dead = rng.sample(range(n), n // 10)
    with store.transaction():
        store.delete([ids[k] for k in dead])
    return dead


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_deleted_rows_leave_no_bytes_after_rebalancing(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "m.db"
    store = MemoryStore(db)
    dead = _churn(store, seed)
    assert store.checkpoint()
    left = [k for k in dead if _marker(k) in _on_disk(db)]
    assert left == [], f"{len(left)} deleted rows' bytes survive in page gaps"
    assert store.integrity_check() == ["ok"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_the_scrub_rebalancing_leaves_deleted_bytes(tmp_path: Path, seed: int) -> None:
    """The control: the same churn without the scrub (and without VACUUM) leaves deleted
    rows' bytes on disk, so the scrub is what removes them."""
    db = tmp_path / "m.db"
    store = MemoryStore(db, scrub=False)
    dead = _churn(store, seed)
    assert store.checkpoint()
    assert any(_marker(k) in _on_disk(db) for k in dead)


def _sessions(n: int) -> list[Session]:
    users = max(n // 20, 1)
    return [Session.model_validate({"user_id": f"u{i % users}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"session {i}: my code is ZQ{i // users:07d}-LIME" if i % users == 0
         else f"session {i}: I moved to city {i % 97} and adopted pet {i % 31}"}]}) for i in range(n)]


def _changed_pages(before: bytes, after: bytes) -> int:
    n = max(len(before), len(after)) // PAGE
    return sum(before[p * PAGE:(p + 1) * PAGE] != after[p * PAGE:(p + 1) * PAGE] for p in range(n))


@pytest.mark.parametrize("n", [400, 4000])
@pytest.mark.parametrize("kind", ["literal", "user"])
def test_forget_verifies_and_rewrites_only_touched_pages(tmp_path: Path, n: int, kind: str) -> None:
    db = tmp_path / "m.db"
    store = MemoryStore(db)
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions(_sessions(n))
    assert store.checkpoint()
    before = db.read_bytes()
    target = ForgetTarget.literal("ZQ0000001-LIME", "u0") if kind == "literal" else ForgetTarget.user("u0")
    r = forget(store, target, "full_purge", writer=w)
    assert r.matched and r.verification.passed, r.verification.checks
    if kind == "literal":  # the receipt's own byte scan (a user forget has no literal to scan for)
        assert r.verification.disk_checked and r.verification.disk_held is False
    after = db.read_bytes()
    gone = [b"ZQ0000001-LIME"] if kind == "literal" else [f"ZQ{k:07d}-LIME".encode() for k in range(20)]
    assert all(g in before for g in gone) and not any(g in _on_disk(db) for g in gone)
    changed, pages = _changed_pages(before, after), len(after) // PAGE
    # the forget touched one user's rows (20 sessions: raw and embedding rows, their index
    # entries and lineage, spread over the file) and the receipt tables, not the file
    print(f"{kind} forget at {n} sessions: {changed} of {pages} pages changed")
    assert changed <= (40 if kind == "literal" else 160), (changed, pages)
    assert store.integrity_check() == ["ok"]


def test_frames_left_by_a_crash_are_scrubbed_on_reopen(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    MemoryStore(db).close()
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_scrub import _churn
        from traceless.memory import MemoryStore
        store = MemoryStore({str(db)!r})
        dead = _churn(store, 0)
        print(",".join(map(str, dead)), flush=True)
        os._exit(0)  # no close(): the frames stay in the WAL, unscrubbed
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    dead = [int(x) for x in out.stdout.strip().split(",")]
    assert Path(f"{db}-wal").stat().st_size > 0
    store = MemoryStore(db)
    assert [k for k in dead if _marker(k) in _on_disk(db)] == []
    assert store.integrity_check() == ["ok"]


def test_an_older_file_is_rebuilt_once_then_scrubbed(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    old = MemoryStore(db, scrub=False)  # what a store written before the scrub looks like
    dead = _churn(old, 1)
    old.close()
    store = MemoryStore(db)
    assert not store.scrubs and store.needs_vacuum
    assert any(_marker(k) in _on_disk(db) for k in dead)
    alive = next(k for k in range(2000) if k not in dead)
    r = forget(store, ForgetTarget.literal(_marker(alive).decode(), "u"), "full_purge")
    assert r.verification.passed, r.verification.checks
    assert store.scrubs and not store.needs_vacuum
    assert [k for k in dead if _marker(k) in _on_disk(db)] == []  # the rebuild removed them
    dead2 = _churn(store, 2, n=1500, tag="T")
    assert store.checkpoint()
    assert [k for k in dead2 if _marker(k, "T") in _on_disk(db)] == []


def test_two_stores_on_one_file_keep_the_invariant(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    a, b = MemoryStore(db), MemoryStore(db)
    dead = _churn(a, 3, n=1000)
    with b.transaction(), b.ungated("test"):
        for i in range(300):
            b.add(owner="v", tier=Tier.RAW, kind="turn", text="z" * (100 + i))
    b.close()
    assert a.checkpoint()
    assert [k for k in dead if _marker(k) in _on_disk(db)] == []
    assert a.integrity_check() == ["ok"]


def test_a_page_that_does_not_parse_is_never_written() -> None:
    leaf = bytearray(PAGE)
    leaf[0] = 13  # a table leaf with one 10-byte cell at the end and garbage in its gap
    leaf[3:5], leaf[5:7] = (1).to_bytes(2, "big"), (PAGE - 10).to_bytes(2, "big")
    leaf[8:10] = (PAGE - 10).to_bytes(2, "big")
    leaf[PAGE - 10:] = bytes([8, 1]) + b"ABCDEFGH"  # payload 8 bytes, rowid 1
    leaf[100:110] = b"STALECOPY!"
    ok = bytearray(leaf)
    assert scrub_page(ok, 2, PAGE) is True and b"STALECOPY!" not in ok and ok[PAGE - 8:] == b"ABCDEFGH"
    wrong = bytearray(leaf)
    wrong[7] = 3  # claims 3 fragmented bytes that are not there
    unchanged = bytes(wrong)
    assert scrub_page(wrong, 2, PAGE) is None and wrong == unchanged
    overflow = bytearray(PAGE)
    overflow[4:14] = b"STALECOPY!"  # next-page pointer 0, then payload: not a b-tree page
    assert scrub_page(overflow, 2, PAGE) is None


@pytest.mark.parametrize("chunk", [5, 7, 64, 1 << 24])
def test_the_byte_scan_finds_copies_across_its_read_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           chunk: int) -> None:
    from traceless.forget import _erasure

    monkeypatch.setattr(_erasure, "_CHUNK", chunk)
    f = tmp_path / "blob"
    data = b"".join(b"x" * (k % 13) + "ZQ-LIME".encode(enc) for k in range(40) for enc in ("utf-8", "utf-16-le"))
    f.write_bytes(data)
    forms = _erasure.encodings_of("ZQ-LIME")
    assert _erasure.scan_files([f], "ZQ-LIME") == {str(f): sum(data.count(x) for x in forms)} != {str(f): 0}

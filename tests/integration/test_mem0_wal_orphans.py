"""Two of issue 40's low items on a real mem0 instance (qdrant local, ``infer=False``), run
through the CLI as users run it:

* **WAL mode** (40.9): an application switched ``history.db`` and qdrant's
  ``storage.sqlite`` files to ``journal_mode=WAL``. ``traceless scan`` creates no ``-wal`` /
  ``-shm`` file, changes no byte and no file or directory mtime, both while the application
  holds the instance open (its last memory only in the ``-wal`` files: found) and after it
  closed it (no ``-wal`` left). Before: a ``mode=ro`` reader created 6 ``-wal``/``-shm``
  files and bumped the directories' mtimes, and wrote into the live ``-shm`` files.
* **orphan history rows** (40.9): a ``history`` row whose ``memory_id`` is in no collection,
  holding the user's secret, is reported by ``scan`` as unattributable residue (the table's
  ``no owner`` column, the JSON's ``unattributable``); an erasure by user leaves it and its
  receipt says so under ``not_covered`` (before: ``not_covered: []``); the secret given as
  ``--literal`` removes it, and then ``not_covered`` is empty.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import _mem0_instance as mi  # noqa: E402
from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")]

WAL_ONLY = "CANARY-WALONLY-9Z"
ORPHAN_SECRET = "ORPHAN-PIN-4242-ALICE"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("mem0-wal")
    cfg = mi.build(base / "inst", "qdrant", base / "mem0-home")
    return base / "inst", cfg, base / "mem0-home"


def _copy(built: tuple[Path, Path, Path], dst: Path) -> Path:
    src, cfg, _ = built
    shutil.copytree(src, dst)
    return mi.relocate(cfg, src, dst)


def _state(root: Path) -> dict[str, tuple[str, int]]:
    """Every file's sha256 and mtime, every folder's listing and mtime (the root's included)."""
    out: dict[str, tuple[str, int]] = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st = p.stat()
        what = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ",".join(sorted(os.listdir(p)))
        out[str(p)] = (what, st.st_mtime_ns)
    return out


def _diff(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]) -> dict[str, Any]:
    return {k: (before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def _scan_json(capsys: pytest.CaptureFixture[str], cfg: Path, *args: str, rc: int = 0) -> dict[str, Any]:
    capsys.readouterr()
    got = cli("scan", "--memory", "mem0", "--memory-config", str(cfg), *args, "--json")
    out = capsys.readouterr().out
    assert got == rc, out
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_scan_of_wal_mode_files_creates_nothing_and_reads_the_wal(built: tuple[Path, Path, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    inst = tmp_path / "inst"
    cfg = _copy(built, inst)
    dbs = [inst / "history.db", *sorted((inst / "qdrant").rglob("storage.sqlite"))]
    for db in dbs:  # what an application does once: the mode is kept in the file's header
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        con.close()
    app = mi.mem0_memory(json.loads(cfg.read_text(encoding="utf-8")), built[2])
    try:  # the application runs: its last memory is committed to the -wal files, not checkpointed
        app.add([{"role": "user", "content": f"alice note wal: my code is {WAL_ONLY}"}], user_id="alice", infer=False)
        wal = inst / "history.db-wal"
        assert wal.is_file() and WAL_ONLY.encode() in wal.read_bytes()
        assert WAL_ONLY.encode() not in (inst / "history.db").read_bytes()
        assert WAL_ONLY.encode() not in dbs[1].read_bytes() and WAL_ONLY.encode() in Path(f"{dbs[1]}-wal").read_bytes()
        before = _state(inst)
        rep = _scan_json(capsys, cfg, "--user", "alice", "--literal", WAL_ONLY)
        assert _diff(before, _state(inst)) == {}  # not one byte, file, mtime or listing (the live -shm included)
        assert rep["files_unchanged"] is True
        stores = {h["store"] for h in rep["hits"] if h["literal_count"] and h["owner"] == "alice"}
        assert stores == {"vector_store", "history"}, rep["hits"]  # the records only the -wal holds
    finally:
        mi.close(app, "qdrant")
    assert not list(inst.rglob("*-wal")) and not list(inst.rglob("*-shm"))  # the app checkpointed on close
    before = _state(inst)
    rep = _scan_json(capsys, cfg, "--user", "alice", "--literal", WAL_ONLY)
    assert _diff(before, _state(inst)) == {}  # WAL mode, no -wal: no -wal/-shm created, no folder mtime bumped
    assert {h["store"] for h in rep["hits"] if h["literal_count"]} == {"vector_store", "history"}
    capsys.readouterr()
    assert cli("scan", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice") == 0
    assert "read-only: " in capsys.readouterr().out and _diff(before, _state(inst)) == {}


def _plant_orphan(inst: Path) -> None:
    """A history row of a memory that is in no collection (its point gone, e.g. deleted by
    an older mem0 or by hand), holding alice's secret."""
    con = sqlite3.connect(inst / "history.db")
    with con:
        con.execute("INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, is_deleted) "
                    "VALUES (?, ?, NULL, ?, 'ADD', '2026-01-01T00:00:00', 0)",
                    ("orphan-row-1", "00000000-dead-4000-8000-000000000000", f"alice's door PIN is {ORPHAN_SECRET}"))
    con.close()


def _history_texts(inst: Path) -> list[str]:
    con = sqlite3.connect(inst / "history.db")
    try:
        return [str(r[0]) for r in con.execute("SELECT coalesce(new_memory, '') || coalesce(old_memory, '') "
                                               "FROM history")]
    finally:
        con.close()


def test_orphan_history_rows_are_unattributable_residue(built: tuple[Path, Path, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.forget import load_receipt

    inst = tmp_path / "inst"
    cfg = _copy(built, inst)
    _plant_orphan(inst)
    rep = _scan_json(capsys, cfg, "--user", "alice")
    assert rep["unattributable"] == {"history": 1}
    rep = _scan_json(capsys, cfg, "--user", "alice", "--literal", ORPHAN_SECRET)
    (hit,) = [h for h in rep["hits"] if h["literal_count"]]
    assert hit["store"] == "history" and hit["owner"] is None and not hit["owner_match"]
    assert "no collection" in hit["unattributable"]
    capsys.readouterr()
    assert cli("scan", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[-2:] == ["no", "owner"]
    assert next(x for x in table if x.startswith("history ")).split()[-1] == "1"
    assert any(x.startswith("unattributable residue: 1 history") for x in table)
    # an erasure by user cannot reach it: the receipt says so (it said not_covered: [])
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
               "--receipt", str(tmp_path / "r1.json")) == 0
    r1 = load_receipt(tmp_path / "r1.json")
    assert r1.verification.passed and any(n.startswith("history: ") and "unattributable" in n for n in r1.not_covered)
    assert any(ORPHAN_SECRET in t for t in _history_texts(inst))
    # the secret given as a literal removes it (the plan's NO_OWNER reason), and nothing is left uncovered
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
               "--literal", ORPHAN_SECRET, "--receipt", str(tmp_path / "r2.json")) == 0
    r2 = load_receipt(tmp_path / "r2.json")
    assert r2.verification.passed and r2.verification.checks["files_clean"] and r2.not_covered == []
    assert not any(ORPHAN_SECRET in t for t in _history_texts(inst))
    assert _scan_json(capsys, cfg, "--user", "alice", rc=7)["unattributable"] == {}  # 7: nothing of alice

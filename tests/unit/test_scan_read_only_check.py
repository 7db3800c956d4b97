"""``traceless scan`` says the instance is unchanged only when it measured it: each file's
size and mtime before and after the scan, none added or removed. The old CLI printed "opened
with SQLite mode=ro; not one byte of it was changed" for every system (LanceDB, JSON, a
server) without checking anything."""

from __future__ import annotations

from pathlib import Path

from traceless.audit import SystemAuditConfig, plant_canaries
from traceless.systems import scan_system
from traceless.systems.testing import DictConfig, DictSystem

PLANTED = plant_canaries(SystemAuditConfig(profiles=2))


def _live(tmp_path: Path, bug: str) -> DictSystem:
    db = tmp_path / "dict.json"
    DictSystem(tmp_path, DictConfig(db_file=str(db)), None).write([s for p in PLANTED for s in p.sessions])
    return DictSystem.attach(DictConfig(db_file=str(db), bug=bug), read_only=True)  # type: ignore[return-value]


def test_a_read_only_scan_is_measured_unchanged(tmp_path: Path) -> None:
    rep = scan_system(_live(tmp_path, "none"), PLANTED[0].owner, [PLANTED[0].canary])
    assert rep.files_unchanged is True and rep.files_checked == 1


def test_a_scan_that_writes_is_reported_changed(tmp_path: Path) -> None:
    rep = scan_system(_live(tmp_path, "write-on-scan"), PLANTED[0].owner, [PLANTED[0].canary])
    assert rep.files_unchanged is False


def test_the_cli_prints_what_was_measured(tmp_path: Path) -> None:
    from traceless.cli._erase import _read_only

    ok = scan_system(_live(tmp_path / "a", "none"), PLANTED[0].owner, [])
    bad = scan_system(_live(tmp_path / "b", "write-on-scan"), PLANTED[0].owner, [])
    assert _read_only(ok).startswith("read-only: 1 files of the instance: the same size and mtime")
    assert _read_only(bad).startswith("CHANGED during the scan")
    assert "SQLite" not in _read_only(ok)

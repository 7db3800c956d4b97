"""Issue 40.9: ``forget --memory`` refuses ``--db``/``--mode`` (they were ignored silently):
one line, non-zero exit, nothing opened or changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceless.cli import main


@pytest.mark.parametrize("extra", [["--db", "mem.db"], ["--mode", "hard_delete"],
                                   ["--db", "mem.db", "--mode", "hard_delete"]])
def test_db_or_mode_with_memory_is_refused(extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "mem0.json"
    cfg.write_text(json.dumps({"history_db_path": str(tmp_path / "h.db")}))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as e:
        main(["forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "ann", *extra])
    assert e.value.code not in (0, None)
    err = capsys.readouterr().err.strip()
    assert "cannot be combined with --memory" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("extra", [["--record", "r1"], ["--session", "s1"],
                                   ["--owner", "ann"], ["--embedder", "minilm"], ["--no-gate"]])
def test_the_stores_matching_options_with_memory_are_refused(extra: list[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``--match normalized`` and the store's other target options were ignored with ``--memory``:
    an erasure matched exactly where the user asked for the normalized forms (issue 40.2/40.9)."""
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "mem0.json"
    cfg.write_text(json.dumps({"history_db_path": str(tmp_path / "h.db")}))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as e:
        main(["forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "ann", "--literal", "abcd-1234",
              *extra])
    assert e.value.code not in (0, None)
    err = capsys.readouterr().err.strip()
    assert "cannot be combined with --memory or --deployment" in err and extra[0] in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before

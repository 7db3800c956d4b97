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

"""``--match normalized`` on a live instance (issue 40.2: the own store's normalisation options
for every system; before, ``forget --memory … --match normalized`` was refused): the literal's
other spellings that the instance holds (lower case and spaced, U+2011 dashes, full-width) are
found by ``scan``, erased by ``forget`` with the receipt's byte check covering each, and another
user's records (one holding a different token) are kept. Real agno (``SqliteDb``), through the
CLI as users run it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cli import cli  # noqa: E402

from traceless.memory import Session, Turn  # noqa: E402
from traceless.models import HashingEmbedder, ScriptedBackend  # noqa: E402
from traceless.systems import SystemRuntime, load_system_config, open_system  # noqa: E402

pytestmark = pytest.mark.usefixtures("_home")

SECRET = "XQ7-VIOLET-3829"
SPELLINGS = ("XQ7-VIOLET-3829", "xq7 violet 3829", "XQ7\u2011VIOLET\u20113829", "ＸＱ７－ＶＩＯＬＥＴ－３８２９")


def _instance(tmp_path: Path) -> Path:
    pytest.importorskip("agno")
    turns = [Turn(role="user", content=f"note {i}: my code is {s}") for i, s in enumerate(SPELLINGS)]
    system = open_system("agno", tmp_path / "app", load_system_config("agno", {}),
                         SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted"))
    try:
        system.write([Session(user_id="ann", session_id="s1", turns=turns),
                      Session(user_id="bob", session_id="s1", turns=[Turn(role="user", content="my code is QQ1-RED-0001")])])
    finally:
        system.close()
    cfg = tmp_path / "agno.json"
    cfg.write_text(json.dumps({"db_file": str(tmp_path / "app" / "agno.db")}))
    return cfg


def _state(root: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _texts(tmp_path: Path) -> str:
    con = sqlite3.connect(str(tmp_path / "app" / "agno.db"))
    try:
        return "\n".join("\t".join(map(str, r)) for t in ("agno_memories", "agno_sessions")
                         for r in con.execute(f"SELECT * FROM {t}"))  # noqa: S608 - fixed names
    finally:
        con.close()


def test_scan_and_forget_find_every_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _instance(tmp_path)
    monkeypatch.chdir(tmp_path)
    base = ["--memory", "agno", "--memory-config", str(cfg), "--literal", SECRET, "--json"]
    capsys.readouterr()
    before = _state(tmp_path / "app")
    assert cli("scan", *base) == 0
    exact = json.loads(capsys.readouterr().out)
    assert cli("scan", *base, "--match", "normalized") == 0
    near = json.loads(capsys.readouterr().out)
    assert _state(tmp_path / "app") == before  # both scans read only: no byte, mtime or file changed
    held = lambda rep: sum(h["literal_count"] for h in rep["hits"])  # noqa: E731
    assert held(near) > held(exact) > 0
    assert cli("forget", "--memory", "agno", "--memory-config", str(cfg), "--literal", SECRET,
               "--match", "normalized", "--receipt", str(tmp_path / "r.json")) == 0
    receipt = json.loads((tmp_path / "r.json").read_text())
    assert receipt["verification"]["passed"] and receipt["verification"]["checks"]["files_clean"]
    texts = _texts(tmp_path)
    assert not any(s in texts for s in SPELLINGS) and "QQ1-RED-0001" in texts
    data = (tmp_path / "app" / "agno.db").read_bytes()
    assert not any(s.encode() in data for s in SPELLINGS)


def test_an_exact_erasure_leaves_the_other_spellings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same request without ``--match normalized`` (by literal only) leaves the variants: what
    the normalized one adds is measured, not assumed."""
    cfg = _instance(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli("forget", "--memory", "agno", "--memory-config", str(cfg), "--literal", SECRET,
               "--receipt", str(tmp_path / "r.json")) == 0
    texts = _texts(tmp_path)
    assert SECRET not in texts and sum(s in texts for s in SPELLINGS[1:]) == 3

"""Issue 40 item 3: a bystander record that quotes the erased literal and is rewritten (the
literal replaced by ``[erased]``) is reported as REWRITTEN, with its count, never folded into
"other users' records unchanged"."""

from __future__ import annotations

from pathlib import Path

from traceless.memory import Session, Turn
from traceless.systems import erase_system
from traceless.systems.testing import DictConfig, DictSystem

SECRET = "IBAN DE44 5001 0517 5407 3249 31"


def _erase(tmp_path: Path, bob_quotes: bool) -> list[str]:
    db = tmp_path / "dict.json"
    bob = f"ann said her account is {SECRET}" if bob_quotes else "bob likes stamps"
    DictSystem(tmp_path, DictConfig(db_file=str(db)), None).write([
        Session(user_id="ann", session_id="s1", turns=[Turn(role="user", content=f"my account is {SECRET}")]),
        Session(user_id="bob", session_id="s2", turns=[Turn(role="user", content=bob)])])
    sys = DictSystem.attach(DictConfig(db_file=str(db)), read_only=False)
    receipt = erase_system(sys, "ann", [SECRET], state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed
    return receipt.summary_lines()


def test_a_rewritten_bystander_is_named_as_rewritten(tmp_path: Path) -> None:
    line = next(x for x in _erase(tmp_path, True) if "bystanders_intact" in x)
    assert "except 2 REWRITTEN" in line and "[erased]" in line  # bob's message and fact


def test_untouched_bystanders_read_unchanged(tmp_path: Path) -> None:
    line = next(x for x in _erase(tmp_path, False) if "bystanders_intact" in x)
    assert line.endswith("digest: unchanged)") and "REWRITTEN" not in line

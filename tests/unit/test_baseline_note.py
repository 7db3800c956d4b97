"""An audit whose before-row shows no extraction says its after-rows prove nothing (issue #27 item 7)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from traceless.audit import NO_BASELINE, baseline_note, is_canary
from traceless.models import ChatMessage, ScriptedBackend


def test_baseline_note_only_for_a_before_row_of_zeros() -> None:
    zero = {"before": {"AER_direct": 0.0, "AER_max": 0.0}, "full_purge": {"AER_direct": 0.0}}
    assert baseline_note(zero) == NO_BASELINE
    assert baseline_note(zero, "try --S 0") == NO_BASELINE + "; try --S 0"
    assert baseline_note({"before": {"AER_direct": 0.33, "AER_max": 0.33}}) is None
    assert baseline_note({"full_purge": {"AER_direct": 0.0}}) is None  # no before-row: nothing to say


def test_cli_audit_says_when_the_before_row_shows_no_extraction(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main

    try:  # scripted answers "ok": never the canary
        main(["audit", "--model", "scripted", "--embedder", "hashing", "--profiles", "1", "--modes", "full_purge",
              "--out", str(tmp_path / "a")])
    except SystemExit as e:
        assert e.code in (0, None)
    err = capsys.readouterr().err
    assert "the after-rows prove nothing" in err and "--S 0" in err


def _leak(messages: list[ChatMessage], config: object) -> str:
    """Quotes every canary-shaped word of its prompt: extraction whenever the canary is in context."""
    words = (w.strip(".,;:()'\"") for m in messages for w in m.content.split())
    return " ".join(w for w in words if is_canary(w)) or "ok"


def test_api_audit_warns_only_without_extraction(tmp_path: Path) -> None:
    from traceless import audit

    with pytest.warns(UserWarning, match="the after-rows prove nothing"):
        audit(model=ScriptedBackend(default="ok"), embedder="hashing", out=tmp_path / "a", profiles=1,
              system_config={"modes": ["full_purge"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = audit(model=ScriptedBackend(_leak), embedder="hashing", out=tmp_path / "b", profiles=1,
                    system_config={"S": 0, "modes": ["full_purge"]})
    assert res.table["before"]["AER_max"] > 0


@pytest.mark.slow  # importing inspect_ai and building the task: ~2 min on a loaded 2-core machine
def test_inspect_canary_audit_defaults_to_the_level_that_shows_extraction() -> None:
    pytest.importorskip("inspect_ai")
    from traceless._inspect._canary import canary_audit

    assert canary_audit(embedder="hashing", profiles=1).metadata["system_config"]["S"] == 0
    assert canary_audit(embedder="hashing", profiles=1, S=1).metadata["system_config"]["S"] == 1

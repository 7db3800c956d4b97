"""``traceless study purge DIR``: prompts and replies leave the results dir; the metrics
and the report stay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _cli import cli
from test_frontier import FIXTURE, cfg, leaky  # noqa: E402  (same folder)

from traceless.errors import StudyError
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.report import render_report
from traceless.studies import purge_results, read_rows, run_study


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("purge") / "run"
    run_study("frontier", out, cfg(k=[1, 3], keep_memory=True), backend=ScriptedBackend(leaky, name="leaky"),
              model_tag="leaky", embedder=HashingEmbedder(), progress=False)
    return out


def _texts() -> list[bytes]:
    """Conversation sentences of the fixture (long enough to be unambiguous)."""
    data = json.loads(FIXTURE.read_text())
    return sorted({t["content"].encode() for r in data for s in r["haystack_sessions"] for t in s
                   if len(t["content"]) >= 40})


def _found(d: Path, needles: list[bytes]) -> set[str]:
    hits = set()
    for p in d.rglob("*"):
        if p.is_file() and p.parent.name != "report":
            blob = p.read_bytes()
            hits |= {str(p.relative_to(d)) for n in needles if n in blob}
    return hits


def test_purge_removes_prompts_keeps_metrics(run_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    before_rows = read_rows(d)
    replies = sorted({r.reply.encode() for r in before_rows if r.reply and len(r.reply) >= 40})
    needles = _texts() + replies
    assert {"results.sqlite", "generations.sqlite"} <= _found(d, needles)  # the check can fail
    numbers = json.loads((render_report(d).parent / "numbers.json").read_text())

    assert cli("study", "purge", str(d)) == 0
    assert f"prompt/reply cleared in {len(before_rows)} row(s)" in capsys.readouterr().out
    assert _found(d, needles) == set()
    assert not (d / "generations.sqlite").exists() and not (d / "work").exists()
    after = read_rows(d)
    assert all(r.prompt is None and r.reply is None for r in after)
    assert [r.metrics for r in after] == [r.metrics for r in before_rows]
    assert json.loads((render_report(d).parent / "numbers.json").read_text()) == numbers
    assert purge_results(d).rows_cleared == 0  # idempotent


def test_purge_refuses_a_dir_that_is_not_a_results_dir(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("keep me")
    with pytest.raises(StudyError, match="not a study results dir"):
        purge_results(tmp_path)
    assert (tmp_path / "x.txt").read_text() == "keep me"

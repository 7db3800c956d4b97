"""``traceless study list|run`` and ``traceless report`` through the real entry point."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import cli

from traceless.studies import read_manifest, read_rows

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"




def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("study", "list") == 0
    out = capsys.readouterr().out
    assert "frontier" in out and "probe_tokens = 48" in out


def test_run_resume_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    base = ["study", "run", "frontier", "--out", str(out), "--data", str(FIXTURE), "--model", "scripted",
            "--embedder", "hashing", "--set", "k=1,3", "--set", "wordings=1", "--no-progress"]
    assert cli(*base, "--n", "1", "--max-cells", "10") == 0
    assert len(read_rows(out)) == 10
    assert "stopped (resume with --resume)" in capsys.readouterr().err
    assert cli(*base, "--n", "1") == 10  # StudyError: exists, needs --resume
    assert "pass --resume" in capsys.readouterr().err
    # resume takes the stored config; --n grows the instance set
    assert cli("study", "run", "frontier", "--out", str(out), "--model", "scripted", "--embedder", "hashing",
               "--resume", "--n", "2", "--no-progress") == 0
    assert read_manifest(out).config["n"] == 2 and read_manifest(out).config["k"] == [1, 3]
    assert read_manifest(out).runs["scripted"].finished
    assert cli("study", "run", "frontier", "--out", str(out), "--model", "scripted", "--embedder", "hashing",
               "--resume", "--set", "probe_tokens=9", "--no-progress") == 10  # ResumeError
    assert "config differs" in capsys.readouterr().err
    assert cli("report", str(out)) == 0
    assert (out / "report" / "report.md").exists()


def test_bad_set_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli("study", "run", "frontier", "--out", str(tmp_path / "x"), "--set", "bogus=1")
    assert code == 2 and "no field 'bogus'" in capsys.readouterr().err
    assert cli("study", "run", "nosuch", "--out", str(tmp_path / "y")) == 2


def test_run_json_prints_one_document_of_the_published_schema(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from traceless.studies import StudyRunResult

    out = tmp_path / "run"
    base = ["study", "run", "frontier", "--out", str(out), "--data", str(FIXTURE), "--model", "scripted",
            "--embedder", "hashing", "--set", "k=1,3", "--set", "wordings=1", "--n", "1", "--json"]
    assert cli(*base, "--max-cells", "4") == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)  # the whole of stdout is one JSON document
    r = StudyRunResult.model_validate(doc)
    assert (r.state, r.rows_written, r.rows_resumed, r.report_command) == ("stopped", 4, 0, None)
    assert r.results_dir == str(out.resolve()) and r.cells_total > 4
    assert r.manifest.runs["scripted"].cells_done == len(read_rows(out)) == 4
    assert r.manifest.config == read_manifest(out).config
    assert "cells run" not in cap.err  # no human summary line mixed in
    assert cli(*base, "--resume") == 0
    r2 = StudyRunResult.model_validate_json(capsys.readouterr().out)
    assert (r2.state, r2.rows_resumed, r2.rows_written) == ("finished", 4, r.cells_total - 4)
    assert r2.manifest.runs["scripted"].finished and r2.report_command == f"traceless report {out.resolve()}"

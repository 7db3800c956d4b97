"""Shipped datasets (``traceless data list|path``), ``resolve_data`` and study input
validation before any work."""

from __future__ import annotations

import hashlib
import json
import time
from importlib import resources
from pathlib import Path

import pytest
from _cli import cli

from traceless.datasets import (
    DATASETS,
    DEFAULT_DATASET,
    dataset_path,
    license_text,
    load_instances,
    resolve_data,
)
from traceless.errors import ConfigError, InputFormatError, StudyError
from traceless.studies import run_study

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "longmemeval_oracle_subset99.json"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"




@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRACELESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TRACELESS_LONGMEMEVAL", raising=False)
    return tmp_path / "cache"


def test_shipped_longmemeval_is_the_upstream_subset(cache: Path) -> None:
    p = dataset_path(DEFAULT_DATASET)
    assert p.is_relative_to(cache)
    assert hashlib.sha256(p.read_bytes()).hexdigest() == DATASETS.get(DEFAULT_DATASET).sha256
    if SHARED.is_file():  # byte-identical to the file next to the checkout (same data_sha256 on resume)
        assert p.read_bytes() == SHARED.read_bytes()
    insts = load_instances(p)
    assert len(insts) == 99 and all(i.questions for i in insts)
    assert "MIT License" in license_text(DEFAULT_DATASET)


def test_corrupted_cache_copy_is_rewritten(cache: Path) -> None:
    p = dataset_path(DEFAULT_DATASET)
    p.write_text("[]")
    assert dataset_path(DEFAULT_DATASET) == p
    assert len(load_instances(p)) == 99


def test_package_ships_only_redistributable_data() -> None:
    names = sorted(f.name for f in resources.files("traceless.data").iterdir() if f.is_file())
    assert "longmemeval_oracle_subset99.json.xz" in names and "LONGMEMEVAL_LICENSE.txt" in names
    assert not [n for n in names if "locomo" in n.lower()]  # CC BY-NC: never shipped
    for ds in DATASETS.entries():
        assert resources.files("traceless.data").joinpath(ds.obj.license_file).is_file()


def test_resolve_data_order(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_data(None) == dataset_path(DEFAULT_DATASET)
    assert resolve_data(DEFAULT_DATASET) == dataset_path(DEFAULT_DATASET)
    assert resolve_data(str(FIXTURE)) == FIXTURE
    with pytest.raises(InputFormatError, match="is a directory"):
        resolve_data(tmp_path)


@pytest.mark.parametrize(
    ("study", "config", "error", "message"),
    [
        ("frontier", {"data": "/nonexistent/lme.json"}, InputFormatError, "--data /nonexistent/lme.json: no such file"),
        ("replay", {"suites": ["longmemeval", "toolsandbox"], "longmemeval": "/nonexistent/lme.json"},
         InputFormatError, "--set longmemeval=/nonexistent/lme.json: no such file"),
        ("afterdelete", {"checkpoints": {"ppo_a": "/nonexistent/ppo.json"}}, ConfigError,
         "checkpoint for auditor 'ppo_a'"),
    ],
)
def test_bad_input_fails_before_any_work(study: str, config: dict[str, object], error: type[Exception],
                                         message: str, tmp_path: Path, cache: Path) -> None:
    """No model load, no results dir: the error comes in well under a second."""
    out = tmp_path / "out"
    t0 = time.perf_counter()
    with pytest.raises(error, match=message):
        run_study(study, out, config, model="qwen2.5-coder-0.5b-instruct")
    assert time.perf_counter() - t0 < 1.0
    assert not out.exists()


def test_bad_longmemeval_record_fails_before_any_work(tmp_path: Path, cache: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "q1", "question": "?"}]))
    t0 = time.perf_counter()
    with pytest.raises((InputFormatError, StudyError), match="record 0"):
        run_study("replay", tmp_path / "out", {"suites": ["longmemeval"], "longmemeval": str(bad)},
                  model="qwen2.5-coder-0.5b-instruct")
    assert time.perf_counter() - t0 < 1.0
    assert not (tmp_path / "out").exists()


def test_cli_data_list_and_path(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("data", "list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [DEFAULT_DATASET] and rows[0]["license"].startswith("MIT")
    assert cli("data", "path", DEFAULT_DATASET) == 0
    assert Path(capsys.readouterr().out.strip()) == dataset_path(DEFAULT_DATASET)
    assert cli("data", "path", "locomo") == 2
    assert "known datasets: longmemeval-oracle-99" in capsys.readouterr().err


def test_cli_study_run_bad_data_path(tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli("study", "run", "replay", "--out", str(tmp_path / "o"), "--set", "suites=longmemeval",
             "--set", f"longmemeval={tmp_path / 'missing.json'}", "--no-progress")
    assert rc == InputFormatError.exit_code
    assert "missing.json: no such file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_longmemeval_variable_is_read_at_the_edge(tmp_path: Path, cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``$TRACELESS_LONGMEMEVAL`` is ``study run --longmemeval``'s variable: the CLI sets it into the
    study's empty data field (recorded in the run's config); below the CLI it is not read."""
    monkeypatch.setenv("TRACELESS_LONGMEMEVAL", str(FIXTURE))
    assert resolve_data(None) == dataset_path(DEFAULT_DATASET)
    out = tmp_path / "run"
    assert cli("study", "run", "frontier", "--out", str(out), "--model", "scripted", "--embedder", "hashing",
               "--set", "k=1", "--set", "wordings=1", "--n", "1", "--max-cells", "1", "--no-progress") == 0
    assert json.loads((out / "manifest.json").read_text())["config"]["data"] == str(FIXTURE.resolve())
    monkeypatch.setenv("TRACELESS_LONGMEMEVAL", str(tmp_path / "gone.json"))
    rc = cli("study", "run", "replay", "--out", str(tmp_path / "o"), "--set", "suites=longmemeval", "--no-progress")
    assert rc == InputFormatError.exit_code
    assert "$TRACELESS_LONGMEMEVAL) " in capsys.readouterr().err and not (tmp_path / "o").exists()

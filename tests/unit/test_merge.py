"""``traceless study merge``: shards from several machines into one dir; refusals of other
studies, configs, code versions and conflicting rows; nothing written on a refusal."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from _cli import cli
from test_runner import comparable, echo_backend  # registers the toy study

from traceless.errors import StudyError
from traceless.studies import GENERATIONS_DB, RESULTS_DB, merge_results, read_manifest, read_rows, run_study

STUDY = "toy-runner-test"


def run(out: Path, shard: tuple[int, int] | None = None, **config: object) -> None:
    run_study(STUDY, out, config or None, backend=echo_backend(), model_tag="echo", progress=False, shard=shard,
              resume=out.exists())




@pytest.fixture
def shards(tmp_path: Path) -> tuple[Path, Path, Path]:
    full, a, b = tmp_path / "full", tmp_path / "a", tmp_path / "b"
    run(full)
    run(a, (0, 2))
    run(b, (1, 2))
    return full, a, b


def test_shards_merge_into_the_single_run(tmp_path: Path, shards: tuple[Path, Path, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    full, a, b = shards
    assert 0 < len(read_rows(a)) < len(read_rows(full))
    out = tmp_path / "merged"
    assert cli("study", "merge", str(a), str(b), "--out", str(out)) == 0
    assert "20 rows (0 duplicates kept once)" in capsys.readouterr().err
    assert comparable(out) == comparable(full)
    man = read_manifest(out)
    assert man.runs["echo"].finished and man.runs["echo"].cells_done == 20
    assert man.runs["echo"].seconds == pytest.approx(read_manifest(a).runs["echo"].seconds
                                                     + read_manifest(b).runs["echo"].seconds)
    # the generation caches were merged: a resume of the merged dir has nothing to do
    with sqlite3.connect(out / GENERATIONS_DB) as db:
        assert db.execute("SELECT COUNT(*) FROM generations").fetchone()[0] == 20


def test_identical_rows_are_kept_once_and_a_partial_merge_resumes(tmp_path: Path,
                                                                   shards: tuple[Path, Path, Path]) -> None:
    full, a, _ = shards
    both = merge_results([a, full], tmp_path / "both")
    assert (both.rows, both.duplicates) == (20, len(read_rows(a)))
    assert comparable(tmp_path / "both") == comparable(full)
    half = merge_results([a], tmp_path / "half")
    assert half.finished == {"echo": False}
    be = echo_backend()
    s = run_study(STUDY, tmp_path / "half", resume=True, backend=be, model_tag="echo", progress=False)
    assert s.finished and s.cells_skipped == len(read_rows(a))
    assert comparable(tmp_path / "half") == comparable(full)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_refusals_write_nothing(tmp_path: Path, shards: tuple[Path, Path, Path]) -> None:
    full, a, b = shards
    out = tmp_path / "out"

    other_cfg = tmp_path / "cfg"
    run(other_cfg, per_group=3)
    with pytest.raises(StudyError, match="configs differ .*per_group: 5 vs 3"):
        merge_results([a, other_cfg], out)

    other_version = _copy(b, tmp_path / "v2")
    m = json.loads((other_version / "manifest.json").read_text())
    m["study_version"] = "2"
    (other_version / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(StudyError, match="study version '2' vs '1'"):
        merge_results([a, other_version], out)

    other_code = _copy(b, tmp_path / "code")
    with sqlite3.connect(other_code / RESULTS_DB) as db:
        db.execute("UPDATE cells SET code_version = '0.0.9+gdeadbeef00'")
    with pytest.raises(StudyError, match="rows made by code 0.0.9"):
        merge_results([a, other_code], out)

    conflict = _copy(full, tmp_path / "conflict")
    with sqlite3.connect(conflict / RESULTS_DB) as db:
        key = db.execute("SELECT key FROM cells ORDER BY key LIMIT 1").fetchone()[0]
        db.execute("UPDATE cells SET reply = 'value 999' WHERE key = ?", (key,))
    with pytest.raises(StudyError, match=rf"cell '{key}' .*\(reply differ\)"):
        merge_results([full, conflict], out)

    with pytest.raises(StudyError, match="not a study results dir"):
        merge_results([a, tmp_path], out)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]

    out.mkdir()
    (out / "x").write_text("keep")
    assert cli("study", "merge", str(a), str(b), "--out", str(out)) == 10
    assert (out / "x").read_text() == "keep" and len(list(out.iterdir())) == 1

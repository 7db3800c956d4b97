"""A study on a real llama.cpp server, stopped and resumed, gives the replies of an
uninterrupted run. With llama.cpp's prompt cache on (the old default) it did not: a reply
depended on the request the slot served before it, and a resumed run serves other requests
before its pending cells (measured on a qwen 0.5b frontier slice: 9 of 34 replies differed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from traceless.studies import read_rows, run_study

pytestmark = [pytest.mark.heavy(70), pytest.mark.integration]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
SLICE = {"data": str(FIXTURE), "n": 1, "S": [0, 1], "k": [1, 3], "modes": ["full_purge"], "wordings": 1,
         "frs_k": [3], "probe_tokens": 24, "answer_tokens": 24, "summary_tokens": 48, "bootstrap": 50}
MODEL = os.environ.get("TRACELESS_RESUME_TEST_MODEL", "llamacpp:smollm2-135m-instruct")


def _replies(out: Path) -> dict[str, str | None]:
    return {r.key: r.reply for r in read_rows(out)}


def test_a_resumed_llamacpp_study_repeats_the_uninterrupted_run(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    kw = {"model": MODEL, "progress": False}
    whole = run_study("frontier", tmp_path / "whole", SLICE, **kw)  # type: ignore[arg-type]
    first = run_study("frontier", tmp_path / "resumed", SLICE, max_cells=9, **kw)  # type: ignore[arg-type]
    assert whole.finished and not first.finished
    rest = run_study("frontier", tmp_path / "resumed", SLICE, resume=True, **kw)  # type: ignore[arg-type]
    assert rest.finished and rest.cells_skipped == 9 and rest.cache_misses > 0  # the resume generated anew
    a, b = _replies(tmp_path / "whole"), _replies(tmp_path / "resumed")
    assert a.keys() == b.keys() and len(a) > 9
    assert [k for k in a if a[k] != b[k]] == []
    engines = {str(r.model["engine"]) for r in read_rows(tmp_path / "resumed")}
    assert engines == {str(next(iter(read_rows(tmp_path / "whole"))).model["engine"])}
    assert "'cache_prompt': False" in engines.pop()

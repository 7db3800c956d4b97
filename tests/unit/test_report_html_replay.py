"""``traceless report DIR --html`` on a replay study (paper 002): the same self-contained
page, checked in headless Chromium like the frontier and AfterDeleteBench pages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_replay_study import lme_fixture, toy_reply  # noqa: E402  (same folder)
from test_report_html import CHROMIUM, _browser_check, _md_tables  # noqa: E402  (same folder)

from traceless.report import render_html_report
from traceless.runtime import ToyKVBackend
from traceless.studies import read_rows, run_study
from traceless.studies.replay import ReplayConfig


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("TRACELESS_REQUIRE_BROWSER"),
                    reason="chromium not installed (apt-get install -y chromium); CI sets TRACELESS_REQUIRE_BROWSER=1")
def test_replay_html_in_headless_chromium(tmp_path: Path) -> None:
    assert CHROMIUM is not None, "TRACELESS_REQUIRE_BROWSER is set but chromium is not installed"
    out = tmp_path / "replay"
    cfg = ReplayConfig(suites=["longmemeval", "toolsandbox"], episodes=2, steps=4, samples=2,
                       longmemeval=str(lme_fixture(tmp_path / "lme.json")), depths=[0, 1])
    run_study("replay", out, cfg, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    page = render_html_report(out, tmp_path / "rep")
    dom, errors, pixels = _browser_check(page, tmp_path)
    assert errors == []
    md = (tmp_path / "rep" / "replay.md").read_text()  # the replay report's markdown file
    assert _md_tables(md) >= 4  # paper 002's Tables 1-4 at least
    assert dom.count("<table") == _md_tables(md) + 1  # + the run-metadata table
    assert dom.count('src="data:image/png;base64,') == len(list((tmp_path / "rep").glob("*.png"))) >= 1
    assert "Findings" in dom
    assert pixels.std() > 10 and (pixels < 128).mean() > 0.005  # text and figure, not a blank page
    assert len(read_rows(out)) > 0

"""``traceless report DIR --html``: one self-contained page that opens offline, checked
in a real headless Chromium (Debian ``chromium``): no console errors, every table and
figure present, a screenshot that is not blank."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _cli import cli
from PIL import Image
from test_frontier import cfg, leaky  # noqa: E402  (same folder)

from traceless.errors import StudyError
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.report import render_html_report
from traceless.run import write_manifest
from traceless.studies import read_manifest, read_rows, run_study

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")




@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "run"
    run_study("frontier", out, cfg(k=[1, 3]), backend=ScriptedBackend(leaky, name="leaky"), model_tag="leaky",
              embedder=HashingEmbedder(), progress=False)
    return out


def _md_tables(md: str) -> int:
    # a markdown table starts with a header row followed by a |---| separator row
    return len(re.findall(r"^\|.*\|\n\|[\s:|-]+\|$", md, flags=re.M))


def test_html_is_self_contained(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("report", str(run_dir), "--html") == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == run_dir / "report" / "report.html"
    text = page.read_text()
    md = (run_dir / "report" / "report.md").read_text()
    assert text.count("<table") == _md_tables(md) + 1 >= 3  # the report's tables + run metadata
    srcs = re.findall(r'<img[^>]* src="([^"]+)"', text)
    pngs = sorted(p.name for p in (run_dir / "report").glob("*.png"))
    assert len(srcs) == len(pngs) >= 1 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:  # every embedded figure decodes
        Image.open(io.BytesIO(base64.b64decode(s.split(",", 1)[1]))).verify()
    assert not re.search(r'(src|href)="(https?:|//|file:)', text)  # nothing fetched
    assert "Content-Security-Policy" in text and "Findings" in text and "Run metadata" in text
    assert read_manifest(run_dir).code_version in text
    for canary in {r.extra["canary"] for r in read_rows(run_dir)}:
        assert canary not in text


def test_html_refuses_newer_study_version(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "newer"
    shutil.copytree(run_dir, d, ignore=shutil.ignore_patterns("report"))
    man = read_manifest(d)
    write_manifest(d, man.model_copy(update={"study_version": "99"}))
    assert cli("report", str(d), "--html") == StudyError.exit_code
    err = capsys.readouterr().err
    assert "written by version 99 of study 'frontier'" in err and "Upgrade traceless" in err
    assert not (d / "report").exists()  # refused before anything is written
    with pytest.raises(StudyError, match="version 99"):
        render_html_report(d)


def _chromium(args: list[str], page: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(page.parent)},
    )


def _console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln or "Refused to" in ln or "ERR_" in ln]


def _browser_check(page: Path, tmp_path: Path) -> tuple[str, list[str], np.ndarray]:
    dom = _chromium(["--dump-dom"], page)
    shot = tmp_path / "shot.png"
    snap = _chromium([f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars"], page)
    assert shot.is_file(), snap.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    return dom.stdout, _console_errors(dom.stderr + snap.stderr), pixels


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("TRACELESS_REQUIRE_BROWSER"),
                    reason="chromium not installed (apt-get install -y chromium); CI sets TRACELESS_REQUIRE_BROWSER=1")
def test_html_in_headless_chromium(run_dir: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None, "TRACELESS_REQUIRE_BROWSER is set but chromium is not installed"
    page = render_html_report(run_dir, tmp_path / "rep")
    dom, errors, pixels = _browser_check(page, tmp_path)
    assert errors == []
    md = (tmp_path / "rep" / "report.md").read_text()
    assert dom.count("<table") == _md_tables(md) + 1
    assert dom.count('src="data:image/png;base64,') == len(list((tmp_path / "rep").glob("*.png")))
    assert "Findings" in dom
    assert pixels.std() > 10 and (pixels < 128).mean() > 0.005  # text and figure, not a blank page

    # the checks can fail: a page that tries to load a remote image is caught
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text().replace("</body>", '<img src="http://127.0.0.1:9/x.png"></body>'))
    assert _browser_check(bad, tmp_path)[1]
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>x</title></head><body></body></html>")
    assert _browser_check(blank, tmp_path)[2].std() == 0


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("TRACELESS_REQUIRE_BROWSER"),
                    reason="chromium not installed (apt-get install -y chromium); CI sets TRACELESS_REQUIRE_BROWSER=1")
def test_afterdelete_html_in_headless_chromium(tmp_path: Path) -> None:
    """The page is generic over studies: paper 001's report (tables, lifecycle figure) too."""
    from test_afterdelete_study import reader  # noqa: E402  (same folder)

    out = tmp_path / "ad"
    run_study("afterdelete", out, {"n": 4, "blocks": ["primary", "controls", "lifecycle"]},
              backend=ScriptedBackend(reader), model_tag="scripted", embedder=HashingEmbedder(), progress=False)
    page = render_html_report(out)
    dom, errors, pixels = _browser_check(page, tmp_path)
    assert errors == []
    md = page.with_name("report.md").read_text()
    assert dom.count("<table") == _md_tables(md) + 1 >= 5
    assert dom.count('src="data:image/png;base64,') == len(list(page.parent.glob("*.png"))) >= 1
    assert pixels.std() > 10

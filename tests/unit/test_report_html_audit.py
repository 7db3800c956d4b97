"""``traceless report DIR --html`` for an audit results dir (``traceless audit --out DIR``) and
a study page whose run left parts out: checked in headless Chromium, with a screenshot the test
inspects (not blank, the heat map's red cells on it)."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import numpy as np
import pytest
from _cli import cli
from PIL import Image
from test_afterdelete import reader
from test_report_html import CHROMIUM, _browser_check, _chromium
from test_system_audit import _runtime

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.report._html_page import collapse_not_run
from traceless.studies import run_study

needs_browser = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("TRACELESS_REQUIRE_BROWSER"),
    reason="chromium not installed (apt-get install -y chromium); CI sets TRACELESS_REQUIRE_BROWSER=1")


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "a"
    run_system_audit(SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "raw_only", "full_purge"]},
                                       model="scripted", profiles=2), _runtime(), out)
    return out


def _table_cells(md: str) -> list[str]:
    """Every cell of every markdown table row (header and separator rows excluded)."""
    rows = [ln for ln in md.splitlines() if ln.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", ln)]
    return [c.strip().replace("**", "").replace("`", "") for ln in rows[1:] for c in ln.strip("|").split("|") if c.strip()]


def _red_share(pixels: np.ndarray) -> float:
    r, g, b = (pixels[..., i].astype(int) for i in range(3))
    return float(((r - g > 60) & (r - b > 60)).mean())


@needs_browser
def test_audit_dir_html_in_headless_chromium(audit_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert CHROMIUM is not None
    assert cli("report", str(audit_dir), "--html") == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == audit_dir / "report" / "report.html"
    md = (audit_dir / "report" / "report.md").read_text()
    dom, errors, _ = _browser_check(page, tmp_path)
    assert errors == []
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,[^"]+"[^>]*>', dom)
    assert len(imgs) == 1 and 'alt="copies per store after each deletion"' in imgs[0]  # the heat map
    # inline markup (code spans, emphasis) joins its text; every other tag separates
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"</?(code|strong|em|span)\b[^>]*>", "", dom)))
    cells = _table_cells(md)
    missing = [c for c in cells if c not in text]
    assert len(cells) >= 12 and not missing, missing  # every row: rates, copies (bystanders when present)
    assert "memory-audit" in text and "Run metadata" in text

    shot = tmp_path / "audit.png"
    _chromium([f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars"], page)
    assert shot.stat().st_size > 10_000
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    gray = pixels.mean(axis=2)
    assert gray.std() > 10 and (gray < 128).mean() > 0.005  # text, not a blank page
    assert _red_share(pixels) > 0.002  # the heat map's red cells are on the screen
    # the check can fail: the same page without its figure shows no red
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<img [^>]*src="data:image/png;base64,[^"]*"[^>]*>', "", page.read_text()))
    _chromium([f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars"], bare)
    assert _red_share(np.asarray(Image.open(shot).convert("RGB"))) < 0.0005


@pytest.fixture(scope="module")
def partial_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ad") / "r"
    run_study("afterdelete", out, {"n": 6, "n_transformed": 4, "blocks": ["primary", "controls"]},
              backend=ScriptedBackend(reader), model_tag="scripted", embedder=HashingEmbedder(), progress=False)
    return out


@needs_browser
def test_study_page_names_parts_not_run_once_and_shows_a_figure(partial_study: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("report", str(partial_study), "--html") == 0
    page = Path(capsys.readouterr().out.strip())
    md = (partial_study / "report" / "report.md").read_text()
    assert md.count("_(not run)_") >= 10  # the markdown report keeps its placeholders
    dom, errors, pixels = _browser_check(page, tmp_path)
    assert errors == []
    assert "(not run)</em>" not in dom and dom.count("Not run in this results dir") == 1
    _, dropped = collapse_not_run(md)
    assert "Table 5 — all auditors (hierarchical, exact, gate off)" in dropped
    assert all(html.escape(t, quote=False) in dom for t in dropped)  # named, once, in the note
    assert "Table 1 — primary" in dom and "Controls — flat memory" in dom  # what ran stays
    assert dom.count('src="data:image/png;base64,') >= 1  # a figure, though the report drew none
    assert pixels.std() > 10


def test_collapse_keeps_measured_tables() -> None:
    md = "# T\n\nintro\n\n## A\n\nwhy A\n\n_(not run)_\n\n## B\n\n| x |\n|---|\n| 1 |\n\nmore\n\n_(not run)_\n"
    out, dropped = collapse_not_run(md)
    assert dropped == ["A"] and "## A" not in out and "| 1 |" in out and "(not run)" not in out
    assert out.index("Not run in this results dir") < out.index("## B") and "): A." in out

"""Docs cannot drift: every marked table in docs/*.md and the README is regenerated from its committed
export bundle (docs/results/<name>/) through `traceless report`, and must equal what the file says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from traceless.errors import ConfigError
from traceless.report.docs import find_markers, main, regenerate, report_block

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs", ROOT / "README.md"]


def test_published_tables_equal_their_bundles() -> None:
    drift = regenerate(DOCS, write=False)
    assert drift == [], "\n".join(drift) + "\nrun: python -m traceless.report.docs docs README.md"


def test_each_results_doc_publishes_bundle_tables() -> None:
    for f in ("docs/frontier.md", "docs/afterdelete.md", "docs/replay.md", "docs/memory-systems.md", "README.md"):
        marks = find_markers(ROOT / f)
        assert marks, f
        for m in marks:
            assert m.bundle.parent == ROOT / "docs" / "results", m
            # a bundle's two files, plus at most the plan written before its run
            names = sorted(p.name for p in m.bundle.iterdir() if p.is_file() and p.name != "PREREGISTRATION.md")
            assert names == ["manifest.json", "results.parquet"]


def test_check_fails_on_an_edited_number_and_rewrite_restores_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "results").symlink_to(ROOT / "docs" / "results")
    f = docs / "frontier.md"
    # the published doc's first table, marker to closing marker (each table renders its bundle's
    # report: the whole doc's 18 took ~8 s a pass, and the test makes three)
    published = ROOT / "docs" / "frontier.md"
    m = find_markers(published)[0]
    f.write_text("\n".join(published.read_text().split("\n")[m.start:m.end + 1]) + "\n")
    original = f.read_text()
    m = find_markers(f)[0]
    lines = original.split("\n")
    row = next(i for i in range(m.start + 3, m.end) if any(c.isdigit() for c in lines[i]))
    j = next(k for k, c in enumerate(lines[row]) if c.isdigit())
    lines[row] = lines[row][:j] + str((int(lines[row][j]) + 1) % 10) + lines[row][j + 1:]
    f.write_text("\n".join(lines))
    assert main(["--check", str(f)]) == 1
    assert main([str(f)]) == 0
    assert f.read_text() == original and main(["--check", str(f)]) == 0


def test_marker_errors_say_how_to_fix(tmp_path: Path) -> None:
    f = tmp_path / "x.md"
    f.write_text('<!-- traceless:table results/none "Table 2 (ours)" -->\n| a |\n')
    with pytest.raises(ConfigError, match="no closing"):
        find_markers(f)
    f.write_text('<!-- traceless:table results/none "Table 2 (ours)" -->\n<!-- /traceless:table -->\n')
    with pytest.raises(ConfigError, match="does not exist; export it"):
        regenerate([f], write=False)
    assert main([str(f)]) == 2
    md = "# R\n\n## T\n\ntext\n\n| a |\n|---|\n| 1 |\n\n1. first\n2. second\n\n## U\n"
    assert report_block(md, "T") == ["| a |", "|---|", "| 1 |"]
    assert report_block(md, "T", 2) == ["1. first", "2. second"]
    with pytest.raises(ConfigError, match="no heading"):
        report_block(md, "V")


def test_the_scorecard_joins_the_erasure_bundles_and_the_readme_links_it() -> None:
    from traceless.report.docs import find_scorecards

    cards = find_scorecards(ROOT / "docs" / "scorecard.md")
    assert len(cards) == 1
    start, end, bundles = cards[0]
    assert len(bundles) >= 3 and all(b.parent == ROOT / "docs" / "results" and b.is_dir() for b in bundles)
    lines = (ROOT / "docs" / "scorecard.md").read_text().split("\n")[start + 1:end]
    assert lines[0].startswith("| system | native deletion | AER max after |")
    systems = {ln.split(" | ")[0].strip("| [").split("]")[0].split(" (")[0] for ln in lines[2:]}
    assert {"agno", "openai-agents", "llamaindex", "crewai", "adk", "mem0", "langgraph"} <= systems
    for ln in lines[2:]:  # the system cell links to its bundle
        link = ln.split("](", 1)[1].split(")", 1)[0]
        assert (ROOT / "docs" / link / "manifest.json").is_file() and link in {f"results/{b.name}" for b in bundles}
    assert "(docs/scorecard.md)" in (ROOT / "README.md").read_text()


def test_a_scorecard_edit_is_drift(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "results").symlink_to(ROOT / "docs" / "results")
    f = docs / "scorecard.md"
    original = (ROOT / "docs" / "scorecard.md").read_text()
    f.write_text(original.replace("| yes (", "| no (", 1))
    assert main(["--check", str(f)]) == 1
    assert main([str(f)]) == 0 and f.read_text() == original


def test_the_files_cell_names_few_files_and_counts_many_per_folder() -> None:
    from traceless.audit import files_cell as _files_cell

    assert _files_cell({}) == "0"
    assert _files_cell({"a.db": 2, "b/c.db": 1}) == "3 (`a.db`, `b/c.db`)"
    many = {f"memory/t.lance/data/{i:050d}.lance": 1 for i in range(10)} | {"x.db": 2}
    assert _files_cell(many) == "12 (10 files in `memory/t.lance/data/`, `x.db`)"


def test_the_scorecard_renders_as_one_offline_page_and_the_doc_is_not_changed(tmp_path: Path) -> None:
    import hashlib

    from traceless.errors import StudyError
    from traceless.report import render_html_report, render_report

    doc = ROOT / "docs" / "scorecard.md"
    before = hashlib.sha256(doc.read_bytes()).hexdigest()
    page = render_html_report(doc, tmp_path / "out")
    text = page.read_text()
    assert page.name == "scorecard.html" and "default-src 'none'" in text and "<table>" in text
    for b in find_scorecards_bundles(doc):  # every bundle's rows, each linked relative to the page
        assert f'href="{os.path.relpath(b, (tmp_path / "out").resolve())}"' in text
    assert text.count("<tr>") >= 30 and "<strong>NO</strong>" in text
    assert hashlib.sha256(doc.read_bytes()).hexdigest() == before
    with pytest.raises(StudyError, match="--html"):
        render_report(doc, tmp_path / "md")
    plain = tmp_path / "plain.md"
    plain.write_text("# nothing marked\n")
    with pytest.raises(ConfigError, match="no traceless:scorecard"):
        render_html_report(plain, tmp_path / "x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "md").exists()


def find_scorecards_bundles(doc: Path) -> list[Path]:
    from traceless.report.docs import find_scorecards

    return [Path(os.path.normpath(b)).resolve() for _, _, bs in find_scorecards(doc) for b in bs]


def test_the_bundle_index_lists_every_bundle_once_with_its_code_version() -> None:
    # docs/results/README.md is written by hand: it had drifted (five bundles missing, two rows
    # describing the n=1 bundles they had replaced)
    import json

    index = (ROOT / "docs" / "results" / "README.md").read_text(encoding="utf-8")
    rows = [r for r in index.splitlines() if r.startswith("| [")]
    bundles = sorted(p.parent.name for p in (ROOT / "docs" / "results").glob("*/manifest.json"))
    assert sorted(r.split("]")[0][3:] for r in rows) == bundles
    for name in bundles:
        row = next(r for r in rows if r.startswith(f"| [{name}]({name})"))
        version = json.loads((ROOT / "docs" / "results" / name / "manifest.json").read_text())["code_version"]
        assert row.split("|")[5].strip().startswith(version), (name, version)

"""Reports: read a study's results dir (never a model) and write tables, figures and
findings into ``DIR/report/``.

``render_report(results_dir)`` reads the study name from the dir's manifest and
dispatches to the report registered under that name in ``REPORTS``. Adding a report is
one decorated function ``(results_dir, out_dir) -> path of the main file``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from traceless.errors import StudyError
from traceless.registry import Registry
from traceless.studies import read_manifest

__all__ = ["REPORTS", "ReportFn", "render_report", "render_html_report"]

ReportFn = Callable[[Path, Path], Path]

REPORTS: Registry[ReportFn] = Registry(
    "report", hint="a report is registered under its study's name in traceless.report.REPORTS"
)


def render_report(results_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the report of ``results_dir`` (default into ``results_dir/report``); return
    the path of its main markdown file."""
    d = Path(results_dir)
    from traceless.forget import is_bundle, load_bundle

    if is_bundle(d):  # a request bundle (forget --deployment): request.md beside its receipts
        from traceless.report._bundle import bundle_markdown

        _, folder = load_bundle(d)
        out = Path(out_dir) if out_dir is not None else folder
        out.mkdir(parents=True, exist_ok=True)
        (out / "request.md").write_text(bundle_markdown(d), encoding="utf-8")
        return out / "request.md"
    if d.is_file() and d.suffix == ".md":
        raise StudyError(f"{d} is a docs page: render it as a page with --html (traceless report {d} --html); "
                         f"its markdown is regenerated with python -m traceless.report.docs {d}")
    man = read_manifest(d)
    fn = REPORTS.get(man.study)
    out = Path(out_dir) if out_dir is not None else d / "report"
    out.mkdir(parents=True, exist_ok=True)
    return fn(d, out)


from traceless.report import _afterdelete as _afterdelete  # noqa: E402,F401  (registers the AfterDeleteBench report, paper 001)
from traceless.report import _frontier as _frontier  # noqa: E402,F401  (registers the frontier report)
from traceless.report import _frontier_residue as _frontier_residue  # noqa: E402,F401  (the frontier-residue report)
from traceless.report import _replay as _replay  # noqa: E402,F401  (registers the replay report, paper 002)
from traceless.report import _systems as _systems  # noqa: E402,F401  (registers the memory-system audit report)
from traceless.report._html import render_html_report as render_html_report  # noqa: E402  (report.html, offline)

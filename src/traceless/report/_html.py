"""One self-contained HTML page per study report (``traceless report DIR --html``).

The page is the study's (or the audit's) markdown report (tables, findings) rendered to
HTML, with every figure embedded as a ``data:`` URI and the run metadata (study and code
version, models, progress, config) from the manifest. Sections of parts the run did not
include are left out and named once after the title; a study report that drew no figure
gets one from its tables (``traceless.report._html_page``). Nothing is fetched: a Content-Security-Policy allows
only inline styles and ``data:`` images, so the page opens offline and cannot load
anything. Raw HTML inside report text is escaped (report text is data, not markup).
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from traceless.errors import StudyError
from traceless.report._html_page import collapse_not_run, page_figures
from traceless.studies import RESULTS_FORMAT, STUDIES, Manifest, read_manifest

__all__ = ["render_html", "render_html_report", "render_doc_html", "check_renderable", "render_bundle_html"]

_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45}
h1,h2,h3{line-height:1.2}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #c8c8c8;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f0f0f0}
img{max-width:100%;border:1px solid #ddd}
pre{background:#f6f6f6;padding:.8em;overflow:auto;font-size:.85em}
code{font-size:.9em}
.meta td:first-child{font-weight:600;white-space:nowrap}
"""

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _newer(stored: str, current: str) -> bool:
    try:
        return int(stored) > int(current)
    except ValueError:  # non-numeric versions: only equality is known to be safe
        return stored != current


def _current_version(study: str) -> str:
    """The version this traceless writes of ``study`` (a registered study, or the audit)."""
    from traceless.audit import AUDIT_STUDY, AUDIT_STUDY_VERSION

    if study == AUDIT_STUDY:
        return AUDIT_STUDY_VERSION
    return STUDIES.get(study).version


def check_renderable(results_dir: Path) -> Manifest:
    """The manifest, or ``StudyError`` when the dir comes from a newer study version or
    results format than this traceless knows (its numbers could be misread)."""
    man = read_manifest(results_dir)
    current = _current_version(man.study)
    if _newer(man.study_version, current):
        raise StudyError(
            f"{results_dir} was written by version {man.study_version} of study {man.study!r}; this traceless "
            f"renders version {current}. Upgrade traceless (pip install -U traceless) to report it"
        )
    if man.results_format > RESULTS_FORMAT:
        raise StudyError(f"{results_dir} has results format {man.results_format} (newer than {RESULTS_FORMAT}); "
                         "upgrade traceless to report it")
    return man


def _data_uri(path: Path) -> str | None:
    mime = _MIME.get(path.suffix.lower())
    if mime is None or not path.is_file():
        return None
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _markdown(text: str, report_dir: Path) -> tuple[str, set[str]]:
    """Markdown → HTML with local images inlined; returns the HTML and the inlined names."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    used: set[str] = set()
    for tok in tokens:
        for child in tok.children or []:
            if child.type != "image":
                continue
            src = str(child.attrGet("src") or "")
            uri = _data_uri(report_dir / src) if "/" not in src and "\\" not in src else None
            if uri is None:
                raise StudyError(f"{report_dir}: the report shows a figure {src!r} that is not a local image; "
                                 "re-render the report (traceless report DIR)")
            child.attrSet("src", uri)
            used.add(src)
    return md.renderer.render(tokens, md.options, {}), used


def _metadata(man: Manifest, results_dir: Path) -> str:
    rows: list[tuple[str, str]] = [
        ("study", f"{man.study} (version {man.study_version})"),
        ("results dir", str(results_dir.resolve())),
        ("created", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(man.created))),
        ("code version", man.code_version),
    ]
    for tag, run in man.runs.items():
        rec: dict[str, Any] = run.model_dump(mode="json")
        ident = rec.pop("identity", {}) or {}
        rows.append((f"model {tag}", json.dumps(ident, sort_keys=True, default=str)))
        rows.append((f"run {tag}", json.dumps(rec, sort_keys=True, default=str)))
    body = "".join(f"<tr><td>{html.escape(k)}</td><td><code>{html.escape(v)}</code></td></tr>" for k, v in rows)
    cfg = html.escape(json.dumps(man.config, indent=1, sort_keys=True, default=str))
    return (f'<h2 id="run-metadata">Run metadata</h2><table class="meta">{body}</table>'
            f"<details><summary>config</summary><pre>{cfg}</pre></details>")


def render_html(results_dir: str | Path, report_md: Path) -> Path:
    """Write ``report.html`` next to ``report_md`` (already rendered from ``results_dir``)."""
    d = Path(results_dir)
    man = check_renderable(d)
    out = report_md.parent
    page_figures(man.study, out)  # a study page shows a figure even where its report drew none
    md, _ = collapse_not_run(report_md.read_text(encoding="utf-8"))
    body, used = _markdown(md, out)
    extra = [p for p in sorted(out.iterdir()) if p.suffix.lower() in _MIME and p.name not in used]
    if extra:  # figures the markdown does not show still belong on the page
        body += '<h2 id="more-figures">More figures</h2>' + "".join(
            f'<figure><img alt="{html.escape(p.name)}" src="{_data_uri(p)}"><figcaption>{html.escape(p.name)}'
            "</figcaption></figure>" for p in extra)
    title = f"traceless — {man.study} report"
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"{body}{_metadata(man, d)}</body></html>\n"
    )
    target = out / "report.html"
    tmp = target.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(target)
    return target


def _page(title: str, body: str) -> str:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>{body}</body></html>\n")


def render_doc_html(doc: str | Path, out_dir: str | Path | None = None) -> Path:
    """``DOC.html`` of a marked docs page (docs/scorecard.md): its scorecards and tables
    regenerated from their bundles (the .md is not changed), rendered to one self-contained
    page in ``out_dir`` (default: the doc's folder, where its bundle links resolve)."""
    from traceless.errors import ConfigError
    from traceless.report.docs import find_markers, find_scorecards, render_doc

    d = Path(doc)
    if not find_scorecards(d) and not find_markers(d):
        raise ConfigError(f"{d} has no traceless:scorecard or traceless:table marker; give a results dir, an "
                          "export bundle or a marked docs page (docs/scorecard.md)")
    out = Path(out_dir) if out_dir is not None else d.parent
    out.mkdir(parents=True, exist_ok=True)
    body, _ = _markdown(render_doc(d, out.resolve()), d.parent)
    first = next((ln.lstrip("#").strip() for ln in d.read_text(encoding="utf-8").split("\n") if ln.startswith("# ")),
                 d.stem)
    target = out / f"{d.stem}.html"
    tmp = target.with_suffix(".html.tmp")
    tmp.write_text(_page(f"traceless — {first}", body), encoding="utf-8")
    tmp.replace(target)
    return target


def render_bundle_html(path: str | Path, out_dir: str | Path | None = None) -> Path:
    """``request.html`` of the bundle (in ``out_dir``, default: the bundle's folder)."""
    from traceless.forget import load_bundle
    from traceless.report._bundle import bundle_markdown

    _, folder = load_bundle(path)
    out = Path(out_dir) if out_dir is not None else folder
    out.mkdir(parents=True, exist_ok=True)
    md = bundle_markdown(path)
    title = next(ln[2:] for ln in md.splitlines() if ln.startswith("# "))
    target = out / "request.html"
    tmp = target.with_suffix(".html.tmp")
    tmp.write_text(_page(f"traceless — {title}", _markdown(md, folder)[0]), encoding="utf-8")
    tmp.replace(target)
    return target


def render_html_report(results_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Render the study's report (``render_report``) and its self-contained ``report.html``;
    a dir from a newer study version is refused before anything is written. A marked docs
    page (a ``.md`` file: docs/scorecard.md) becomes ``DOC.html`` (``render_doc_html``)."""
    from traceless.forget import is_bundle
    from traceless.report import render_report

    if is_bundle(results_dir):  # a request bundle (forget --deployment): the DPO's page
        return render_bundle_html(results_dir, out_dir)
    if Path(results_dir).is_file() and Path(results_dir).suffix == ".md":
        return render_doc_html(results_dir, out_dir)
    check_renderable(Path(results_dir))
    return render_html(results_dir, render_report(results_dir, out_dir))

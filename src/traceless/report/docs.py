"""Docs tables generated from committed export bundles, so published numbers cannot drift.

A markdown file marks a generated block like this (the bundle path is relative to the file)::

    <!-- traceless:table results/frontier-qwen "Table 2 (ours)" -->
    | metric | … |
    <!-- /traceless:table -->

Between the markers goes block 1 (or the given ``#N``, e.g. ``"Table 4 — ablations" 2``) of the
report that ``traceless report BUNDLE`` writes: the N-th table or list (a run of non-blank lines
starting with ``|``, ``- `` or ``1. ``) under the report heading with exactly that text. The block is
copied, never recomputed, so the docs show what the report shows.

A scorecard joins the rows of several bundles' ``Erasure scorecard`` tables under one header
(the memory-audit report's; docs/scorecard.md)::

    <!-- traceless:scorecard results/audit-agno-qwen results/audit-openai-agents-qwen -->
    | system | native deletion | … |
    <!-- /traceless:scorecard -->

``python -m traceless.report.docs docs README.md`` rewrites every marked block;
``--check`` rewrites nothing and exits 1 naming each block that differs (the unit test runs it).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from traceless.errors import ConfigError

__all__ = ["Marker", "find_markers", "find_scorecards", "report_block", "regenerate", "render_doc", "main"]

_OPEN = re.compile(r"^<!-- traceless:table (?P<args>.+?) -->$")
_CLOSE = "<!-- /traceless:table -->"
_BLOCK_START = re.compile(r"^(\||- |\d+\. )")
_SC_OPEN = re.compile(r"^<!-- traceless:scorecard (?P<args>.+?) -->$")
_SC_CLOSE = "<!-- /traceless:scorecard -->"
SCORECARD_SECTION = "Erasure scorecard"


@dataclass(frozen=True)
class Marker:
    """One generated block of a markdown file."""

    file: Path
    """The markdown file."""
    bundle: Path
    """The export bundle (resolved against the file's folder)."""
    section: str
    """Report heading text (without the ``#`` marks)."""
    index: int
    """Which block under the heading (1-based)."""
    start: int
    """Line index of the opening marker."""
    end: int
    """Line index of the closing marker."""


def find_markers(path: Path) -> list[Marker]:
    """The marked blocks of ``path``; ``ConfigError`` for a malformed or unclosed marker."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Marker] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i].strip())
        if m:
            where = f"{path}:{i + 1}"
            args = shlex.split(m.group("args"))
            if len(args) not in (2, 3) or (len(args) == 3 and not args[2].isdigit()):
                raise ConfigError(f'{where}: write <!-- traceless:table BUNDLE "Report heading" [N] -->')
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == _CLOSE), None)
            if end is None:
                raise ConfigError(f"{where}: no closing {_CLOSE} for this marker; add one after the table")
            out.append(Marker(path, (path.parent / args[0]).resolve(), args[1], int(args[2]) if len(args) == 3 else 1,
                              i, end))
            i = end
        i += 1
    return out


def find_scorecards(path: Path) -> list[tuple[int, int, list[Path]]]:
    """The scorecard blocks of ``path``: (opening line, closing line, bundles)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, ln in enumerate(lines):
        m = _SC_OPEN.match(ln.strip())
        if m:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == _SC_CLOSE), None)
            if end is None:
                raise ConfigError(f"{path}:{i + 1}: no closing {_SC_CLOSE} for this marker; add one after the table")
            out.append((i, end, [Path(os.path.normpath(path.parent / a)) for a in shlex.split(m.group("args"))]))
    return out


def _scorecard(bundles: list[Path], cache: dict[Path, str], where: str, doc_dir: Path) -> list[str]:
    rows: list[str] = []
    for b in bundles:
        if not b.exists():
            raise ConfigError(f"{where}: bundle {b} does not exist; export it with "
                              "`traceless study export DIR --out BUNDLE`")
        block = report_block(_render(b, cache), SCORECARD_SECTION)
        rows += (block[:2] if not rows else []) + [_linked(r, b, doc_dir) for r in block[2:]]
    return rows


def _linked(row: str, bundle: Path, doc_dir: Path) -> str:
    """A scorecard row whose system cell links to its bundle, with the bundle's variant
    (``audit-SYSTEM-VARIANT-MODEL``: e.g. ``byo-chroma``) when its name has one."""
    system, rest = row[2:].split(" | ", 1)
    name = bundle.name.removeprefix("audit-").removeprefix(system + "-")
    variant = name.rsplit("-", 1)[0] if "-" in name else ""
    label = f"{system} ({variant})" if variant else system
    return f"| [{label}]({os.path.relpath(bundle, doc_dir)}) | {rest}"


def report_block(report_md: str, section: str, index: int = 1) -> list[str]:
    """The ``index``-th table or list under the heading ``section`` of a rendered report."""
    lines = report_md.split("\n")
    head = next((i for i, ln in enumerate(lines) if ln.startswith("#") and ln.lstrip("#").strip() == section), None)
    if head is None:
        raise ConfigError(f"the report has no heading {section!r}; headings: "
                          + ", ".join(repr(ln.lstrip('#').strip()) for ln in lines if ln.startswith("#")))
    blocks: list[list[str]] = []
    cur: list[str] = []
    for ln in lines[head + 1:]:
        if ln.startswith("#"):
            break
        if cur and ln.strip():
            cur.append(ln)
            continue
        if cur:
            blocks.append(cur)
            cur = []
        if _BLOCK_START.match(ln):
            cur = [ln]
    if cur:
        blocks.append(cur)
    if not 1 <= index <= len(blocks):
        raise ConfigError(f"the report's section {section!r} has {len(blocks)} table/list block(s), not #{index}")
    return blocks[index - 1]


def _render(bundle: Path, cache: dict[Path, str]) -> str:
    if bundle not in cache:
        from traceless.report import render_report

        with tempfile.TemporaryDirectory(prefix="traceless-docs-") as tmp:
            cache[bundle] = render_report(bundle, tmp).read_text(encoding="utf-8")
    return cache[bundle]


def _regenerated(f: Path, cache: dict[Path, str], link_base: Path) -> tuple[str, list[str]]:
    """``f``'s text with every marked block regenerated from its bundles (scorecard links
    relative to ``link_base``), and one line per block that differed."""
    lines = f.read_text(encoding="utf-8").split("\n")
    blocks: list[tuple[int, int, list[str], str]] = []
    for mk in find_markers(f):
        if not mk.bundle.exists():
            raise ConfigError(f"{f}:{mk.start + 1}: bundle {mk.bundle} does not exist; export it with "
                              "`traceless study export DIR --out BUNDLE`")
        blocks.append((mk.start, mk.end, report_block(_render(mk.bundle, cache), mk.section, mk.index),
                       f"{mk.bundle.name} / {mk.section!r} #{mk.index}"))
    for start, end, bundles in find_scorecards(f):
        blocks.append((start, end, _scorecard(bundles, cache, f"{f}:{start + 1}", link_base),
                       f"scorecard of {len(bundles)} bundle(s)"))
    drift: list[str] = []
    for start, end, block, label in sorted(blocks, reverse=True):  # bottom-up: line numbers stay valid
        if lines[start + 1:end] != block:
            drift.append(f"{f}:{start + 1}: {label} differs")
            lines[start + 1:end] = block
    return "\n".join(lines), drift


def render_doc(path: Path, link_base: Path | None = None) -> str:
    """A marked markdown doc (docs/scorecard.md) with its tables and scorecards regenerated
    from their bundles, the doc itself unchanged; links relative to ``link_base`` (default:
    the doc's folder)."""
    return _regenerated(path, {}, link_base or path.parent)[0]


def regenerate(paths: list[Path], *, write: bool) -> list[str]:
    """Regenerate every marked block of the markdown files under ``paths``; return one line per
    block that differed (rewritten when ``write``)."""
    files = sorted({f for p in paths for f in ([p] if p.is_file() else sorted(p.glob("*.md")))})
    cache: dict[Path, str] = {}
    drift: list[str] = []
    for f in files:
        text, differs = _regenerated(f, cache, f.parent)
        drift += differs
        if differs and write:
            f.write_text(text, encoding="utf-8")
    return drift


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m traceless.report.docs",
                                 description="Regenerate the docs' marked tables from their export bundles.")
    ap.add_argument("paths", nargs="+", type=Path, help="markdown files or folders (their *.md)")
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if any block differs")
    a = ap.parse_args(argv)
    try:
        drift = regenerate(a.paths, write=not a.check)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for d in drift:
        print(d)
    if a.check and drift:
        print("docs differ from their bundles; run: python -m traceless.report.docs " + " ".join(map(str, a.paths)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the HTML page adds to a markdown report: parts the run did not include are named once
instead of shown as empty "(not run)" sections, and a study page whose report drew no figure
gets one from its own tables (``page_figures``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["NOT_RUN", "collapse_not_run", "page_figures"]

NOT_RUN = "_(not run)_"
"""The placeholder a report writes for a table of a part the run did not include."""
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


def _sections(md: str) -> list[list[str]]:
    """The markdown's lines cut before every heading (the first part: what precedes one)."""
    parts: list[list[str]] = [[]]
    for line in md.splitlines():
        if _HEADING.match(line):
            parts.append([])
        parts[-1].append(line)
    return parts


def _empty(body: list[str]) -> bool:
    """A section whose every table is a "(not run)" placeholder: nothing measured in it."""
    return (any(x.strip() == NOT_RUN for x in body)
            and not any(x.lstrip().startswith(("|", "![", "- ", "* ")) for x in body))


def collapse_not_run(md: str) -> tuple[str, list[str]]:
    """``md`` without its not-run sections, with one paragraph naming them after the title
    section, and their titles (in order). A section that holds a measured table keeps it and
    drops only its "(not run)" lines."""
    kept: list[list[str]] = []
    dropped: list[str] = []
    for part in _sections(md):
        head = _HEADING.match(part[0]) if part else None
        if head and _empty(part[1:]):
            dropped.append(head.group(2))
            continue
        kept.append([x for x in part if x.strip() != NOT_RUN])
    titles = list(dict.fromkeys(dropped))
    if titles:
        at = next((i + 1 for i, part in enumerate(kept) if part and _HEADING.match(part[0])), len(kept))
        kept.insert(at, [_note(titles), ""])
    return "\n".join(x for part in kept for x in part) + "\n", titles


def _note(titles: list[str]) -> str:
    """One markdown paragraph naming the parts that were not run."""
    names = "; ".join(t.replace("`", "") for t in titles)
    return (f"**Not run in this results dir** (its config left them out, so the page has no section for "
            f"them): {names}.")


def page_figures(study: str, report_dir: Path) -> list[Path]:
    """Figures drawn for the page when the report drew none (afterdelete without its
    lifecycle block: Table 1's ΔRec per split and row, with its 95% interval)."""
    if any(p.suffix.lower() == ".png" for p in report_dir.iterdir()) or study != "afterdelete":
        return []
    out = []
    for tables in sorted(report_dir.glob("tables_*.json")):
        rows = json.loads(tables.read_text(encoding="utf-8")).get("tables", {}).get("table1_primary", [])
        if rows:
            path = report_dir / f"table1_{tables.stem.removeprefix('tables_')}.png"
            _delta_figure(rows, path)
            out.append(path)
    return out


def _delta_figure(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.get('split', '')} {r.get('row', '')}".strip() for r in rows]
    est = [float(r.get("delta", 0.0)) for r in rows]
    lo = [e - float(r.get("low", e)) for e, r in zip(est, rows, strict=True)]
    hi = [float(r.get("high", e)) - e for e, r in zip(est, rows, strict=True)]
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.32 * len(rows)))
    ax.errorbar(est, range(len(rows)), xerr=[lo, hi], fmt="o", color="#b22222", ecolor="#555", capsize=3)
    ax.axvline(0.0, color="#888", lw=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ΔRec = forget-world − clean-world recovery (95% interval)")
    ax.set_title("Table 1: recovery after exact deletion", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Report of a memory-system audit (``traceless audit [--memory NAME]``): one table of
extraction and per-store copies per deletion operation, the files that still hold a
canary, and a heat map store × operation. Reads the rows of a results dir or of its export
bundle (``traceless study export``) and computes the table with ``traceless.audit.audit_table``,
the function the audit wrote its summary with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceless.errors import StudyError
from traceless.report import REPORTS

__all__ = ["inversion_cell", "render_system_audit", "serving_cache_cell"]


def _load(results_dir: Path) -> dict[str, Any]:
    from traceless.audit import audit_table
    from traceless.studies import read_manifest, read_rows

    man = read_manifest(results_dir)
    if not all(run.finished for run in man.runs.values()) or not man.runs:
        raise StudyError(f"{results_dir}: the audit did not finish; rerun the same command to resume it")
    cells = read_rows(results_dir)
    t = audit_table(cells)
    return {"system": man.config["system"], "config": man.config, "model": cells[0].model,
            "code_version": cells[0].code_version, **t.model_dump(include={"table", "copies", "files", "bystanders",
                                                                             "erasure", "inversion", "serving_cache"})}



def _markdown(s: dict[str, Any]) -> str:
    from traceless.audit import bystander_cell

    table, copies, files = s["table"], s["copies"], s["files"]
    phases = list(table)
    rates = [c for c in table[phases[0]] if c.startswith("AER")]
    frs = sorted({c for row in table.values() for c in row if c.startswith("FRS")})
    stores = list(copies[phases[0]])
    cfg = s["config"]
    bys = s.get("bystanders") or {}
    served = s.get("serving_cache") or {}
    head = ["deletion", *(c.replace("_", " ") for c in [*rates, *frs]), *(f"{st} copies" for st in stores),
            *(["serving cache"] if served else []), *(["bystanders intact"] if bys else [])]
    lines = [
        f"# Memory audit: {s['system']}",
        "",
        f"Model `{s.get('model', {}).get('name', cfg['model'])}`, seed {cfg['seed']}, {cfg.get('profiles') or 'default'} users, "
        f"system config `{json.dumps(cfg['system_config'], sort_keys=True)}`, code {s['code_version']}.",
        "",
        "AER: share of probes whose reply holds the user's canary; per store: copies of the canaries "
        "it still holds after the deletion (summed over users)."
        + (" Bystanders intact: every other user's canary kept its copies (after/before, summed over the "
           "per-user deletions) and its retrieval; **NO** is over-deletion." if bys else ""),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for ph in phases:
        row = table[ph]
        cells = [f"{row[c]:.2f}" if c in row else "—" for c in [*rates, *frs]]
        lines.append("| " + " | ".join([ph, *cells, *(str(copies[ph].get(st, 0)) for st in stores),
                                         *([_serving_verdict(served.get(ph), ph in served)] if served else []),
                                         *([bystander_cell(bys.get(ph))] if bys else [])]) + " |")
    lines += ["", "## Files that still hold a canary (byte scan: UTF-8, UTF-16)", ""]
    for ph in phases:
        held = files.get(ph) or {}
        lines.append(f"- **{ph}**: " + (", ".join(f"`{f}` ({n})" for f, n in held.items()) if held else "none"))
    lines += ["", "![copies per store after each deletion](heatmap.png)", ""]
    if bys:
        lines += _scorecard(s)
    return "\n".join(lines)


SCORECARD_HEAD = ["system", "native deletion", "AER max after", "copies left per store", "canary bytes in files",
                  "recoverable from surviving vectors", "served model's prompt cache", "bystanders intact",
                  "traceless erasure reaches"]


def _serving_verdict(rep: dict[str, Any] | None, recorded: bool) -> str:
    """The residue table's "serving cache" cell: the verdict as the native deletion left it."""
    if not recorded:
        return "—"
    return "— (no served model)" if rep is None else f"{rep['before']['verdict']} (p {rep['before']['ks_p']:.1e})"


def _no_cell(recorded: bool, absent: str) -> str:
    """A scorecard cell's text when there is nothing to show: the audit predates the column, or
    ``absent`` (it ran and there was nothing to measure)."""
    return absent if recorded else "— (not run by the audit)"


def serving_cache_cell(rep: dict[str, Any] | None, recorded: bool = True) -> str:
    """The scorecard's "served model's prompt cache": the serving-cache tier's verdict as the
    native deletion leaves the server and after traceless's erasure cleared it, each with its KS
    p-value and median time ratio (record / control), n per group; "—" where traceless serves
    no model, "— (not run by the audit)" where the audit did not run the tier."""
    if rep is None or not recorded:
        return _no_cell(recorded, "— (no model served by traceless)")
    b, a = rep["before"], rep["after"]
    return (f"{b['verdict']} (KS p {b['ks_p']:.1e}, ratio {b['median_ratio']:.2f}); after traceless's erasure "
            f"{a['verdict']} (p {a['ks_p']:.2f}, ratio {a['median_ratio']:.2f}); n {rep['n']} per group")


def inversion_cell(rep: dict[str, Any] | None, recorded: bool = True) -> str:
    """The scorecard's "recoverable from surviving vectors": the planted canaries the candidate
    attack ranks first from the vectors read from the files after the deletion, k/n, the rate
    and its exact interval (top-k after it); "—" where the system's files hold no vectors
    traceless reads, "— (not run by the audit)" in an audit that predates the check."""
    if rep is None or not recorded:
        return _no_cell(recorded, "—")
    t1, tk = rep["top1"], rep["topk"]
    return (f"top-1 {t1['successes']}/{t1['n']}, {t1['value']:.2f} [{t1['low']:.2f}, {t1['high']:.2f}] "
            f"(top-{rep['k']} {tk['successes']}/{tk['n']}; {rep['vectors']} vectors)")


def _erasure_cell(e: dict[str, Any] | None) -> str:
    if e is None:
        return "— (not run by the audit)"
    from traceless.systems import CLAIM_LEVELS

    level = min(e["claims"].values(), key=CLAIM_LEVELS.index) if e["claims"] else "none"
    return f"{level} in every store" + ("" if e["passed"] else " (**not verified**)")


def _scorecard(s: dict[str, Any]) -> list[str]:
    """One row per native deletion: the cross-system scorecard's rows (docs/scorecard.md
    joins every system's)."""
    from traceless.audit import bystander_cell, files_cell

    inv = s.get("inversion") or {}
    served = s.get("serving_cache") or {}
    lines = ["## Erasure scorecard", "", "| " + " | ".join(SCORECARD_HEAD) + " |", "|" + "---|" * len(SCORECARD_HEAD)]
    for ph in list(s["table"])[1:]:
        left = ", ".join(f"{st} {n}" for st, n in s["copies"][ph].items() if n) or "none"
        held = s["files"].get(ph) or {}
        files = files_cell(held)
        lines.append("| " + " | ".join([s["system"], f"`{ph}`", f"{s['table'][ph]['AER_max']:.2f}", left, files,
                                         inversion_cell(inv.get(ph), ph in inv),
                                         serving_cache_cell(served.get(ph), ph in served),
                                         bystander_cell(s["bystanders"].get(ph)),
                                         _erasure_cell(s["erasure"].get(ph))]) + " |")
    return [*lines, ""]


def _heatmap(s: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    phases = list(s["copies"])
    stores = list(s["copies"][phases[0]])
    mat = np.array([[s["copies"][ph].get(st, 0) for ph in phases] for st in stores], dtype=float)
    fig, ax = plt.subplots(figsize=(1.4 + 1.3 * len(phases), 1.2 + 0.6 * len(stores)))
    ax.imshow(mat, cmap="Reds", vmin=0, vmax=max(1.0, float(mat.max())), aspect="auto")
    ax.set_xticks(range(len(phases)), phases, rotation=30, ha="right")
    ax.set_yticks(range(len(stores)), stores)
    for i in range(len(stores)):
        for j in range(len(phases)):
            dark = mat[i, j] > 0.5 * max(1.0, float(mat.max()))
            ax.text(j, i, str(int(mat[i, j])), ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")
    ax.set_title(f"{s['system']}: canary copies per store after each deletion", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@REPORTS.register("memory-audit", help="traceless audit --memory NAME")
def render_system_audit(results_dir: Path, out_dir: Path) -> Path:
    """Write report.md and heatmap.png into ``out_dir``."""
    s = _load(results_dir)
    _heatmap(s, out_dir / "heatmap.png")
    p = out_dir / "report.md"
    p.write_text(_markdown(s), encoding="utf-8")
    return p

"""Report of the frontier study's residue preset (``frontier-residue``, paper 000 §3.3
screened): the canary-keep screen, residue conditional on a kept canary and unconditional
(× the keep rate) per deletion mode, the supersede sensitivity of ``raw_plus_resummarize``,
and the claims judged by the one verdict rule of ``traceless.metrics``. Every interval is
exact (Clopper–Pearson for rates, Newcombe for paired differences). Never prints a canary.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.metrics import (
    CI,
    ClaimVerdict,
    Verdict,
    claim_verdict,
    combine_verdicts,
    construction_verdict,
    paired_ci,
    pinned,
    proportion_ci,
)
from traceless.report import REPORTS
from traceless.report._frontier import EQUIVALENCE_MARGIN, GUARANTEE_NOTE, PAPER_TABLE2
from traceless.studies import ResultRow, paper_claim, read_manifest, read_rows

__all__ = ["ResidueNumbers", "residue_numbers", "residue_report", "residue_findings", "PAPER_RESIDUE"]

RPR = "raw_plus_resummarize"
PAPER_RESIDUE: dict[tuple[str, int], float] = {
    (m, s): PAPER_TABLE2["Gemma 3 12B"][m][s] for m in ("noop", "raw_only", RPR) for s in (1, 2)}
"""Paper 000 Table 2 (Gemma 3 12B) FRS_worst at S=1/S=2 — over all instances, so it compares
with our unconditional residue: noop 0.20/0.15, raw_only 0.20/0.15, raw_plus_resummarize 0.11/0.05."""
VERDICT_NOTE = (
    "Verdicts by the one rule of `traceless.metrics`: exact intervals (Clopper–Pearson for a rate over "
    "instances, Newcombe for a paired difference on the same kept instances); below the minimum n the verdict "
    "is INCONCLUSIVE with the n that decides it at 80% power; a floor (nothing leaked under the control) or no "
    "kept canary makes a claim NOT TESTABLE.")


@dataclass
class ResidueNumbers:
    """Every statistic of one model's residue run."""

    model_tag: str
    n: int
    """Complete (fully stored) instances screened."""
    n_partial: int
    screen_S: list[int]
    slice_S: list[int]
    deletions: list[str]
    """Deletion names in cell order: the modes, then ``raw_plus_resummarize@T`` per threshold."""
    keep: dict[int, CI] = field(default_factory=dict)
    """Per screened S: instances whose canary-session summary held the canary / n."""
    kept_ids: dict[int, list[str]] = field(default_factory=dict)
    residue: dict[int, dict[str, list[bool]]] = field(default_factory=dict)
    """Per slice S and deletion: per kept instance (order of ``kept_ids``), any probe extracted."""
    store_left: dict[int, dict[str, list[bool]]] = field(default_factory=dict)
    """Per slice S and deletion: per kept instance, a level-S chunk still held the canary."""
    attr_only: dict[int, dict[str, list[bool]]] = field(default_factory=dict)
    """Per slice S and deletion: per kept instance, a canary-session chunk names the attribute
    without the value after the deletion."""
    level_residue: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)
    """Per slice S and deletion: kept instances whose probe of each level extracted the canary."""

    def conditional(self, s: int, d: str) -> CI:
        """Residue given a kept canary: exact interval over the kept instances."""
        xs = self.residue.get(s, {}).get(d, [])
        return proportion_ci(sum(xs), len(xs))

    def unconditional(self, s: int, d: str) -> CI:
        """Residue over every screened instance (= keep rate × conditional residue: an instance
        whose summary did not keep the canary has none at that S), exact interval over n."""
        return proportion_ci(sum(self.residue.get(s, {}).get(d, [])), self.n)

    def stored(self, s: int, d: str) -> CI:
        xs = self.store_left.get(s, {}).get(d, [])
        return proportion_ci(sum(xs), len(xs))


def _fmt(ci: CI) -> str:
    """``value [low, high]``, or ``—`` without units."""
    return "—" if ci.n == 0 else ci.fmt()


def _cell(r: ResultRow) -> dict[str, Any]:
    return dict(r.config["cell"])


def _expected(cfg: dict[str, Any]) -> int:
    probes = len(cfg["probe_levels"]) * int(cfg["wordings"])
    return len(cfg["screen_S"]) + len(cfg["slice_S"]) * (len(cfg["modes"]) + len(cfg["supersede"])) * probes


def deletion_names(cfg: dict[str, Any]) -> list[str]:
    """The deletions of a config, in cell order (as ``studies.frontier.deletion_name``)."""
    return list(cfg["modes"]) + [f"{RPR}@{t:.2f}" for t in cfg["supersede"]]


def _complete(rows: list[ResultRow], cfg: dict[str, Any]) -> tuple[dict[str, list[ResultRow]], int]:
    by_inst: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        by_inst[_cell(r)["instance"]].append(r)
    want = _expected(cfg)
    done = {i: rs for i, rs in sorted(by_inst.items()) if len({r.key for r in rs}) == want}
    return done, len(by_inst) - len(done)


def residue_numbers(rows: list[ResultRow], cfg: dict[str, Any], model_tag: str) -> ResidueNumbers:
    """The statistics of one model's rows (complete instances only)."""
    done, partial = _complete(rows, cfg)
    x = ResidueNumbers(model_tag, len(done), partial, list(cfg["screen_S"]), list(cfg["slice_S"]),
                       deletion_names(cfg))
    for s in x.screen_S:
        kept = [i for i, rs in done.items() if any(_cell(r)["kind"] == "screen" and _cell(r)["S"] == s
                                                   and r.metrics["kept"] for r in rs)]
        x.kept_ids[s] = kept
        x.keep[s] = proportion_ci(len(kept), x.n)
    for s in x.slice_S:
        _slice_numbers(x, s, {i: done[i] for i in x.kept_ids[s]})
    return x


def _deletion_of(p: dict[str, Any]) -> str:
    return p["mode"] if p.get("supersede") is None else f"{p['mode']}@{p['supersede']:.2f}"


def _slice_numbers(x: ResidueNumbers, s: int, kept: dict[str, list[ResultRow]]) -> None:
    res: dict[str, list[bool]] = {d: [] for d in x.deletions}
    left: dict[str, list[bool]] = {d: [] for d in x.deletions}
    attr: dict[str, list[bool]] = {d: [] for d in x.deletions}
    lev: dict[str, dict[str, int]] = {d: defaultdict(int) for d in x.deletions}
    for rs in kept.values():
        by_d: dict[str, list[ResultRow]] = defaultdict(list)
        for r in rs:
            p = _cell(r)
            if p["kind"] == "frs" and p["S"] == s and r.metrics.get("eligible"):
                by_d[_deletion_of(p)].append(r)
        for d in x.deletions:
            got = by_d.get(d, [])
            res[d].append(any(r.metrics["extracted"] for r in got))
            left[d].append(any(r.metrics["summary_copies_after"] > 0 for r in got))
            attr[d].append(any(r.metrics["attribute_only_after"] > 0 for r in got))
            for r in got:
                lev[d][_cell(r)["level"]] += int(bool(r.metrics["extracted"]))
    x.residue[s], x.store_left[s], x.attr_only[s] = res, left, attr
    x.level_residue[s] = {d: dict(v) for d, v in lev.items()}


# ---------------------------------------------------------------------- findings
def _no_kept(x: ResidueNumbers, s: int) -> ClaimVerdict | None:
    k = len(x.kept_ids.get(s, []))
    if k:
        return None
    return claim_verdict(None, testable=False, why_not=f"no instance's level-{s} summary kept the canary "
                                                       f"(0 of {x.n} screened)")


def _floor(x: ResidueNumbers, s: int, mode: str) -> ClaimVerdict | None:
    why = pinned(f"residue given a kept canary under {mode} at S={s}", x.conditional(s, mode).value, "drop")
    return None if why is None else claim_verdict(None, testable=False, why_not=why)


@dataclass
class Found:
    """One judged claim of a residue run."""

    guarantee: bool
    """Holds by construction: rendered with the regression guarantees."""
    verdict: ClaimVerdict
    claim: str
    """The claim as tested (ends without a full stop)."""
    ours: str
    """Our numbers, with intervals and n."""
    paper: str
    """Key of the paper claim (``traceless.studies.PAPER_CLAIMS``)."""

    def line(self) -> str:
        return f"**{self.verdict.fmt()}** — {self.claim}. Ours: {self.ours}. {paper_claim(self.paper).reading()}."


def residue_found(x: ResidueNumbers) -> list[Found]:
    """Every claim per slice level, judged."""
    out: list[Found] = []
    for s in x.slice_S:
        out += _raw_only_claim(x, s) + _rpr_claim(x, s) + _reading_claim(x, s) + _paper_value_claims(x, s)
        out += _purge_guarantees(x, s)
    return out


def residue_findings(x: ResidueNumbers) -> list[tuple[bool, str]]:
    """(is a regression guarantee, rendered line) per claim and slice level."""
    return [(f.guarantee, f.line()) for f in residue_found(x)]


RAW_ONLY_BUILT = ("raw_only scrubs the raw turns only and leaves the summary tier untouched (paper 000: "
                  "'summary tier untouched'), so the level-S view the probes read is noop's and greedy decoding "
                  "gives the same replies")
"""Why raw_only ≡ noop on the S ≥ 1 view holds by construction."""


def _raw_only_claim(x: ResidueNumbers, s: int) -> list[Found]:
    claim = (f"S={s}: raw_only leaves the summary copy recoverable, indistinguishable from noop (paper ≈0.20 at "
             f"S=1, form: equality + residue > 0), on the kept instances")
    no, ro = x.residue.get(s, {}).get("noop", []), x.residue.get(s, {}).get("raw_only", [])
    differ = sum(a != b for a, b in zip(no, ro, strict=True))
    same = construction_verdict(differ, len(no), RAW_ONLY_BUILT)
    v = _no_kept(x, s) or _floor(x, s, "noop") or combine_verdicts(
        same, claim_verdict(x.conditional(s, "raw_only"), gt=0.0))
    built = (f"the equality half is **{same.verdict.value}** (outcomes equal in {len(no) - differ} of {len(no)} "
             f"kept instances: {RAW_ONLY_BUILT})" if no else "")
    ours = (f"noop {_fmt(x.conditional(s, 'noop'))}, raw_only {_fmt(x.conditional(s, 'raw_only'))} given kept"
            + (f"; {built}" if built else ""))
    return [Found(False, v, claim, ours, "000.raw_only_noop")]


def _same_measurement(x: ResidueNumbers, s: int) -> bool:
    """raw_plus_resummarize's residue and its surviving old chunk agree on every kept instance:
    one measurement, reported as one finding."""
    res, left = x.residue.get(s, {}).get(RPR, []), x.store_left.get(s, {}).get(RPR, [])
    return bool(res) and res == left


def _rpr_claim(x: ResidueNumbers, s: int) -> list[Found]:
    claim = (f"S={s}: raw_plus_resummarize reduces but does not eliminate residue (paper 0.11 at S=1, 0.05 at "
             "S=2): raw_only − raw_plus_resummarize > 0 and residue > 0, on the kept instances")
    d = paired_ci(x.residue.get(s, {}).get("raw_only", []), x.residue.get(s, {}).get(RPR, []))
    v = _no_kept(x, s) or _floor(x, s, "raw_only") or combine_verdicts(
        claim_verdict(d, gt=0.0), claim_verdict(x.conditional(s, RPR), gt=0.0))
    ours = f"raw_plus_resummarize {_fmt(x.conditional(s, RPR))} given kept; difference {d.fmt() if d.n else 'n/a'}"
    if _same_measurement(x, s):
        n = len(x.residue[s][RPR])
        ours += (f"; the same measurement as 'an old level-{s} chunk with the canary survives the regeneration' "
                 f"(residue exactly where an old chunk is left, {n} of {n} kept instances agree; one finding; "
                 f"{paper_claim('000.rpr_reading').reading()})")
    return [Found(False, v, claim, ours, "000.rpr_reduces")]


def _reading_claim(x: ResidueNumbers, s: int) -> list[Found]:
    if _same_measurement(x, s):
        return []  # folded into the raw_plus_resummarize finding
    claim = (f"S={s}: our reading of raw_plus_resummarize holds — 'pre-existing summary artifacts are not fully "
             "removed before regeneration': an old level-S chunk with the canary survives the regeneration "
             "(store scan, default supersede threshold 0.50) in some kept instances (rate > 0)")
    st = x.stored(s, RPR)
    v = _no_kept(x, s) or claim_verdict(st, gt=0.0)
    n_attr = sum(x.attr_only.get(s, {}).get(RPR, []))
    ours = (f"old chunk left in {_fmt(st)} of kept instances; a regenerated chunk names the attribute without the "
            f"value in {n_attr} of {st.n} (such a chunk can supersede the old one)")
    return [Found(False, v, claim, ours, "000.rpr_reading")]


def _paper_value_verdict(x: ResidueNumbers, s: int, u: CI, p: float) -> ClaimVerdict:
    """The paper's all-instances value (a point ± the margin) against ours. With no kept canary
    at this level our residue is 0 because this summarizer dropped the canary: a paper value
    our interval excludes is CONTRADICTED for this model (a measured level, named), one it
    admits is NOT TESTABLE (a near-zero paper value would 'match' for the wrong reason)."""
    v = claim_verdict(u, ge=max(0.0, p - EQUIVALENCE_MARGIN), le=p + EQUIVALENCE_MARGIN)
    none = _no_kept(x, s)
    if none is None:
        return v.model_copy(update={"model": x.model_tag})
    if v.verdict is Verdict.CONTRADICTED:
        return v.model_copy(update={"model": x.model_tag})
    return none


def _paper_value_claims(x: ResidueNumbers, s: int) -> list[Found]:
    out: list[Found] = []
    for mode in ("noop", "raw_only", RPR):
        p = PAPER_RESIDUE.get((mode, s))
        if p is None:
            continue
        u = x.unconditional(s, mode)
        v = _paper_value_verdict(x, s, u, p)
        out.append(Found(False, v, f"S={s}: {mode} residue over all instances matches the paper's {p:.2f} "
                                   f"(Table 2, form: point ± {EQUIVALENCE_MARGIN})",
                         f"{_fmt(u)} (n={u.n}) = keep rate {_fmt(x.keep[s])} × given kept "
                         f"{_fmt(x.conditional(s, mode))}", "000.table2_residue"))
    return out


def _purge_guarantees(x: ResidueNumbers, s: int) -> list[Found]:
    out: list[Found] = []
    for mode in ("full_purge", "tombstone"):
        if mode not in x.deletions:
            continue
        bad = sum(a or b for a, b in zip(x.residue[s][mode], x.store_left[s][mode], strict=True))
        v = construction_verdict(bad, len(x.residue[s][mode]),
                                 f"{mode} removes the canary from every tier before the probes")
        if v.verdict is Verdict.NOT_TESTABLE:
            v = _no_kept(x, s) or v
        out.append(Found(True, v, f"S={s}: {mode} leaves no residue on the kept instances (no probe extracts it, "
                                  f"no level-{s} chunk holds it)", f"{bad} of {len(x.residue[s][mode])}", "000.purge"))
    return out


# ---------------------------------------------------------------------- rendering
def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows), ""]


def screen_section(nums: list[ResidueNumbers]) -> list[str]:
    """The screen: keep rate per model and S, exact interval."""
    rows = [[x.model_tag, str(s), str(x.n), str(len(x.kept_ids[s])), _fmt(x.keep[s])]
            for x in nums for s in x.screen_S]
    return ["## Screen: did the summary keep the canary?", "",
            "Each instance's canary session written alone through the study's memory system (the frontier "
            "study's summary prompts, greedy); kept = its level-S summary holds the canary verbatim. 95% "
            "Clopper–Pearson intervals.", "",
            *_table(["model", "S", "screened", "kept", "keep rate [95% exact]"], rows)]


def residue_section(nums: list[ResidueNumbers]) -> list[str]:
    """Residue per deletion mode, conditional on a kept canary and over all screened instances."""
    rows = []
    for x in nums:
        for s in x.slice_S:
            for d in x.deletions:
                if "@" in d:
                    continue
                p = PAPER_RESIDUE.get((d, s))
                rows.append([x.model_tag, str(s), d, str(len(x.kept_ids[s])), _fmt(x.conditional(s, d)),
                             _fmt(x.unconditional(s, d)), "—" if p is None else f"{p:.2f}",
                             _fmt(x.stored(s, d))])
    return ["## Residue after deletion (the kept slice)", "",
            "Residue = the canary extracted verbatim by at least one probe after the deletion, with the agent's S "
            "view at the slice's k. *Given kept*: over the instances whose level-S summary kept the canary; "
            "*all instances*: over every screened instance (= keep rate × given kept; an instance whose summary "
            "dropped the canary has no level-S residue). The paper's FRS_worst (Gemma 3 12B, Table 2) is over "
            "all instances. *Chunk left*: a level-S summary chunk still holds the canary (store scan).", "",
            *_table(["model", "S", "mode", "kept n", "given kept [95% exact]", "all instances [95% exact]",
                     "paper", "chunk left (given kept)"], rows)]


def sensitivity_section(nums: list[ResidueNumbers]) -> list[str]:
    """raw_plus_resummarize at every supersede threshold."""
    rows = []
    for x in nums:
        for s in x.slice_S:
            for d in [e for e in x.deletions if e == RPR or e.startswith(f"{RPR}@")]:
                th = "default (0.50)" if d == RPR else d.split("@", 1)[1]
                attr = x.attr_only[s][d]
                rows.append([x.model_tag, str(s), th, _fmt(x.conditional(s, d)), _fmt(x.unconditional(s, d)),
                             _fmt(x.stored(s, d)), f"{sum(attr)} of {len(attr)}"])
    return ["## Supersede sensitivity of raw_plus_resummarize", "",
            "The mode adds the regenerated chunks and retires an old chunk of the session only when a new chunk "
            "reaches the supersede cosine (greedy one-to-one). A regenerated chunk that names the attribute "
            "without the value (\"has a private session token\") is close to the old chunk that held it and can "
            "retire it; raising the threshold keeps more old chunks (above 1: none is retired).", "",
            *_table(["model", "S", "threshold", "residue given kept", "all instances", "old chunk left",
                     "attribute without value"], rows)]


def _numbers_json(x: ResidueNumbers) -> dict[str, Any]:
    return {
        "n": x.n, "partial": x.n_partial,
        "keep": {s: c.model_dump() for s, c in x.keep.items()},
        "residue_given_kept": {s: {d: x.conditional(s, d).model_dump() for d in x.deletions} for s in x.slice_S},
        "residue_all": {s: {d: x.unconditional(s, d).model_dump() for d in x.deletions} for s in x.slice_S},
        "chunk_left_given_kept": {s: {d: x.stored(s, d).model_dump() for d in x.deletions} for s in x.slice_S},
        "attribute_only_given_kept": {s: {d: sum(v) for d, v in x.attr_only[s].items()} for s in x.slice_S},
        "extracted_by_level_given_kept": x.level_residue,
    }


def _write_csv(nums: list[ResidueNumbers], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["model", "S", "statistic", "deletion", "value", "low", "high", "successes", "n"])
        for x in nums:
            for s, c in x.keep.items():
                w.writerow([x.model_tag, s, "keep_rate", "", c.value, c.low, c.high, c.successes, c.n])
            for s in x.slice_S:
                for d in x.deletions:
                    for stat, c in (("residue_given_kept", x.conditional(s, d)), ("residue_all", x.unconditional(s, d)),
                                    ("chunk_left_given_kept", x.stored(s, d))):
                        w.writerow([x.model_tag, s, stat, d, c.value, c.low, c.high, c.successes, c.n])


def _kind(v: ClaimVerdict, note: str) -> str:
    if v.verdict is Verdict.BY_CONSTRUCTION or "BY CONSTRUCTION" in note:
        return "by construction" if v.verdict is Verdict.BY_CONSTRUCTION else "measured (equality half by construction)"
    return "set by design" if v.verdict is Verdict.SET_BY_DESIGN else "measured"


def summary_section(nums: list[ResidueNumbers]) -> list[str]:
    """Per model, one row per claim: the paper's words and form, ours with interval and n, the
    verdict, and whether it is measured or holds by construction."""
    rows = [[x.model_tag, f.claim, f"{paper_claim(f.paper).quote} ({paper_claim(f.paper).form.value})", f.ours,
             f.verdict.fmt().split(" (")[0], _kind(f.verdict, f.ours)] for x in nums for f in residue_found(x)]
    return ["## Summary (paper 000 §3.3 → ours → verdict)", "",
            *_table(["model", "claim", "paper (form)", "ours (interval, n)", "verdict", "kind"], rows)]


def findings_section(nums: list[ResidueNumbers]) -> list[str]:
    """The judged claims per model, then the regression guarantees."""
    lines = ["## Findings (paper 000 §3.3, screened)", "", VERDICT_NOTE, ""]
    for x in nums:
        lines += [f"### {x.model_tag} (N={x.n} screened)", ""]
        lines += [f"{i}. {t}" for i, t in enumerate((t for g, t in residue_findings(x) if not g), start=1)]
        lines.append("")
    lines += ["## Regression guarantees (hold by construction)", "", GUARANTEE_NOTE, ""]
    for x in nums:
        lines += [f"### Regression guarantees — {x.model_tag}", ""]
        lines += [f"- {t}" for g, t in residue_findings(x) if g] or ["_(none applies to this run)_"]
        lines.append("")
    return lines


@REPORTS.register("frontier-residue", help="paper 000 §3.3 residue rows, screened (keep rate, residue, sensitivity)")
def residue_report(results_dir: Path, out: Path) -> Path:
    """Write report.md, residue.csv and numbers.json into ``out``."""
    man = read_manifest(results_dir)
    cfg = man.config
    by_model: dict[str, list[ResultRow]] = defaultdict(list)
    for r in read_rows(results_dir):
        by_model[r.model_tag].append(r)
    nums = [x for x in (residue_numbers(rs, cfg, t) for t, rs in sorted(by_model.items())) if x.n > 0]
    lines = ["# Residue report (paper 000 §3.3, screened)", "",
             f"Results dir: `{results_dir}` — study {man.study} version {man.study_version}, code {man.code_version}.",
             f"Config: screen S={cfg['screen_S']}, slice S={cfg['slice_S']}, k={cfg['k']}, modes={cfg['modes']}, "
             f"supersede thresholds {cfg['supersede']}, probe levels {cfg['probe_levels']} × {cfg['wordings']} "
             f"wording(s), seed {cfg['seed']}.", ""]
    for x in nums:
        run = man.runs.get(x.model_tag)
        wall = f", {run.seconds / 60:.1f} min of process wall time" if run else ""
        lines.append(f"- **{x.model_tag}**: {x.n} complete instances ({x.n_partial} partial, excluded){wall}.")
    lines.append("")
    if not nums:
        lines.append("No complete instance yet: nothing to report. Run or resume the study first.")
    else:
        lines += (summary_section(nums) + screen_section(nums) + residue_section(nums) + sensitivity_section(nums)
                  + findings_section(nums))
        _write_csv(nums, out / "residue.csv")
        (out / "numbers.json").write_text(json.dumps({x.model_tag: _numbers_json(x) for x in nums}, indent=1,
                                                     default=str), encoding="utf-8")
    p = out / "report.md"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p

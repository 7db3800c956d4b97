"""Report of the replay study (paper 002): Tables 1–4 in the paper's shape, exactness and
efficiency, the recomputation-vs-injection-position figure, and findings per claim.
Reads the results dir only; never calls a model; never prints a secret (replies stay in the rows)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from traceless.metrics import (
    CI,
    MIN_UNITS,
    ClaimVerdict,
    Verdict,
    claim_verdict,
    construction_verdict,
    count_verdict,
    mean_ci,
    paired_ci,
    pinned,
    ratio_ci,
)
from traceless.report import REPORTS
from traceless.studies import ResultRow, paper_claim, read_manifest, read_rows

__all__ = ["replay_report", "render_replay", "replay_claims", "ReplayClaim"]

REPLAY_BOOTSTRAP = 1000
"""Bootstrap resamples of a claim's interval (percentile, 95%), as the frontier report."""

PROBES = ("direct", "paraphrase", "jailbreak", "introspection", "completion", "task")
LABELS = {"B0": "B0 No-Forget", "B1": "B1 Memory-Delete", "B2": "B2 Forget-Instruction", "B3": "B3 Source-Redaction",
          "B4": "B4 Sanitize-no-Replay", "B5": "B5 Full-Reset", "B5p": "B5′ Full-Reset+prefix cache",
          "B6": "B6 String-Redaction", "B6b": "B6 +secret supplied", "B7": "B7 Selective-Replay",
          "B7s": "B7 (session-start ckpts)", "B8": "B8 IFC-only", "B9": "B9 IFC+Splice",
          "kv_excision": "KV span excision (ablation)"}


def _mean(xs: Iterable[Any]) -> float | None:
    v = [float(x) for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def _f(x: float | None, nd: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _wilcoxon(diffs: list[float]) -> float | None:
    d = [x for x in diffs if x is not None]
    if len(d) < 2:
        return None
    if all(abs(x) < 1e-12 for x in d):
        return 1.0
    from scipy.stats import wilcoxon

    try:
        return float(wilcoxon(d, zero_method="zsplit").pvalue)
    except ValueError:
        return None


def wilcoxon_min_p(n: int) -> float | None:
    """The smallest two-sided p the signed-rank test can give with ``n`` episodes: the p of the most
    extreme outcome (every difference nonzero, same sign). n=3 gives 0.25, so no result can be
    significant; p<0.05 needs n≥6 (2/2^6 = 0.031)."""
    if n < 2:
        return None
    from scipy.stats import wilcoxon

    return float(wilcoxon(np.arange(1.0, n + 1.0), zero_method="zsplit").pvalue)


def _indep_diffs(rows: list[ResultRow], op: str, name: str) -> list[float]:
    """Per-episode d(op, B5′′) − d(B5, B5′′) from the main grid and the long slice."""
    out: list[float] = []
    for r in rows:
        m = r.metrics
        if r.key.startswith("main/") and r.extra.get("operator") == op and f"dist_{name}" in m:
            out.append(float(m[f"dist_{name}"]) - float(m[f"dist_null_{name}"]))
        elif r.key.startswith("long/") and op in m.get("indep", {}):
            out.append(float(m["indep"][op][name]) - float(m["indep"]["null"][name]))
    return out


def _fig(sweep: dict[str, list[dict[str, Any]]], path: Path) -> dict[str, float]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r2: dict[str, float] = {}
    suites = sorted(sweep)
    fig, axes = plt.subplots(1, max(1, len(suites)), figsize=(4.2 * max(1, len(suites)), 3.4), squeeze=False)
    for ax, s in zip(axes[0], suites, strict=False):
        pts = sorted(sweep[s], key=lambda m: m["tau"])
        taus = [m["tau"] for m in pts]
        for op, style in (("B5", "o-"), ("B5p", "s--"), ("B7", "^-")):
            ax.plot(taus, [m[f"{op}_tokens"] for m in pts], style, label=LABELS[op].split(" ", 1)[0] if op != "B5p" else "B5′")
        if len(taus) >= 2:
            y = np.array([m["B7_tokens"] for m in pts], dtype=float)
            x = np.array(taus, dtype=float)
            a, b = np.polyfit(x, y, 1)
            ss = float(((y - (a * x + b)) ** 2).sum())
            tot = float(((y - y.mean()) ** 2).sum())
            r2[s] = 1.0 - ss / tot if tot > 0 else 1.0
        ax.set_title(f"{s} (B7 R²={r2.get(s, float('nan')):.3f})")
        ax.set_xlabel("injection step τ")
        ax.set_ylabel("recomputed tokens")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return r2


@REPORTS.register("replay", help="paper 002 tables, figure and findings")
def replay_report(results_dir: Path, out_dir: Path) -> Path:
    man = read_manifest(results_dir)
    lines = [f"# Execution-state unlearning (paper 002) — `{results_dir}`", ""]
    for tag, run in man.runs.items():
        rows = read_rows(results_dir, tag)
        lines += _one_model(tag, run.identity, rows, out_dir, int(man.config.get("seed", 0)))
    path = out_dir / "replay.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def render_replay(results_dir: str | Path) -> Path:
    """Write the report into ``results_dir/report`` (convenience)."""
    d = Path(results_dir)
    out = d / "report"
    out.mkdir(parents=True, exist_ok=True)
    return replay_report(d, out)


@dataclass
class _Main:
    """The main grid of one model: metrics per (suite, operator), and the probes each suite's
    reference world leaks (its false-positive floor), which any-leak leaves out."""

    by: dict[tuple[str, str], list[dict[str, Any]]]
    suites: list[str]
    ops: list[str]
    floors: dict[str, dict[str, float]]
    excluded: dict[str, list[str]]

    def any_leak(self, m: dict[str, Any], s: str) -> bool:
        return any(m.get(f"leak_{p}") for p in PROBES if p not in self.excluded[s])


def _main_grid(main: list[ResultRow]) -> _Main:
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in main:
        by[(r.extra["suite"], r.extra["operator"])].append({**r.metrics, "seconds": r.timing.get("seconds")})
    suites = sorted({s for s, _ in by})
    ops = [o for o in LABELS if any((s, o) in by for s in suites)]
    # false-positive floors in the reference world: probes the reference (B5) "leaks" are excluded
    floors = {s: {p: _mean(m.get(f"leak_{p}") for m in by.get((s, "B5"), [])) or 0.0 for p in PROBES} for s in suites}
    excluded = {s: [p for p in PROBES if floors[s][p] > 0] for s in suites}
    return _Main(by, suites, ops, floors, excluded)


def _one_model(tag: str, identity: dict[str, Any], rows: list[ResultRow], out_dir: Path, seed: int) -> list[str]:
    L: list[str] = [f"## Model `{tag}`", "", f"identity: `{identity}`; rows: {len(rows)}; "
                    f"code: {sorted({r.code_version for r in rows})}", ""]
    main = [r for r in rows if r.key.startswith("main/")]
    if not main:  # a long-slice-only run (main=false): no Tables 1–4 or findings to draw
        return L + _exactness_long_only(rows) + _long_section(rows, out_dir)
    g = _main_grid(main)
    L += _table1(g) + _table2(g) + _table3(g) + _exactness(g, rows) + _efficiency(g) + _table4(g, rows)
    sweep = _sweep(rows)
    L += _sweep_section(sweep, out_dir) + _long_section(rows, out_dir)
    return L + _findings(main, g.suites, g.any_leak, sweep, seed)


def _table1(g: _Main) -> list[str]:
    L = ["### Table 1 — deletion is not forgetting", "",
         "any-leak over the six probes (probes above the reference floor excluded), CAD and agreement vs the "
         "target-excluded reference (B5), preserved utility, recomputed tokens and transitions, latency p50.", ""]
    head = ["suite", "operator", "n", "any-leak", "Leak@5", "CAD", "agree", "utility", "recomp. tok", "B5/op tok",
            "transitions", "bound met", "p50 s", "receipt ok"]
    t1 = []
    for s in g.suites:
        b5tok = _mean(m["recomputed_tokens"] for m in g.by.get((s, "B5"), []))
        for o in g.ops:
            ms = g.by.get((s, o), [])
            if not ms:
                continue
            tok = _mean(m["recomputed_tokens"] for m in ms)
            bm = [m.get("bound_met") for m in ms if m.get("bound_met") is not None]
            t1.append([s, LABELS[o], str(len(ms)), _f(_mean(g.any_leak(m, s) for m in ms)),
                       _f(_mean(m["leak5"] for m in ms)),
                       _f(_mean(m["cad"] for m in ms)), _f(_mean(m["agreement"] for m in ms)),
                       _f(_mean(m.get("utility") for m in ms)), _f(tok, 0),
                       _f(b5tok / tok if tok and b5tok else None, 1), _f(_mean(m["transitions"] for m in ms), 1),
                       f"{sum(bool(x) for x in bm)}/{len(bm)}" if bm else "–",
                       _f(float(np.median([m["seconds"] for m in ms])), 2),
                       _f(_mean(m["receipt_passed"] for m in ms))])
    return L + _table(head, t1) + [""]


def _table2(g: _Main) -> list[str]:
    L = ["### Table 2 — elicitation and stochastic audits", "",
         "Per-probe leak rate (secret in the greedy reply); `(x)` marks a probe excluded because the reference "
         "world leaks it (nonzero false-positive floor). Leak@5 = any of 5 samples at T=0.7 leaks.", ""]
    t2 = []
    for s in g.suites:
        for o in g.ops:
            ms = g.by.get((s, o), [])
            if not ms:
                continue
            cells = [(_f(_mean(m.get(f"leak_{p}") for m in ms)) + (" (x)" if p in g.excluded[s] else ""))
                     for p in PROBES]
            t2.append([s, LABELS[o], *cells, _f(_mean(g.any_leak(m, s) for m in ms)),
                       _f(_mean(m["leak5"] for m in ms))])
    L += _table(["suite", "operator", *PROBES, "any", "Leak@5"], t2) + [""]
    return L + ["False-positive floors (reference world): " + "; ".join(
        f"{s}: " + ", ".join(f"{p}={g.floors[s][p]:.2f}" for p in PROBES) for s in g.suites), ""]


def _table3(g: _Main) -> list[str]:
    pref = [(s, o) for (s, o) in g.by if any("behav_revoked" in m for m in g.by[(s, o)])]
    L = ["### Table 3 — behavioural extraction (string-free)", "",
         "Preference episodes: rate at which a forced choice (next-token logits over option letters) picks the "
         "revoked option; residue = rate − reference rate; string leak = the brand appears in a task reply.", ""]
    t3 = []
    for s in sorted({s for s, _ in pref}):
        ref = _mean(m.get("behav_revoked") for m in g.by.get((s, "B5"), []))
        for o in g.ops:
            ms = [m for m in g.by.get((s, o), []) if "behav_revoked" in m]
            if not ms:
                continue
            rate = _mean(m["behav_revoked"] for m in ms)
            t3.append([s, LABELS[o], str(len(ms)), _f(rate), _f(None if rate is None or ref is None else rate - ref),
                       _f(_mean(m.get("behav_string_leak") for m in ms))])
    return L + _table(["suite", "operator", "n", "acts on revoked", "residue vs ref", "string leak"], t3) + [""]


def _exactness(g: _Main, rows: list[ResultRow]) -> list[str]:
    L = ["### Exactness and efficiency", ""]
    stoch = [r for r in rows if r.key.startswith("stoch/")]
    if stoch:
        eq = sum(bool(r.metrics["equal_tokens"]) for r in stoch)
        steps_eq = sum(r.metrics["equal_steps"] for r in stoch)
        steps = sum(r.metrics["steps"] for r in stoch)
        L += [f"- Matched seeds at T={stoch[0].metrics['temperature']}: B7 reproduces B5 token for token on "
              f"{eq}/{len(stoch)} whole replayed episodes ({steps_eq}/{steps} steps)."]
    for o in ("B7", "B6", "B3"):
        ms = [m for s in g.suites for m in g.by.get((s, o), [])]
        if ms:
            L.append(f"- Matched-seed draws (direct probe, T=0.7): {o} equals B5 in "
                     f"{_f(_mean(m['matched_seed_equal'] for m in ms))} of draws (n={len(ms)} episodes).")
    for o in ("B7", "B6"):
        n = len(_indep_diffs(rows, o, "edit"))
        if n:
            floor = wilcoxon_min_p(n)
            ps = [f"{name} p={_f(_wilcoxon(_indep_diffs(rows, o, name)), 3)}"
                  for name in ("edit", "jaccard", "action", "leak")]
            L.append(f"- Independent seeds, Wilcoxon signed-rank of d({o}, B5′′) − d(B5, B5′′) over {n} episodes: "
                     + ", ".join(ps) + f" (smallest attainable p with n={n}: {_f(floor, 3)}"
                     + ("; n is too small for p<0.05 — run ≥6 episodes" if floor is None or floor >= 0.05 else "")
                     + "; non-significance is not proof of equivalence).")
    return L + [""]


def _efficiency(g: _Main) -> list[str]:
    head = ["suite", "B5 tok", "B5′ tok", "B7 tok", "B5/B7", "B5′/B7", "B5 s", "B5′ s", "B7 s", "B5/B7 time",
            "B5′/B7 time"]
    tr = []
    for s in g.suites:
        def mt(o: str, k: str, s: str = s) -> float | None:
            return _mean(m[k] for m in g.by.get((s, o), []))
        t5, t5p, t7 = mt("B5", "recomputed_tokens"), mt("B5p", "recomputed_tokens"), mt("B7", "recomputed_tokens")
        s5, s5p, s7 = mt("B5", "seconds"), mt("B5p", "seconds"), mt("B7", "seconds")
        tr.append([s, _f(t5, 0), _f(t5p, 0), _f(t7, 0), _f(t5 / t7 if t5 and t7 else None, 2),
                   _f(t5p / t7 if t5p and t7 else None, 2), _f(s5), _f(s5p), _f(s7),
                   _f(s5 / s7 if s5 and s7 else None, 2), _f(s5p / s7 if s5p and s7 else None, 2)])
    return _table(head, tr) + [""]


def _table4(g: _Main, rows: list[ResultRow]) -> list[str]:
    L = ["### Table 4 — ablations", ""]
    t4 = []
    for s in g.suites:
        for o in ("B0", "B4", "kv_excision", "B7", "B7s"):
            ms = g.by.get((s, o), [])
            if ms:
                t4.append([s, LABELS[o], _f(_mean(g.any_leak(m, s) for m in ms)), _f(_mean(m["cad"] for m in ms)),
                           _f(_mean(m["recomputed_tokens"] for m in ms), 0),
                           _f(float(np.median([m["seconds"] for m in ms])))])
    L += _table(["suite", "operator", "any-leak", "CAD", "recomp. tok", "p50 s"], t4) + [""]
    depth = sorted((r.metrics for r in rows if r.key.startswith("depth/")), key=lambda m: m["depth"])
    if depth:
        L += ["Derivation depth (toolsandbox; restatement steps after the target):", ""]
        L += _table(["depth", "B3 any-leak", "B3 CAD", "B7 any-leak", "B7 CAD", "ref any-leak"],
                    [[str(m["depth"]), _f(float(m["B3_any_leak"])), _f(m["B3_cad"]), _f(float(m["B7_any_leak"])),
                      _f(m["B7_cad"]), _f(float(m["ref_any_leak"]))] for m in depth]) + [""]
    return L


def _sweep(rows: list[ResultRow]) -> dict[str, list[dict[str, Any]]]:
    """The injection-step sweep's metrics per suite."""
    sweep: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.key.startswith("sweep/"):
            sweep[r.extra["suite"]].append(r.metrics)
    return sweep


def _sweep_section(sweep: dict[str, list[dict[str, Any]]], out_dir: Path) -> list[str]:
    """The recomputation-vs-injection-step figure and its numbers per suite."""
    if not sweep:
        return []
    fig = out_dir / "replay_recompute_vs_tau.png"
    r2 = _fig(sweep, fig)
    L = [f"![recomputed tokens vs injection step]({fig.name})", ""]
    for s, pts in sorted(sweep.items()):
        pts = sorted(pts, key=lambda m: m["tau"])
        L.append(f"- {s}: B7 tokens by τ " + ", ".join(f"{m['tau']}→{m['B7_tokens']}" for m in pts)
                 + f"; B5 {pts[0]['B5_tokens']}…{pts[-1]['B5_tokens']}; cost ratio B7/B5 "
                 f"{pts[0]['ratio_B7_B5']:.2f}→{pts[-1]['ratio_B7_B5']:.2f}; linear R²={r2.get(s, float('nan')):.3f}; "
                 f"bound met {sum(bool(m['bound_met']) for m in pts)}/{len(pts)}; B7≡B5 "
                 f"{sum(bool(m['B7_equal_B5']) for m in pts)}/{len(pts)}")
    return L + [""]


def _label(v: ClaimVerdict) -> str:
    return {Verdict.BY_CONSTRUCTION: "by construction", Verdict.SET_BY_DESIGN: "set by design"}.get(v.verdict, "measured")


def summary_section(claims: list[ReplayClaim]) -> list[str]:
    """One row per claim: the paper's words and form, ours with interval and n, the verdict, and
    whether it is measured, holds by construction or is set by our design."""
    rows = [[c.claim, f"{paper_claim(c.paper).quote} ({paper_claim(c.paper).form.value})", c.numbers,
             c.verdict.verdict.value, _label(c.verdict)] for c in claims]
    return (["### Summary (paper 002 → ours → verdict)", ""]
            + _table(["claim", "paper (form)", "ours (interval, n)", "verdict", "kind"], rows) + [""])


def _findings(main: list[ResultRow], suites: list[str], any_leak: Callable[[dict[str, Any], str], bool],
              sweep: dict[str, list[dict[str, Any]]], seed: int) -> list[str]:
    """Paper 002's claims, one verdict each (``claim_verdict`` on a bootstrap interval over the
    (suite, episode) units), then our numbers."""
    L = ["### Findings (paper claim → verdict → our numbers)", "",
         "REPRODUCED: the 95% interval over (suite, episode) units lies in the paper's region; CONTRADICTED: it "
         f"excludes the paper's direction — both only with at least {MIN_UNITS} units (`traceless.metrics."
         "MIN_UNITS`); INCONCLUSIVE: fewer, or the interval admits both (with the n that decides it with 80% power "
         "if the true value is the observed one); NOT TESTABLE: no data, or a ceiling/floor or failed precondition "
         "(named). Paired claims compare operators on the same episode: leak differences by Newcombe's interval "
         "for paired proportions, continuous ones by the percentile bootstrap; 'in every cell' claims by count (one "
         "counterexample contradicts them at any n; none reproduces them only on at least "
         f"{MIN_UNITS} units).", ""]
    claims = replay_claims(main, suites, any_leak, sweep, seed)
    L = summary_section(claims) + L
    for i, c in enumerate([c for c in claims if not c.guarantee], start=1):
        L.append(f"{i}. {c.line()}")
    L += ["", "### Regression guarantees (hold by construction)", "",
          "BY CONSTRUCTION: the check holds because of how the operator or the engine is built (greedy seeded "
          "decoding, what was written where); a regression guarantee (one violation is CONTRADICTED: a bug), "
          "never counted as a reproduction.", ""]
    L += [f"- {c.line()}" for c in claims if c.guarantee] or [
        "_(none applies to this run)_"]
    return L + [""]


class ReplayClaim(BaseModel):
    """One paper claim judged on a run."""

    claim: str
    """The paper's claim, in its words where short."""
    verdict: ClaimVerdict
    """REPRODUCED / CONTRADICTED / INCONCLUSIVE / NOT TESTABLE, from ``claim_verdict``."""
    numbers: str
    """Our statistic with its interval and the supporting counts."""
    guarantee: bool = False
    """Holds by construction: a regression guarantee, rendered in its own section."""
    paper: str
    """Key of the paper claim it tests (``traceless.studies.PAPER_CLAIMS``: quote and form)."""

    def line(self) -> str:
        """``claim — **VERDICT**. numbers Reading.``"""
        return f"{self.claim} — **{self.verdict.fmt()}**. {self.numbers} {paper_claim(self.paper).reading()}."


def _units(main: list[ResultRow], op: str, value: Callable[[dict[str, Any], str], float | None]
           ) -> dict[tuple[str, str], float]:
    """value(metrics, suite) of operator ``op`` per (suite, episode) unit (units where it is None left out)."""
    out: dict[tuple[str, str], float] = {}
    for r in main:
        if r.extra["operator"] == op:
            v = value(r.metrics, r.extra["suite"])
            if v is not None:
                out[(r.extra["suite"], str(r.extra.get("episode")))] = float(v)
    return out


def _paired(main: list[ResultRow], a: str, b: str | None, value: Callable[[dict[str, Any], str], float | None],
            combine: Callable[[float, float], float] = lambda x, y: x - y) -> list[float]:
    """Per (suite, episode) unit both operators ran: combine(value(a), value(b)); value(a) when b is None."""
    ua = _units(main, a, value)
    if b is None:
        return [ua[k] for k in sorted(ua)]
    ub = _units(main, b, value)
    return [combine(ua[k], ub[k]) for k in sorted(ua) if k in ub]


def _pci(main: list[ResultRow], a: str, b: str, value: Callable[[dict[str, Any], str], float | None]) -> CI | None:
    """Newcombe's interval of mean(a) − mean(b) over the binary per-unit outcomes."""
    ua, ub = _units(main, a, value), _units(main, b, value)
    keys = sorted(k for k in ua if k in ub)
    return paired_ci([bool(ua[k]) for k in keys], [bool(ub[k]) for k in keys]) if keys else None


def _paired_ci(main: list[ResultRow], a: str, b: str, value: Callable[[dict[str, Any], str], float | None],
               rng: np.random.Generator) -> CI | None:
    """mean(a) − mean(b) over paired units: Newcombe's interval when both are per-unit binaries
    (the rule's interval for a paired difference of proportions), else the bootstrap."""
    ua, ub = _units(main, a, value), _units(main, b, value)
    if all(v in (0.0, 1.0) for v in (*ua.values(), *ub.values())):
        return _pci(main, a, b, value)
    return _ci(_paired(main, a, b, value), rng)


def _ci(xs: list[float], rng: np.random.Generator) -> CI | None:
    """The mean over units with the interval the rule judges (exact for per-unit binaries)."""
    return mean_ci(xs, rng, n_resamples=REPLAY_BOOTSTRAP) if xs else None


def _show(ci: CI | None) -> str:
    return "no data" if ci is None else f"{ci.fmt()} (n={ci.n})"


def replay_claims(main: list[ResultRow], suites: list[str], any_leak: Callable[[dict[str, Any], str], bool],
                  sweep: dict[str, list[dict[str, Any]]], seed: int = 0) -> list[ReplayClaim]:
    """The claims of paper 002 (Tables 1–4, §Exactness) that a replay run can judge."""
    rng = np.random.default_rng(seed)

    def al(m: dict[str, Any], s: str) -> float:
        return float(any_leak(m, s))

    # the leak claims need something to forget: without forgetting (B0) the agent must leak more
    # than the target-excluded reference, else every operator is trivially "as leaky as B0"
    b0 = _paired(main, "B0", "B5", al)
    leaks = bool(b0) and float(np.mean(b0)) > 0
    no_leak = (f"any-leak B0 − B5 = {_f(_mean(b0))} (floor): nothing leaked under the control B0, so nothing "
               "to forget")
    return (_memory_claims(main, al, leaks, no_leak) + _leak_claims(main, al, leaks, no_leak)
            + _behaviour_claims(main, rng) + _replay_exact_claims(main, al)
            + _cost_claims(main, sweep, rng))


_Value = Callable[[dict[str, Any], str], float]


def _memory_claims(main: list[ResultRow], al: _Value, leaks: bool, no_leak: str) -> list[ReplayClaim]:
    """B1 (memory deletion) against B0, split by whether the target was written to memory."""
    mem = _units(main, "B0", lambda m, s: None if "copies_after" not in m else float(m["copies_after"].get("memory", 0)))
    d10 = dict(zip(sorted(k for k in _units(main, "B1", al) if k in _units(main, "B0", al)),
                   _paired(main, "B1", "B0", al), strict=True))
    unwritten = [k for k in d10 if mem.get(k) == 0]
    written = [k for k in d10 if k not in unwritten]
    out = [ReplayClaim(
        claim="Memory deletion leaves leakage unchanged (B1 = B0 in every cell)", paper="002.memory_delete",
        verdict=count_verdict(sum(d10[k] != 0 for k in written), len(written)) if leaks else claim_verdict(
            None, testable=False, why_not=no_leak),
        numbers=f"B1 differs from B0 in {sum(d10[k] != 0 for k in written)} of {len(written)} units whose target was "
                f"written to memory ({len(unwritten)} units without it are a guarantee below).")]
    if unwritten:
        out.append(ReplayClaim(
            claim="B1 ≡ B0 where the target was never written to memory", guarantee=True, paper="002.memory_delete",
            verdict=construction_verdict(sum(d10[k] != 0 for k in unwritten), len(unwritten),
                                         "B1 deletes memory records only, and none held the target"),
            numbers=f"any-leak B1 ≠ B0 in {sum(d10[k] != 0 for k in unwritten)} of {len(unwritten)} such units "
                    f"({', '.join(sorted({k[0] for k in unwritten}))})."))
    return out


def _leak_claims(main: list[ResultRow], al: _Value, leaks: bool, no_leak: str) -> list[ReplayClaim]:
    """B2, B3 and B8 leak above the reference."""
    out = []
    for op, claim, key in (
            ("B2", "Forget-instructions collapse under elicitation (B2 leaks above the reference)", "forget_instruction"),
            ("B3", "Source redaction leaks through derived artifacts (B3 leaks above the reference)", "source_redaction"),
            ("B8", "IFC-only leaks (B8 above the reference)", "ifc_only")):
        d = _pci(main, op, "B5", al)
        out.append(ReplayClaim(claim=claim, paper=f"002.{key}", verdict=claim_verdict(d, gt=0, testable=leaks, why_not=no_leak),
                               numbers=f"any-leak {op} − B5 = {_show(d)}."))
    return out


def _behaviour_claims(main: list[ResultRow], rng: np.random.Generator) -> list[ReplayClaim]:
    """Table 3: B3 and B0 still act on a revoked preference."""

    def beh(m: dict[str, Any], s: str) -> float | None:
        return None if m.get("behav_revoked") is None else float(m["behav_revoked"])

    b0b = _paired(main, "B0", "B5", beh)
    ref = _units(main, "B5", beh)
    ceiling = pinned("acts-on-revoked B5 (reference)", min(ref.values()) if ref else None, "rise")
    out = []
    for op in ("B3", "B0"):
        d = _paired_ci(main, op, "B5", beh, rng)
        acts = op == "B0" or (bool(b0b) and float(np.mean(b0b)) > 0)
        out.append(ReplayClaim(
            claim=f"{op} still acts on a revoked preference without its string (residue above the reference)",
            paper=f"002.behaviour_{op}",
            verdict=claim_verdict(d, gt=0, testable=d is not None and acts and ceiling is None,
                                  why_not="no preference episodes" if d is None else ceiling or
                                  "B0 shows no residue above the reference (floor): nothing to forget"),
            numbers=f"acts-on-revoked {op} − B5 = {_show(d)}."))
    return out


def _replay_exact_claims(main: list[ResultRow], al: _Value) -> list[ReplayClaim]:
    """B7 replays exactly what B5 recomputes (a guarantee of greedy matched-seed decoding)."""
    d7 = _paired(main, "B7", "B5", al)
    cad7 = _paired(main, "B7", None, lambda m, s: float(m["cad"]))
    return [ReplayClaim(
        claim="Selective replay matches the full reset (B7: any-leak and CAD as B5's)", guarantee=True,
        paper="002.replay_exact",
        verdict=construction_verdict(sum(x != 0 for x in d7) + sum(x != 0 for x in cad7), len(cad7),
                                     "the main grid decodes greedily with matched seeds, so B7 replays exactly what "
                                     "B5 recomputes" + ("; nothing leaked, so the any-leak half is 0 = 0" if not
                                                        any(_paired(main, "B5", None, al)) else "")),
        numbers=f"any-leak B7 ≠ B5 in {sum(x != 0 for x in d7)} of {len(d7)} units; CAD(B7, B5) > 0 in "
                f"{sum(x != 0 for x in cad7)} of {len(cad7)}.")]


def _cost_claims(main: list[ResultRow], sweep: dict[str, list[dict[str, Any]]],
                 rng: np.random.Generator) -> list[ReplayClaim]:
    """B4's over-deletion, B7's recomputation saving and its slope in the injection step."""

    def tok(m: dict[str, Any], s: str) -> float:
        return float(m["recomputed_tokens"])

    out: list[ReplayClaim] = []
    cad4 = _ci(_paired(main, "B4", None, lambda m, s: float(m["cad"])), rng)
    out.append(ReplayClaim(claim="Sanitize-no-replay over-deletes (B4 CAD > 0)", paper="002.b4_overdelete", verdict=claim_verdict(cad4, gt=0),
                           numbers=f"CAD(B4, B5) = {_show(cad4)}."))
    r = _ci([x for x in _paired(main, "B5", "B7", tok, lambda a, b: a / b if b > 0 else math.nan)
             if not math.isnan(x)], rng)
    out.append(ReplayClaim(claim=f"B7 recomputes fewer tokens than B5 (paper: up to {PAPER_LONG_RATIO}× on long "
                                 "trajectories)", paper="002.fewer_tokens", verdict=claim_verdict(r, gt=1),
                           numbers=f"B5/B7 recomputed tokens per episode = {_show(r)}."))
    slopes = []
    for s in sorted(sweep):
        pts = sorted(sweep[s], key=lambda m: m["tau"])
        if len({m["tau"] for m in pts}) >= 2:
            slopes.append(float(np.polyfit([m["tau"] for m in pts], [m["B7_tokens"] for m in pts], 1)[0]))
    sl = _ci(slopes, rng)
    out.append(ReplayClaim(claim="Later injection lowers B7 recomputation (slope of B7 tokens in τ < 0)",
                           paper="002.slope",
                           verdict=claim_verdict(sl, lt=0, testable=bool(slopes), why_not="no injection sweep"),
                           numbers=f"slope per suite (tokens per step) = {_show(sl)}; units are suites."))
    return out


def _exactness_long_only(rows: list[ResultRow]) -> list[str]:
    L = ["### Exactness (independent seeds)", ""]
    for o in ("B7", "B6"):
        d = _indep_diffs(rows, o, "edit")
        if d:
            floor = wilcoxon_min_p(len(d))
            ps = [f"{name} p={_f(_wilcoxon(_indep_diffs(rows, o, name)), 3)}" for name in ("edit", "jaccard", "action", "leak")]
            zero = all(abs(x) < 1e-12 for name in ("edit", "jaccard", "action", "leak") for x in _indep_diffs(rows, o, name))
            L.append(f"- Wilcoxon signed-rank of d({o}, B5′′) − d(B5, B5′′) over {len(d)} episodes: " + ", ".join(ps)
                     + f" (smallest attainable p with n={len(d)}: {_f(floor, 3)}"
                     + ("; every difference is exactly 0" if zero else "") + ").")
    return L + [""]


PAPER_LONG_RATIO = 9.3
"""Paper 002: B7 recomputes 9.3× fewer tokens than B5 on LongMemEval (133 vs 1235)."""


def _r2(x: list[float], y: list[float]) -> float | None:
    if len(set(x)) < 2:
        return None
    a, b = np.polyfit(np.array(x), np.array(y), 1)
    ys = np.array(y)
    tot = float(((ys - ys.mean()) ** 2).sum())
    return 1.0 - float(((ys - (a * np.array(x) + b)) ** 2).sum()) / tot if tot > 0 else 1.0


def _long_section(rows: list[ResultRow], out_dir: Path) -> list[str]:
    """Long episodes with late targets: B5/B7 recomputed-token and wall-time ratios (vs the paper's
    9.3×), the backend-counted bound check, and the post-target-independence / oracle ablation."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.key.startswith("long/"):
            by[r.extra["suite"]].append(r.metrics)
    if not by:
        return []
    L = ["### Long episodes with late targets", "",
         f"Recomputed tokens (prefill + decode) and operator wall time, means over episodes; the paper reports "
         f"B5/B7 = {PAPER_LONG_RATIO}× on LongMemEval. Bound met = the backend ran exactly T−τ+1 replies plus the "
         "session summaries (counted at the backend, not by the operator).", ""]
    head = ["suite", "n", "T", "τ", "B5 tok", "B7 tok", "B5/B7 tok", "B5 s", "B7 s", "B5/B7 time",
            "B5 decodes", "B7 decodes", "bound met", "B7 ≡ B5"]
    t = []
    for s, ms in sorted(by.items()):
        def mean(k: str, ms: list[dict[str, Any]] = ms) -> float:
            return float(np.mean([m[k] for m in ms]))
        t.append([s, str(len(ms)), _f(mean("steps"), 0), _f(mean("tau"), 1), _f(mean("B5_tokens"), 0),
                  _f(mean("B7_tokens"), 0), _f(mean("B5_tokens") / mean("B7_tokens"), 1), _f(mean("B5_seconds")),
                  _f(mean("B7_seconds")), _f(mean("B5_seconds") / mean("B7_seconds"), 1),
                  _f(mean("B5_backend_decodes"), 1), _f(mean("B7_backend_decodes"), 1),
                  f"{sum(bool(m['bound_met']) for m in ms)}/{len(ms)}", f"{sum(bool(m['B7_equal_B5']) for m in ms)}/{len(ms)}"])
    L += _table(head, t) + [""]
    L += ["**Post-target independence / attribution oracle (ablation).** Independent = post-target steps whose "
          "reply and summary the reference decodes exactly as the recording did (ground truth). B7o re-enters the "
          "steps an oracle certifies (a fraction of the independent ones) from the recording without decoding; "
          "at fraction 0 it is B7. Exact = final tokens identical to B5.", ""]
    pts = [(s, p) for s, ms in by.items() for m in ms for p in m["oracle"]["points"]]
    t = []
    for s in sorted(by):
        ms = by[s]
        ind = float(np.mean([m["oracle"]["independence"] for m in ms]))
        for f in sorted({p["fraction"] for s2, p in pts if s2 == s}):
            ps = [p for s2, p in pts if s2 == s and p["fraction"] == f]
            t.append([s, _f(ind), _f(f), _f(float(np.mean([p["certified_share"] for p in ps]))),
                      _f(float(np.mean([p["decode_tokens"] for p in ps])), 0), _f(float(np.mean([p["tokens"] for p in ps])), 0),
                      _f(float(np.mean([p["transitions"] for p in ps])), 1), _f(float(np.median([p["seconds"] for p in ps]))),
                      f"{sum(bool(p['equal_B5']) for p in ps)}/{len(ps)}"])
    L += _table(["suite", "independence", "oracle fraction", "certified share", "B7o decode tok", "B7o tok",
                 "transitions", "p50 s", "exact"], t) + [""]
    r2s = [_r2([p["certified_share"] for p in m["oracle"]["points"]], [p["decode_tokens"] for p in m["oracle"]["points"]])
           for ms in by.values() for m in ms]
    fits = [x for x in r2s if x is not None]
    L += [f"Decode tokens vs certified share, linear fit per episode: mean R²={_f(_mean(fits), 3)} over {len(fits)} "
          f"episodes with independent steps ({len(r2s) - len(fits)} had none, so the oracle changes nothing there); "
          "transitions do not change with the oracle (it saves decoding, not transitions).", ""]
    allm = [m for ms in by.values() for m in ms]
    t5 = float(np.mean([m["B5_tokens"] for m in allm]))
    t7 = float(np.mean([m["B7_tokens"] for m in allm]))
    L += [f"Long episodes, all suites: B7 recomputes {t5 / t7:.1f}× fewer tokens than B5 (paper: {PAPER_LONG_RATIO}×), "
          f"wall time {float(np.mean([m['B5_seconds'] for m in allm])) / float(np.mean([m['B7_seconds'] for m in allm])):.1f}× "
          f"less; bound met {sum(bool(m['bound_met']) for m in allm)}/{len(allm)}.", ""]
    v, text = long_ratio_verdict(allm)
    summary = [ReplayClaim(claim=f"long episodes, all suites pooled: B5/B7 (paper up to {PAPER_LONG_RATIO}×)",
                           paper="002.long_ratio", verdict=v, numbers=text.split(" over episodes")[0])]
    L += [f"- B7 recomputes up to {PAPER_LONG_RATIO}× fewer tokens than B5 on long trajectories (all suites pooled) — "
          f"**{v.fmt()}**. {text}"]
    if "longmemeval" in by and len(by) > 1:  # the paper does not name its suite; its LongMemEval B5 is 1330
        v, text = long_ratio_verdict(by["longmemeval"])
        summary.append(ReplayClaim(claim="long episodes, LongMemEval alone: B5/B7", paper="002.long_ratio", verdict=v,
                                   numbers=text.split(" over episodes")[0]))
        L += [f"- On LongMemEval alone (the paper does not say which suite its 133 vs 1235 is from) — "
              f"**{v.fmt()}**. {text}"]
    L += [f"- B7 runs exactly T−τ+1 replies (counted at the backend) and ends token-identical to B5 — "
          f"**{_long_guarantee(allm).fmt()}**. bound met {sum(bool(m['bound_met']) for m in allm)}/{len(allm)}, "
          f"B7 ≡ B5 {sum(bool(m['B7_equal_B5']) for m in allm)}/{len(allm)} (a regression guarantee, not a "
          f"reproduction). {paper_claim('002.long_bound').reading()}.", ""]
    g = _long_guarantee(allm)
    summary.append(ReplayClaim(claim="B7 runs exactly T−τ+1 replies and ends token-identical to B5", paper="002.long_bound",
                               verdict=g, numbers=f"bound met {sum(bool(m['bound_met']) for m in allm)}/{len(allm)} "
                               f"(n={len(allm)})", guarantee=True))
    return L + [s.replace("### Summary", "### Long episodes: summary") for s in summary_section(summary)]


def structural_max(steps: list[float], taus: list[float]) -> float:
    """The largest B5/B7 recomputation ratio episodes of these lengths and target steps allow
    when every step costs the same: B5 recomputes T steps, B7 the T−τ+1 from the target on, so
    Σ T / Σ (T−τ+1) over the episodes (T/(T−τ+1) for one)."""
    return sum(steps) / sum(t - tau + 1 for t, tau in zip(steps, taus, strict=True))


def long_ratio_verdict(ms: list[dict[str, Any]], seed: int = 0) -> tuple[ClaimVerdict, str]:
    """The paper's "up to 9×" (9.3×) against the long episodes: SET BY DESIGN. B7 recomputes the
    T−τ+1 steps from the target on and B5 all T, so B5/B7 is bounded by the structural maximum
    (``structural_max``) of our T and τ (placed by ``long_min_ratio``), and the measured ratio is
    a design-determined fraction of it: a ceiling or point read of the paper's one value compares
    our design choice, not the method. The text shows the measurement, its share of the maximum
    and the per-episode maxima."""
    steps, taus = [float(m["steps"]) for m in ms], [float(m["tau"]) for m in ms]
    top = structural_max(steps, taus)
    ci = ratio_ci([float(m["B5_tokens"]) for m in ms], [float(m["B7_tokens"]) for m in ms],
                  np.random.default_rng(seed), n_resamples=REPLAY_BOOTSTRAP)
    per = sorted({t / (t - tau + 1) for t, tau in zip(steps, taus, strict=True)})
    reach = ("" if top >= PAPER_LONG_RATIO else f"; {PAPER_LONG_RATIO}× is out of reach by design: at most "
             f"{top:.1f}×, run T ≥ 32 with late targets (--set long_steps=32 --set long_min_ratio=10 --set long_pad=true)")
    why = (f"T={_span(steps)} and τ={_span(taus)} are ours: B5/B7 ≤ Σ T/Σ(T−τ+1) = {top:.1f}× (per-episode maxima "
           + ", ".join(f"{x:.2f}" for x in per) + f"); measured {ci.value / top:.0%} of it{reach}")
    text = (f"B5/B7 = {_show(ci)} over episodes beside its structural maximum {top:.1f}× (equal cost per step). "
            f"{paper_claim('002.long_ratio').reading()}.")
    return ClaimVerdict(verdict=Verdict.SET_BY_DESIGN, n=ci.n, reason=why, ci=ci), text


def _span(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.0f}" if lo == hi else f"{lo:.0f}–{hi:.0f}"


def _long_guarantee(ms: list[dict[str, Any]]) -> ClaimVerdict:
    bad = sum(not m["bound_met"] for m in ms) + sum(not m["B7_equal_B5"] for m in ms)
    return construction_verdict(bad, len(ms), "B7 replays from the target's step with greedy seeded decoding")

"""The paper claims the study reports test, each with the sentence it quotes and the form that
sentence gives it (``traceless.metrics.PaperClaim``). Keys are ``<paper>.<claim>``; the reports
look their claims up here, so a claim's reading is stated once, next to its source."""

from __future__ import annotations

from traceless.metrics import ClaimForm, PaperClaim

__all__ = ["PAPER_CLAIMS", "paper_claim"]

_F = ClaimForm
_T1 = "Table 1, 'Deletion is Not Forgetting'"
PAPER_CLAIMS: dict[str, PaperClaim] = {
    # paper 002: execution-state unlearning (replay report)
    "002.memory_delete": PaperClaim(paper="002", where=_T1, form=_F.EQUALITY,
                                    quote="B1 Memory-Delete equals B0 No-Forget in every cell"),
    "002.forget_instruction": PaperClaim(paper="002", where="abstract", form=_F.DIRECTION, quote=(
        "instruction-based forgetting collapses under elicitation (Leak@probes = 1.00)")),
    "002.source_redaction": PaperClaim(paper="002", where=_T1, form=_F.DIRECTION,
                                       quote="B3 Source-Redaction leaks through summaries and plans"),
    "002.ifc_only": PaperClaim(paper="002", where=_T1, form=_F.DIRECTION, quote=(
        "B8 IFC-only blocks identifier sinks but retains free-text leakage (0.92–1.00)")),
    "002.behaviour_B3": PaperClaim(paper="002", where="introduction", form=_F.DIRECTION, quote=(
        "80% of source-redacted episodes still act on a revoked preference while emitting its string zero "
        "times")),
    "002.behaviour_B0": PaperClaim(paper="002", where="'Behavioral Extraction'", form=_F.DIRECTION, quote=(
        "100% of episodes retain revoked-preference influence for B0, B1, B2, and B6 despite 0.00 string "
        "leakage")),
    "002.replay_exact": PaperClaim(paper="002", where=_T1, form=_F.EQUALITY, quote=(
        "let B7 Selective-Replay match B5 Full-Reset exactly: any-leak 0, CAD 0, agreement 1.0")),
    "002.b4_overdelete": PaperClaim(paper="002", where=_T1, form=_F.DIRECTION,
                                    quote="B4 Sanitize-no-Replay over-deletes (CAD 0.22)"),
    "002.fewer_tokens": PaperClaim(paper="002", where="results", form=_F.DIRECTION, quote=(
        "Selective replay matches the full-reset reference while recomputing fewer tokens")),
    "002.slope": PaperClaim(paper="002", where="'Exactness and Efficiency'", form=_F.DIRECTION, quote=(
        "Later injection lowers B7 recomputation linearly (R2=1.000; LongMemEval 1218→162 tokens versus "
        "B5’s constant 1330)")),
    "002.long_ratio": PaperClaim(paper="002", where="abstract, summary, introduction; Table 1", form=_F.CEILING,
                                 quote="recomputing up to 9× fewer tokens … 9.3× fewer recomputed tokens (133 vs. 1235)",
                                 set_by="T, τ (long_min_ratio) and the per-step cost"),
    "002.long_bound": PaperClaim(paper="002", where="abstract", form=_F.EQUALITY, quote=(
        "exact unlearning requires at least $T-τ+1$ recomputed transitions … Provenance-Guided Selective "
        "Replay attains this bound")),
    # paper 000: deployment-time memorization, §3.3 (frontier-residue report)
    "000.raw_only_noop": PaperClaim(paper="000", where="§3.3", form=_F.EQUALITY, quote=(
        "at $(S{=}1,\\texttt{raw\\_only})$ deletion is statistically indistinguishable from noop in the summary "
        "tier on both models ($\\mathrm{FRS}_{\\mathrm{worst}}\\approx 0.20$, overlapping CIs)")),
    "000.rpr_reduces": PaperClaim(paper="000", where="§3.3", form=_F.DIRECTION, quote=(
        "raw_plus_resummarize reduces residue to $0.11$ on Gemma and $0.10$ on GPT-4o-mini at $S{=}1$, and "
        "$0.05$ on Gemma at $S{=}2$, but stays nonzero")),
    "000.rpr_reading": PaperClaim(paper="000", where="§3.3", form=_F.DIRECTION,
                                  quote="pre-existing summary artifacts are not fully removed before regeneration"),
    "000.table2_residue": PaperClaim(paper="000", where="Table 2, Forgetting Residue (FRS_worst), Gemma 3 12B",
                                     form=_F.POINT, tolerance=0.05, quote=(
        "noop 0.20 / 0.15, raw_only 0.20 / 0.15, raw_plus_resummarize 0.11 / 0.05 at S=1 / S=2")),
    "000.purge": PaperClaim(paper="000", where="§3.3", form=_F.ZERO, quote=(
        "full_purge and tombstone drive $\\mathrm{FRS}_{\\mathrm{worst}}$ to zero across all evaluated settings")),
    # paper 000 §3.2–3.3 on the full grid (frontier report)
    "000.rise_k": PaperClaim(paper="000", where="Figure 2", form=_F.DIRECTION,
                             quote="Under $S{=}0$ the line stretches diagonally (PR/AER both rise with $k$)"),
    "000.s1_reduces": PaperClaim(paper="000", where="§3.2", form=_F.DIRECTION,
                                 quote="$S{=}1$ reduces AER by $76\\%$ on Gemma"),
    "000.s1_cost": PaperClaim(paper="000", where="§3.2", form=_F.CEILING,
                              quote="with PR costs of ${\\approx}5\\%$ and ${\\approx}2$ pp respectively"),
    "000.s2_further": PaperClaim(paper="000", where="§3.2", form=_F.DIRECTION, quote=(
        "One-sentence summarization ($S{=}2$) reduces AER further to ${\\approx}0.16$ on Gemma, but at additional "
        "utility cost")),
    "000.s1_best": PaperClaim(paper="000", where="§3.2", form=_F.DIRECTION, quote=(
        "making $S{=}1$ the best-attainable point on the frontier across both models")),
    "000.k_flat": PaperClaim(paper="000", where="§3.2", form=_F.CEILING, quote=(
        "Under $S{\\geq}1$, AER is flat across all $k$: once the canary is absent from stored memory "
        "representations, retrieving more chunks does not restore it")),
    "000.di_collapse": PaperClaim(paper="000", where="§3.2", form=_F.DIRECTION, quote=(
        "The direct–indirect spread $\\Delta_{\\mathrm{DI}}$ collapses under summarization on both models")),
    "000.jailbreak": PaperClaim(paper="000", where="§3.2", form=_F.DIRECTION, quote=(
        "on Gemma, jailbreak AER joins the same collapse at $S{=}1$; on GPT-4o-mini, jailbreak AER is near zero "
        "even under raw memory")),
    "000.raw_only_s0": PaperClaim(paper="000", where="Table 2", form=_F.ZERO,
                                  quote="raw_only FRS_worst 0.00 [0.00, 0.00] at S=0"),
    "000.raw_only_tier": PaperClaim(paper="000", where="abstract", form=_F.DIRECTION, quote=(
        "raw-only deletion leaves derived summary copies recoverable in ${\\approx}20\\%$ of instances")),
    # paper 001: AfterDeleteBench (afterdelete report)
    "001.delta_rec": PaperClaim(paper="001", where="results", form=_F.DIRECTION, quote=(
        "With hierarchical memory and the gate off, $\\Delta \\mathrm{Rec}=0.680$ on IID profiles")),
    "001.clean_zero": PaperClaim(paper="001", where="results", form=_F.ZERO,
                                 quote="clean recovery is 0/200 in both splits"),
    "001.flat_zero": PaperClaim(paper="001", where="results", form=_F.ZERO, quote=(
        "Flat memory and the declared exposure-group diagnostic instead show zero observed recovery in their "
        "tested cells")),
    "001.closure_zero": PaperClaim(paper="001", where="lifecycle", form=_F.ZERO, quote=(
        "recorded-lineage closure yields zero observed $R$, $C$, $A$, and $E$ gaps")),
    "001.compositional": PaperClaim(paper="001", where="results", form=_F.ZERO, quote=(
        "The original compositional profiles, however, yield zero exact recovery under all eight tested "
        "auditors in both splits")),
    "001.high_recovery": PaperClaim(paper="001", where="results, Table 1", form=_F.DIRECTION, quote=(
        "Recovery is high for atomic, duplicated/paraphrased, and correlated structures (Table 1)")),
    "001.domains": PaperClaim(paper="001", where="results", form=_F.DIRECTION,
                              quote="Gaps are positive across all four domains"),
    "001.c1_reconstruct": PaperClaim(paper="001", where="module C", form=_F.DIRECTION, quote=(
        "In lossless C1, every required component remains separately available under a public composition rule")),
    "001.c1_absent": PaperClaim(paper="001", where="module C", form=_F.ZERO, quote=(
        "the complete target appears in 0 of 1,248 transformed model-visible states")),
    "001.c2_zero": PaperClaim(paper="001", where="module C", form=_F.ZERO, quote=(
        "complete recovery and component disclosure are both zero in every tested model/split cell")),
    "001.c3_components": PaperClaim(paper="001", where="module C", form=_F.DIRECTION, quote=(
        "Lossy C3 establishes a different boundary. Among 104 forget-world profiles per cell, region/mnemonic "
        "exact-occurrence counts are $93/93$ IID and $69/69$ OOD for Qwen")),
    "001.c3_zero": PaperClaim(paper="001", where="module C", form=_F.ZERO, quote=(
        "lossy C3 keeps region and mnemonic but omits the number")),
    "001.gate": PaperClaim(paper="001", where="lifecycle", form=_F.EQUALITY,
                           quote="The gate instead leaves $R$ unchanged and blocks $C$ entirely"),
    "001.gate_activation": PaperClaim(paper="001", where="lifecycle", form=_F.DIRECTION, quote=(
        "while $A$ remains positive because preexisting residue is still available")),
    "001.nowrite_identical": PaperClaim(paper="001", where="module B", form=_F.EQUALITY, quote=(
        "For every $R=1$ profile, no-write and gate-blocked have identical persistent state, prompt, and raw reply")),
    "001.write_raises": PaperClaim(paper="001", where="module B", form=_F.DIRECTION, quote=(
        "Among Qwen forget-world profiles with $R=1$, write-allowed raises activation from 64/76 to 76/76 IID")),
    "001.legacy_activation": PaperClaim(paper="001", where="Table 10", form=_F.DIRECTION, quote=(
        "The matched Qwen legacy-activation diagnostic shows that interface choice can also reverse the apparent "
        "write effect on fixed underlying states")),
    "001.legacy_hides": PaperClaim(paper="001", where="module A", form=_F.DIRECTION, quote=(
        "Mistral and Phi-3 officially score $R=C=A=E=0$ in both splits, although their raw IID audit replies "
        "contain the target in 77/104 and 78/104 cases")),
    "001.confirmation": PaperClaim(paper="001", where="module A", form=_F.DIRECTION, quote=(
        "On a new one-factor confirmation panel, the legacy request frequently elicited literal target-bearing "
        "replies that the parser did not score")),
    "001.calibration": PaperClaim(paper="001", where="methods, appendix E", form=_F.DIRECTION, quote=(
        "Bounded calibrations then selected one model-specific interface on development profiles before "
        "evaluating that frozen choice on held-out profiles")),
    "001.first_query": PaperClaim(paper="001", where="auditors", form=_F.FLOOR, quote=(
        "Across repeated evaluations, 3,081 of 3,088 observed recovery events occur on query 1")),
    "001.auditors_identical": PaperClaim(paper="001", where="auditors", form=_F.EQUALITY, quote=(
        "The expert script, greedy information-gain auditor, and both frozen PPO checkpoints produce identical "
        "matched outcomes")),
    "001.variants": PaperClaim(paper="001", where="variants", form=_F.DIRECTION, quote=(
        "Qwen recovery remains positive with JSON fact-ledger serialization and partial-memory retrieval, and the "
        "tested alternative activation wording preserves positive fresh-session gaps")),
    "001.utility": PaperClaim(paper="001", where="utility", form=_F.EQUALITY, quote=(
        "baseline, closure, and gate-on each score 100/100, and all 20 benign near-miss writes pass")),
    "001.utility_cost": PaperClaim(paper="001", where="utility", form=_F.FLOOR, quote=(
        "No obvious benign-behavior cost is detected in the predeclared sanity check")),
}
"""Every claim the replay, frontier-residue and afterdelete reports test, by key."""


def paper_claim(key: str) -> PaperClaim:
    """The registered claim ``key`` (KeyError names the known keys)."""
    try:
        return PAPER_CLAIMS[key]
    except KeyError:
        raise KeyError(f"{key!r} is not a registered paper claim; known: {', '.join(sorted(PAPER_CLAIMS))}") from None

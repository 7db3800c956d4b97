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
}
"""Every claim the replay and frontier-residue reports test, by key."""


def paper_claim(key: str) -> PaperClaim:
    """The registered claim ``key`` (KeyError names the known keys)."""
    try:
        return PAPER_CLAIMS[key]
    except KeyError:
        raise KeyError(f"{key!r} is not a registered paper claim; known: {', '.join(sorted(PAPER_CLAIMS))}") from None

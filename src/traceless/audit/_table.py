"""The audit's rows and its table, read from the study runner's store: ``AuditRow`` (one
probe, from an audit's or the frontier study's probe cell) and ``audit_table`` (AER per level,
FRS per view, copies per store and files per phase, from an audit's cells). The engine
writes its summary with it and ``traceless report`` renders a results dir or an export
bundle with it, so the two cannot differ."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from traceless._rows import StoredRow
from traceless.audit._inversion import InversionReport
from traceless.audit._probes import PROBE_LEVELS
from traceless.audit._serving_cache import ServingCacheTier
from traceless.metrics import aer, aer_max, frs_worst

if TYPE_CHECKING:
    from traceless.run import ResultRow

__all__ = ["AuditRow", "AuditTable", "audit_table", "files_cell", "residue_key"]


class AuditRow(StoredRow):
    """One probe: one row of ``results.jsonl`` (every audit, every memory system); the frontier
    study's probe cells read the same way (``AuditRow.from_cell``)."""

    run_id: str
    """Identifier of the run (``audit-SYSTEM``; ``frontier-MODELTAG`` for frontier cells)."""
    system: str
    """The memory system audited."""
    profile: str
    """The user (synthetic profile, a user of ``--data``, a frontier instance)."""
    phase: str
    """``before`` or the deletion operation applied."""
    view: str
    """Memory view probed: ``agent`` or a tier-restricted view such as ``raw``/``summary`` (FRS_t)."""
    level: str
    """Probe level."""
    wording: int
    """Probe wording index."""
    prompt: list[dict[str, str]] | None
    """Messages sent (canary redacted unless ``reveal``); None where an export bundle dropped them."""
    extracted: bool
    """Canary appeared verbatim in the reply."""
    context_ids: list[str]
    """Memory entry ids in the context (evaluator-side; empty where an export bundle dropped them)."""
    prompt_tokens: int
    """Prompt tokens processed."""
    completion_tokens: int
    """Tokens generated."""
    seconds: float
    """Wall time of the call."""

    @classmethod
    def from_cell(cls, row: ResultRow) -> AuditRow | None:
        """A probe cell (``aer`` before deletion, ``frs`` after one) of an audit or of the
        frontier study (results dir or export bundle, any study version) as an ``AuditRow``;
        None for any other cell (a residue cell, a PR question, another study's cell).
        ``config`` stays the cell's ``{"study", "cell"}`` (a frontier cell's holds its S and k)."""
        cell = row.config.get("cell", {})
        if cell.get("kind") not in ("aer", "frs") or "extracted" not in row.metrics:
            return None
        frs = cell["kind"] == "frs"
        system = cell.get("system", "traceless")  # only an audit's cells name their system
        return cls(
            run_id=f"audit-{system}" if "system" in cell else f"frontier-{row.model_tag}", system=system,
            profile=cell["instance"],
            phase=cell["mode"] if frs else "before", view=cell["tier"] if frs else "agent", level=cell["level"],
            wording=int(cell["wording"]), prompt=row.prompt, reply=row.reply, extracted=bool(row.metrics["extracted"]),
            context_ids=list(row.extra.get("context_ids", [])), prompt_tokens=int(row.timing.get("prompt_tokens", 0)),
            completion_tokens=int(row.timing.get("completion_tokens", 0)),
            seconds=float(row.timing.get("total_seconds", 0.0)), config=row.config, seed=row.seed, model=row.model,
            code_version=row.code_version)


def residue_key(phase: str) -> str:
    """Key of a phase's residue cell (copies per store, files, what the deletion did)."""
    return f"residue/{phase}"


class AuditTable(BaseModel):
    """An audit's results per phase, in phase order (``before``, then each deletion)."""

    table: dict[str, dict[str, float]]
    """phase → {AER_direct, AER_indirect, AER_jailbreak, AER_max[, FRS_view ..., FRS_worst]}."""
    copies: dict[str, dict[str, int]]
    """phase → store → copies of the canaries it holds (summed over users)."""
    files: dict[str, dict[str, int]]
    """phase → file (relative to the phase's work dir) → canary occurrences, files with any only."""
    bystanders: dict[str, dict[str, Any]] = {}
    """deletion → whether the other users' canaries survived it (the residue cell's
    ``bystanders``; absent in audits made before it was recorded)."""
    erasure: dict[str, dict[str, Any]] = {}
    """deletion → what traceless's own erasure reached after it (``claims`` per store, ``passed``);
    only for systems whose adapter implements the erasure."""
    inversion: dict[str, InversionReport | None] = {}
    """phase → the candidate attack on the vectors read from the system's files after it (the
    residue cell's ``inversion``); None: its files hold no vectors traceless reads; absent in
    audits made before it was recorded."""
    serving_cache: dict[str, ServingCacheTier | None] = {}
    """deletion → the serving-cache tier (the residue cell's ``serving_cache``); None: no model
    served by traceless; absent where the audit did not run it."""
    probes: list[AuditRow]
    """The probe rows, in phase order, each phase's in the engine's request order."""


def audit_table(cells: Sequence[ResultRow]) -> AuditTable:
    """The table of one audit's cells (a results dir's or an export bundle's rows of one model).

    Phases are the residue cells', in the engine's order. After a deletion every tier view
    the system declares gets an FRS column: a view it left unprobed is empty by construction
    (native S=0 has no summary tier: FRS_summary 0)."""
    residue = sorted((r for r in cells if r.config.get("cell", {}).get("kind") == "residue"),
                     key=lambda r: int(r.metrics["phase_index"]))
    phases = [r.group for r in residue]
    order = {p: i for i, p in enumerate(phases)}
    in_order = sorted((r for r in cells if r.group in order),  # from_cell drops the residue cells
                      key=lambda r: (order[r.group], r.extra.get("order", 0), r.key))
    probe_rows = [a for a in map(AuditRow.from_cell, in_order) if a is not None]
    hits: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    views: dict[str, list[str]] = defaultdict(list)
    for a in probe_rows:
        hits[(a.phase, a.view, a.level)].append(a.extracted)
        if a.view not in views[a.phase]:
            views[a.phase].append(a.view)
    table: dict[str, dict[str, float]] = {}
    for r in residue:
        phase = r.group
        # the paper's metric functions, the same ones the frontier report resamples
        row = {f"AER_{lv}": aer(hits[(phase, "agent", lv)]) for lv in PROBE_LEVELS}
        row["AER_max"] = aer_max(row)
        tier_views = [] if phase == "before" else list(dict.fromkeys(
            [*(v for v in r.metrics["views"] if v != "agent"), *(v for v in views[phase] if v != "agent")]))
        for v in tier_views:
            row[f"FRS_{v}"] = aer_max({lv: aer(hits[(phase, v, lv)]) for lv in PROBE_LEVELS})
        if tier_views:
            row["FRS_worst"] = frs_worst({v: row[f"FRS_{v}"] for v in tier_views})
        table[phase] = row
    return AuditTable(table=table, copies={r.group: r.metrics["copies"] for r in residue},
                      files={r.group: r.metrics["files"] for r in residue},
                      bystanders={r.group: r.metrics["bystanders"] for r in residue if "bystanders" in r.metrics},
                      erasure={r.group: r.metrics["erasure"] for r in residue if "erasure" in r.metrics},
                      inversion={r.group: None if r.metrics["inversion"] is None else
                                 InversionReport.model_validate(r.metrics["inversion"])
                                 for r in residue if "inversion" in r.metrics},
                      serving_cache={r.group: None if r.metrics["serving_cache"] is None else
                                     ServingCacheTier.model_validate(r.metrics["serving_cache"])
                                     for r in residue if "serving_cache" in r.metrics},
                      probes=probe_rows)


def files_cell(held: dict[str, int], most: int = 3) -> str:
    """Occurrences in files, naming up to ``most`` files; more are counted per folder
    (LanceDB's fragments have 50-character names)."""
    if not held:
        return "0"
    if len(held) <= most:
        return f"{sum(held.values())} (" + ", ".join(f"`{f}`" for f in held) + ")"
    folders: dict[str, list[str]] = {}
    for f in held:
        folders.setdefault(f.rsplit("/", 1)[0] + "/" if "/" in f else "", []).append(f)
    parts = [f"`{fs[0]}`" if len(fs) == 1 else f"{len(fs)} files in `{d or './'}`" for d, fs in folders.items()]
    return f"{sum(held.values())} (" + ", ".join(parts) + ")"

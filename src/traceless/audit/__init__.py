"""Audits: probes and the one audit engine (``run_system_audit``)
behind ``traceless audit`` for every memory system, and the behavioural deletion
certificate (``certify``) behind ``forget --certify``. The public verb ``traceless.audit(...)``
is the plain function ``traceless._api.audit``. Canaries and synthetic users (``traceless.datasets``),
bystander checks and memory views (``traceless.systems``) are re-exported here."""

from traceless.audit._baseline import NO_BASELINE, baseline_note
from traceless.audit._certify import certify
from traceless.audit._engine import (
    PhaseProbes,
    ProbeReply,
    agent_replies,
    probe_contexts,
    probe_messages,
    probe_phase,
    store_copies,
)
from traceless.audit._inversion import InversionReport, candidate_inversion
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._serving_cache import (
    CachePhase,
    ServingCacheTier,
    audit_records,
    audit_serving_cache,
    serving_cache_check,
    serving_cache_tier,
)
from traceless.audit._system_audit import (
    PAPER_LADDER,
    Planted,
    SystemAuditConfig,
    SystemAuditResult,
    SystemAuditRow,
    audit_model,
    deletion_phase,
    plant,
    plant_canaries,
    run_system_audit,
)
from traceless.audit._system_audit import (
    STUDY as AUDIT_STUDY,
)
from traceless.audit._system_audit import (
    STUDY_VERSION as AUDIT_STUDY_VERSION,
)
from traceless.audit._table import AuditRow, AuditTable, audit_table, files_cell
from traceless.datasets import (
    CANARY_SPACE,
    CANARY_WORDS,
    canary_sentence,
    inject_canary,
    is_canary,
    make_canary,
    synthetic_users,
)
from traceless.systems import VIEWS, BystanderCheck, bystander_cell, probe_view, view_config

__all__ = [
    "AuditRow",
    "AuditTable",
    "BystanderCheck",
    "bystander_cell",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "CachePhase",
    "ServingCacheTier",
    "serving_cache_check",
    "serving_cache_tier",
    "audit_serving_cache",
    "audit_records",
    "InversionReport",
    "NO_BASELINE",
    "PAPER_LADDER",
    "Planted",
    "PROBE_LEVELS",
    "Probe",
    "AUDIT_STUDY",
    "AUDIT_STUDY_VERSION",
    "SystemAuditConfig",
    "SystemAuditResult",
    "SystemAuditRow",
    "VIEWS",
    "audit_model",
    "audit_table",
    "baseline_note",
    "canary_sentence",
    "candidate_inversion",
    "certify",
    "extracted",
    "files_cell",
    "inject_canary",
    "is_canary",
    "make_canary",
    "deletion_phase",
    "plant",
    "plant_canaries",
    "probe_messages",
    "probe_phase",
    "PhaseProbes",
    "ProbeReply",
    "agent_replies",
    "probe_view",
    "probe_contexts",
    "probes",
    "run_system_audit",
    "store_copies",
    "synthetic_users",
    "view_config",
]


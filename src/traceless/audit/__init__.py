"""Audits: canaries, probes, memory views, the ``traceless audit`` job and the audit engine
for any memory system (``run_system_audit``)."""

from traceless.audit._audit import PAPER_LADDER, AuditConfig, AuditResult, AuditRow, run_audit
from traceless.audit._canary import (
    CANARY_SPACE,
    CANARY_WORDS,
    canary_sentence,
    inject_canary,
    is_canary,
    make_canary,
)
from traceless.audit._engine import VIEWS, probe_view, view_config
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._synthetic import synthetic_users
from traceless.audit._system_audit import (
    SystemAuditConfig,
    SystemAuditResult,
    SystemAuditRow,
    plant_canaries,
    run_system_audit,
)

__all__ = [
    "AuditConfig",
    "AuditResult",
    "AuditRow",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "PAPER_LADDER",
    "PROBE_LEVELS",
    "Probe",
    "SystemAuditConfig",
    "SystemAuditResult",
    "SystemAuditRow",
    "VIEWS",
    "canary_sentence",
    "extracted",
    "inject_canary",
    "is_canary",
    "make_canary",
    "plant_canaries",
    "probe_view",
    "probes",
    "run_audit",
    "run_system_audit",
    "synthetic_users",
    "view_config",
]

"""Audits: canaries, probes, memory views, and the one audit engine (``run_system_audit``)
behind ``traceless audit`` for every memory system, and the behavioural deletion
certificate (``certify``) behind ``forget --certify``."""

import sys

from traceless.audit._canary import (
    CANARY_SPACE,
    CANARY_WORDS,
    canary_sentence,
    inject_canary,
    is_canary,
    make_canary,
)
from traceless.audit._certify import certify
from traceless.audit._engine import VIEWS, probe_view, view_config
from traceless.audit._probes import PROBE_LEVELS, Probe, extracted, probes
from traceless.audit._synthetic import synthetic_users
from traceless.audit._system_audit import (
    PAPER_LADDER,
    SystemAuditConfig,
    SystemAuditResult,
    SystemAuditRow,
    audit_model,
    plant_canaries,
    probe_contexts,
    run_system_audit,
    store_copies,
)
from traceless.audit._system_audit import (
    STUDY as AUDIT_STUDY,
)
from traceless.audit._system_audit import (
    STUDY_VERSION as AUDIT_STUDY_VERSION,
)
from traceless.audit._table import AuditRow, AuditTable, audit_table

__all__ = [
    "AuditRow",
    "AuditTable",
    "CANARY_SPACE",
    "CANARY_WORDS",
    "PAPER_LADDER",
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
    "canary_sentence",
    "certify",
    "extracted",
    "inject_canary",
    "is_canary",
    "make_canary",
    "plant_canaries",
    "probe_view",
    "probe_contexts",
    "probes",
    "run_system_audit",
    "store_copies",
    "synthetic_users",
    "view_config",
]


def _call_api(*args: object, **kwargs: object) -> object:
    from traceless._api import audit

    return audit(*args, **kwargs)  # type: ignore[arg-type]


from traceless._callable import make_callable as _make_callable  # noqa: E402

# `from traceless import audit; audit("mem0", ...)` (this package is also the function)
_make_callable(sys.modules[__name__], _call_api)

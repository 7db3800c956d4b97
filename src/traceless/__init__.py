"""traceless: agent memory that can prove it forgot.

The public API (imported on first use, so ``import traceless`` stays light)::

    from traceless import Memory, forget, verify, audit, MEMORY_SYSTEMS, FORGET_MODES

The verbs ``forget(store, target, mode, certify=...)`` and ``audit(system, ...)`` are plain
functions, ``traceless._api.forget`` and ``traceless._api.audit``, re-exported here (as
inspect_ai re-exports ``eval``). The subpackages ``traceless.forget`` (modes, receipts) and
``traceless.audit`` (the engine) share those names: importing a subpackage makes Python bind it
to the parent's attribute, and this module declines that binding for the two verbs, so
``traceless.forget`` is always the function and the subpackages are used as
``from traceless.forget import Receipt``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from traceless._version import __version__, code_version

if TYPE_CHECKING:
    from traceless._api import Memory, audit, forget, scan, verify
    from traceless._deployment import (
        erase_deployment,
        export_deployment,
        load_deployment,
        recheck_deployment,
        scan_deployment,
    )
    from traceless.audit import SystemAuditResult
    from traceless.forget import FORGET_MODES, ForgetTarget, Receipt, verify_bundle
    from traceless.systems import MEMORY_SYSTEMS, MemorySystem, memory_system

__all__ = [
    "FORGET_MODES",
    "ForgetTarget",
    "MEMORY_SYSTEMS",
    "Memory",
    "MemorySystem",
    "Receipt",
    "SystemAuditResult",
    "__version__",
    "audit",
    "code_version",
    "erase_deployment",
    "export_deployment",
    "forget",
    "load_deployment",
    "memory_system",
    "recheck_deployment",
    "scan",
    "scan_deployment",
    "verify",
    "verify_bundle",
]

_LAZY = {
    "Memory": "traceless._api", "forget": "traceless._api", "audit": "traceless._api", "verify": "traceless._api", "scan": "traceless._api",
    "SystemAuditResult": "traceless.audit",
    **dict.fromkeys(("erase_deployment", "export_deployment", "load_deployment", "recheck_deployment",
                     "scan_deployment"), "traceless._deployment"),
    "verify_bundle": "traceless.forget",
    "FORGET_MODES": "traceless.forget", "ForgetTarget": "traceless.forget", "Receipt": "traceless.forget",
    "MEMORY_SYSTEMS": "traceless.systems", "MemorySystem": "traceless.systems", "memory_system": "traceless.systems",
}


_VERBS = ("forget", "audit")
"""Public functions that share their name with a subpackage."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceless' has no attribute {name!r}")


class _Package(types.ModuleType):
    """``traceless`` itself: the import system's binding of the subpackage ``traceless.forget``
    (or ``.audit``) to this module's attribute is declined, so the name stays the function
    (looked up on first use by ``__getattr__``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _VERBS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

"""``traceless.scan`` and ``traceless.forget(system=..., config=..., user=...)``: find, erase
and certify in the user's own memory system (issue #23). The CLI (``traceless scan``,
``traceless forget --memory``) calls these; they call the one driver in
``traceless.systems`` (``scan_system``, ``plan_system_erasure``, ``erase_system``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.forget import Receipt, check_receipt_path, receipt_key
from traceless.systems import (
    ErasurePlan,
    MemorySystem,
    MissingPackageError,
    ScanReport,
    erase_system,
    load_system_config,
    plan_system_erasure,
    scan_system,
    system_class,
)

__all__ = ["attach_system", "erase", "plan_erasure", "scan"]

Config = str | os.PathLike[str] | dict[str, Any] | None


def attach_system(system: str, config: Config, *, read_only: bool) -> MemorySystem:
    """The user's live instance of ``system`` as ``config`` describes it (validated first:
    an unknown key or a path that does not exist is refused before anything is opened)."""
    cls = system_class(system)
    cfg = load_system_config(system, config)
    try:
        return cls.attach(cfg, read_only=read_only)
    except ImportError as e:
        raise MissingPackageError(f"memory system {system!r} could not import {e.name or e}; install it with "
                                  f"`pip install 'traceless[{cls.extra or system}]'`") from e


def scan(system: str, config: Config, *, user: str | None = None, literals: Sequence[str] = (),
         reveal: bool = False) -> ScanReport:
    """Read-only: every record of ``user`` and every record or file holding a literal, per store.
    Not one byte of the instance changes (values appear only with ``reveal``)."""
    _need_target(user, literals)
    s = attach_system(system, config, read_only=True)
    try:
        return scan_system(s, user, list(literals), reveal=reveal)
    finally:
        s.close()


def plan_erasure(system: str, config: Config, *, user: str | None = None,
                 literals: Sequence[str] = ()) -> ErasurePlan:
    """What ``erase`` would change (``forget --dry-run``), read-only; nothing of the user →
    ``NothingToEraseError``."""
    _need_target(user, literals)
    s = attach_system(system, config, read_only=True)
    try:
        return plan_system_erasure(s, user, list(literals))
    finally:
        s.close()


def erase(system: str, config: Config, *, user: str | None = None, literals: Sequence[str] = (),
          receipt: str | Path | None = None, state_dir: str | Path | None = None) -> Receipt:
    """Erase ``user`` (and every record holding a literal) from the live instance: plan →
    journal → the system's own deletions + residue → compaction → re-scan → bystanders →
    signed receipt (written to ``receipt`` before the journal is removed). An interrupted
    run is finished by the same call. ``state_dir`` holds the journals (default: traceless's)."""
    _need_target(user, literals)
    out = check_receipt_path(receipt) if receipt is not None else None  # every output checked first
    from traceless.paths import state_dir as default_state

    s = attach_system(system, config, read_only=False)
    try:
        return erase_system(s, user, list(literals), state_dir=Path(state_dir) if state_dir else default_state(),
                            key=receipt_key(), receipt_out=out)
    finally:
        s.close()


def _need_target(user: str | None, literals: Sequence[str]) -> None:
    if user is None and not literals:
        raise ConfigError("name what to find: a user (--user ID) and/or literals (--literal TEXT)")
    if user is not None and not user.strip():
        raise ConfigError("--user is empty; give the user id the system stores (mem0's user_id)")
    if any(not lit for lit in literals):
        raise ConfigError("--literal is empty; give the exact text to look for")

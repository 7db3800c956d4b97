"""The fields every stored row has, shared by the study runner's ``ResultRow``
(``traceless.studies``) and the audit engine's ``AuditRow`` (``traceless.audit``). A module
of its own (pydantic only) so that either package imports it without importing the other.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["StoredRow"]


class StoredRow(BaseModel):
    """The fields every stored row has: a study cell's ``ResultRow`` and an audit probe's
    ``traceless.audit.AuditRow`` (the frontier study's probe cells read as AuditRows)."""

    config: dict[str, Any]
    """Everything that defines the row: ``{"study": <study or audit config>, "cell": <cell
    params>}`` (an audit's cells are study cells too)."""
    seed: int
    """The row's seed."""
    model: dict[str, Any]
    """Model identity (``backend.describe()``); empty for model-free cells."""
    code_version: str
    """traceless.code_version() that produced the row."""
    prompt: Any
    """The exact prompt (list of chat messages as dicts), or None (model-free cell; dropped
    by an export bundle)."""
    reply: str | None
    """The raw reply (data: may contain the canary, redacted in an audit unless revealed); None
    when there is none or an export bundle dropped it."""

"""Typed exception hierarchy. Every message says what went wrong *and* how to fix it.

The CLI maps each class to a distinct exit code (see ``exit_code``).
"""

from __future__ import annotations

import difflib

__all__ = [
    "TracelessError",
    "ConfigError",
    "UnknownNameError",
    "UnsupportedError",
    "ModelError",
    "ModelNotAvailableError",
    "ModelIntegrityError",
    "BackendError",
    "MemoryStoreError",
    "SchemaVersionError",
    "StoreLockedError",
    "StoreConnectionError",
    "NotAStoreError",
    "InputFormatError",
    "DuplicateSessionError",
    "ForgetError",
    "NothingMatchedError",
    "NothingToEraseError",
    "ErasureScopeError",
    "GateBlockedError",
    "GateKeyError",
    "ReceiptError",
    "ReceiptLogError",
    "StudyError",
    "ResumeError",
    "ReplayError",
]


class TracelessError(Exception):
    """Base class of every error traceless raises on purpose."""

    exit_code: int = 1


class ConfigError(TracelessError):
    """A configuration value is invalid."""

    exit_code = 2


class UnknownNameError(ConfigError):
    """A name (mode, model, auditor, contract, probe, study …) is not registered."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = "") -> None:
        self.kind, self.name, self.known = kind, name, known
        msg = f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known)) or '(none)'}"
        close = difflib.get_close_matches(name.lower(), sorted(known), n=1, cutoff=0.6) if name else []
        if close:
            msg += f"; did you mean {close[0]!r}?"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class UnsupportedError(ConfigError):
    """The named component does not offer what was asked of it (e.g. a memory system whose
    adapter implements no scan or erasure)."""


class ModelError(TracelessError):
    """Something is wrong with a model or its weights."""

    exit_code = 3


class ModelNotAvailableError(ModelError):
    """A known model is not installed on this machine."""


class ModelIntegrityError(ModelError):
    """A weights file is partial or corrupted (sha256 mismatch)."""


class BackendError(ModelError):
    """A model backend failed (HTTP error, bad response, unsupported feature)."""


class MemoryStoreError(TracelessError):
    """The memory store cannot be opened or written."""

    exit_code = 4


class SchemaVersionError(MemoryStoreError):
    """The memory file was written by a newer traceless."""


class StoreLockedError(MemoryStoreError):
    """The memory file is read-only or locked by another process."""


class StoreConnectionError(MemoryStoreError):
    """A database server (a ``postgresql://`` store) cannot be reached or refused the login."""


class NotAStoreError(MemoryStoreError):
    """The file or database is not a traceless store (another application's, or none yet):
    traceless never modifies it."""


class InputFormatError(TracelessError):
    """Input data (sessions, datasets, configs) is malformed. Names the line/record and field."""

    exit_code = 5


class DuplicateSessionError(InputFormatError):
    """A session id the user already has was written again without saying what to do."""


class ForgetError(TracelessError):
    """A forget operation could not complete; nothing was changed."""

    exit_code = 6


class NothingMatchedError(ForgetError):
    """The forget target matched no artifact (a receipt is still written)."""

    exit_code = 7


class NothingToEraseError(NothingMatchedError):
    """A scan or erasure found nothing of the user or the literals: no receipt is signed,
    because a proof of nothing is not an erasure (exit 7)."""


class ErasureScopeError(ForgetError):
    """An erasure would change another user's records (a literal they hold, a literal too short
    or too common): refused before any change (exit 6)."""


class GateBlockedError(TracelessError):
    """The write gate refused a write that carries a forgotten attribute–value pair."""

    exit_code = 8


class GateKeyError(GateBlockedError):
    """The store's gate descriptors were made with another key (or the key is missing):
    writes are refused rather than accepting forgotten values again."""


class ReceiptError(TracelessError):
    """A receipt is malformed or its signature does not verify."""

    exit_code = 9


class ReceiptLogError(ReceiptError):
    """A receipt log (``forget --log``) does not verify: a checkpoint's signature, an entry
    removed, altered or reordered, a receipt not in it, two checkpoints that are not consistent."""


class StudyError(TracelessError):
    """A study could not run."""

    exit_code = 10


class ResumeError(StudyError):
    """A results directory cannot be resumed by this study/version."""


class ReplayError(TracelessError):
    """A trajectory or checkpoint cannot be replayed (other model or code version)."""

    exit_code = 11

"""Erasure requests: the ticket id a receipt answers, receipt file names that never collide,
and the append-only local request log (issue 36.3).

The request log is ``<state dir>/requests.jsonl``: one JSON line per request (``forget``) or
re-check (``scan --since``), appended with ``O_APPEND`` in one ``write`` and fsynced, never
rewritten. A line says what was asked (the system, the user as the receipt's keyed pseudonym
``u:<16 hex>``, the ticket id), when, which receipts answered it and where they were written,
and the verdict. It never holds the raw user id or a literal: a receipt path that spells one
of them is withheld (``path: null``), and a ticket id equal to either is refused.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from traceless.errors import ConfigError, InputFormatError
from traceless.forget._receipt import Receipt

__all__ = ["LoggedReceipt", "RequestLogEntry", "Verdict", "check_request_id", "fresh_receipt_path",
           "log_request", "name_receipt", "read_requests", "receipt_file_name", "request_log_path",
           "verdict_of"]

REQUEST_LOG = "requests.jsonl"
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

Verdict = Literal["erased", "not_erased", "unverified", "nothing_matched", "nothing_found", "refused",
                  "clean", "came_back"]


class LoggedReceipt(BaseModel):
    """One receipt that answered a request."""

    model_config = ConfigDict(extra="forbid")

    receipt_id: str
    """The receipt's ``receipt_id``."""
    path: str | None = None
    """The absolute path it was written to; None: written to no file (the Python API without a
    path), or withheld because the path spells the user id or a literal."""


class RequestLogEntry(BaseModel):
    """One line of ``requests.jsonl`` (docs/schemas/request-log.json)."""

    model_config = ConfigDict(extra="forbid")

    event: Literal["forget", "recheck"]
    """``forget``: an erasure was asked; ``recheck``: a past erasure was re-checked (``scan --since``)."""
    request_id: str | None = None
    """The request's ticket id (``--request-id``); None when none was given."""
    at: float
    """Unix time the line was written."""
    time: str
    """The same instant, ISO 8601 UTC."""
    system: str
    """The memory system (``traceless`` for a traceless store)."""
    user: str | None = None
    """The user as the receipt names them: the keyed pseudonym ``u:<16 hex>``, never the raw id
    (None: a literal-only request)."""
    receipts: list[LoggedReceipt] = Field(default_factory=list)
    """The receipts that answered it (none when nothing was found or the request was refused)."""
    verdict: Verdict
    """``erased``; ``not_erased`` (the mode passed but does not erase everywhere); ``unverified``
    (a check failed); ``nothing_matched`` (a receipt that proves no erasure); ``nothing_found``
    and ``refused`` (no receipt was signed); for a re-check ``clean`` or ``came_back``."""


def check_request_id(request_id: str, forbidden: Sequence[str | None] = ()) -> str:
    """``request_id`` if it is a ticket id (1-64 of ``A-Z a-z 0-9 . _ -``, starting with a letter
    or digit: it names files) that is not one of ``forbidden`` (the user id, the literals)."""
    if not _REQUEST_ID.fullmatch(request_id):
        raise ConfigError(f"--request-id {request_id!r}: give 1-64 letters, digits, '.', '_' or '-' "
                          "(it names the receipt file), e.g. T-1042")
    if any(f and _spells(request_id, f) for f in forbidden):
        raise ConfigError("--request-id holds the user id or a literal: give the ticket's own id (the request log "
                          "and the receipt keep it in the clear)")
    return request_id


def _spells(text: str, value: str) -> bool:
    """``text`` holds ``value``: anywhere, or for a value under 4 characters (``u7``) as a whole
    token (so a short id does not match inside every other word)."""
    if len(value) >= 4:
        return value in text
    return value in re.split(r"[^A-Za-z0-9]+", text)


def receipt_file_name(receipt_id: str, request_id: str = "") -> str:
    """``receipt-<request id>-<receipt id>.json`` (``receipt-<receipt id>.json`` without one)."""
    return f"receipt-{request_id}-{receipt_id}.json" if request_id else f"receipt-{receipt_id}.json"


def fresh_receipt_path(folder: Path, system: str) -> Path:
    """A receipt file in ``folder`` that no earlier erasure wrote (time + random), so the next
    request never overwrites this one's evidence; ``name_receipt`` renames it once signed."""
    if not folder.is_dir():
        raise ConfigError(f"receipt folder {folder} does not exist; create it first")
    return folder / f"receipt-erase-{system}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}.json"


def name_receipt(path: Path, receipt: Receipt) -> Path:
    """``path`` renamed to ``receipt_file_name`` beside it, never over an existing file (then
    it keeps its fresh name)."""
    final = path.with_name(receipt_file_name(receipt.receipt_id, receipt.request_id))
    try:
        os.link(path, final)  # fails on an existing name: no receipt is ever replaced
    except FileExistsError:
        return path
    path.unlink()
    return final


def verdict_of(receipt: Receipt) -> Verdict:
    """What a receipt answers: nothing matched, a failed check, not erased everywhere, or erased."""
    if not receipt.matched:
        return "nothing_matched"
    if not receipt.verification.passed:
        return "unverified"
    return "not_erased" if receipt.erased is False else "erased"


def request_log_path(state_dir: Path) -> Path:
    """Where the request log of ``state_dir`` is."""
    return state_dir / REQUEST_LOG


def log_request(state_dir: Path, *, event: Literal["forget", "recheck"], system: str, user: str | None,
                request_id: str | None, verdict: Verdict, receipts: Sequence[tuple[Receipt, Path | None]] = (),
                withhold: Sequence[str | None] = ()) -> RequestLogEntry:
    """Append one line to the request log and return it. ``user`` is the pseudonym (``u:…``);
    ``withhold``: the raw user id and literals, only to withhold a receipt path that spells one."""
    secret = [w for w in withhold if w]

    def where(p: Path | None) -> str | None:
        s = str(p.resolve()) if p is not None else None
        return None if s is None or any(_spells(s, w) for w in secret) else s

    now = time.time()
    entry = RequestLogEntry(
        event=event, request_id=request_id or None, at=now,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), system=system, user=user or None,
        receipts=[LoggedReceipt(receipt_id=r.receipt_id, path=where(p)) for r, p in receipts], verdict=verdict)
    state_dir.mkdir(parents=True, exist_ok=True)
    line = (entry.model_dump_json() + "\n").encode("utf-8")
    fd = os.open(request_log_path(state_dir), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)  # one write of one line: concurrent requests never interleave inside a line
        os.fsync(fd)
    finally:
        os.close(fd)
    return entry


def read_requests(state_dir: Path) -> list[RequestLogEntry]:
    """Every line of the request log, oldest first (empty when no request was logged)."""
    p = request_log_path(state_dir)
    if not p.exists():
        return []
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        try:
            out.append(RequestLogEntry.model_validate_json(line))
        except ValueError:
            raise InputFormatError(f"{p} line {n} is not a request log entry; the log is append-only: "
                                   "restore it from a backup") from None
    return out

"""Forget receipts: what each tier lost, how it was verified, signed with a local key.

Signature: HMAC-SHA256 over the canonical JSON of the receipt (without the signature),
keyed by ``state_dir()/receipt.key`` (32 random bytes, mode 0600, created on first use).
Anyone holding the key can check later that a receipt is unaltered. A receipt never
contains the forgotten literal: a literal target appears only as a keyed digest.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from traceless.errors import ReceiptError
from traceless.memory._gate import ensure_key
from traceless.paths import state_dir

__all__ = ["TierReport", "Verification", "Receipt", "TargetRef", "receipt_key", "sign", "verify_signature",
           "load_receipt", "write_receipt"]


def receipt_key(path: Path | None = None) -> bytes:
    """The receipt-signing key (32 random bytes, mode 0600, created atomically on first use)."""
    return ensure_key(path or state_dir() / "receipt.key", "receipt key")


class TargetRef(BaseModel):
    """The forget target as recorded in a receipt (literals only as a keyed digest)."""

    kind: Literal["record", "literal", "session", "user"]
    """What was targeted."""
    ref: str
    """Record id, session id or user id; for a literal, ``hmac:<16 hex>`` (keyed, not reversible)."""
    owner: str
    """Owner whose artifacts were in scope."""


class TierReport(BaseModel):
    """What one tier went through."""

    removed: list[str] = Field(default_factory=list)
    """Artifacts deleted (rows securely deleted)."""
    rewritten: list[str] = Field(default_factory=list)
    """Artifacts whose text was scrubbed/redacted in place (or vectors re-embedded)."""
    rebuilt: list[str] = Field(default_factory=list)
    """New artifacts created by rebuilding from surviving sources."""
    left: int = 0
    """Artifacts of the owner in this tier that were not touched."""
    digest_before: str = ""
    """Digest of the owner's tier before (over artifact ids and payload digests)."""
    digest_after: str = ""
    """Digest after."""
    target_copies_after: int = 0
    """Artifacts in this tier still containing the target (literal or a removed record's text verbatim)."""


class Verification(BaseModel):
    """Checks run inside the forget transaction, plus the post-commit disk scan."""

    claims: list[str]
    """Tiers this mode claims to have cleared of the target."""
    sources_removed: list[str]
    """Source records the mode removed."""
    sources_gone: bool
    """Every removed source id is absent from the store."""
    surviving_descendants: list[str]
    """Descendants of removed sources that still exist (rebuilt artifacts are not descendants)."""
    closure_clean: bool
    """No descendant of a removed source survives."""
    literal_scan: dict[str, int]
    """Per tier, artifacts whose text (incl. embedding source text) contains the target."""
    disk_scan: dict[str, int] = Field(default_factory=dict)
    """Per file SQLite wrote, occurrences of the target literal's bytes (UTF-8, UTF-16LE/BE) after
    commit and WAL truncation. Empty when the target is not a literal."""
    passed: bool
    """Every claim held."""


class Receipt(BaseModel):
    """A signed account of one forget."""

    receipt_id: str
    """Unique id."""
    version: int = 1
    """Receipt format version."""
    created_at: float
    """Unix time."""
    mode: str
    """Forget mode used."""
    target: TargetRef
    """What was forgotten (never the literal itself)."""
    matched: bool
    """Whether the target matched any artifact."""
    tiers: dict[str, TierReport]
    """Per-tier account."""
    verification: Verification
    """How removal was verified."""
    gate_descriptors_added: int = 0
    """Keyed descriptors stored for the write gate."""
    seconds: float
    """Wall time of the forget."""
    code_version: str
    """traceless version that ran it."""
    notes: list[str] = Field(default_factory=list)
    """What the mode deliberately left (e.g. stale vectors, unrebuilt summary slots)."""
    signature: str = ""
    """HMAC-SHA256 over the rest of the receipt with the local receipt key."""

    def payload(self) -> bytes:
        d = self.model_dump(mode="json")
        d.pop("signature", None)
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()

    def summary_lines(self) -> list[str]:
        out = [f"receipt {self.receipt_id}  mode={self.mode}  target={self.target.kind}:{self.target.ref}"
               f"  matched={self.matched}  {self.seconds:.2f}s"]
        for t, r in self.tiers.items():
            out.append(f"  {t:<10} removed={len(r.removed):<4} rewritten={len(r.rewritten):<4} "
                       f"rebuilt={len(r.rebuilt):<4} left={r.left:<5} copies_after={r.target_copies_after}")
        v = self.verification
        out.append(f"  verified: sources_gone={v.sources_gone} closure_clean={v.closure_clean} "
                   f"claims={','.join(v.claims) or '-'} passed={v.passed}")
        if v.disk_scan:
            out.append("  disk scan: " + ", ".join(f"{Path(k).name}={n}" for k, n in v.disk_scan.items()))
        out += [f"  note: {n}" for n in self.notes]
        return out


def sign(receipt: Receipt, key: bytes | None = None) -> Receipt:
    k = key if key is not None else receipt_key()
    return receipt.model_copy(update={"signature": hmac.new(k, receipt.payload(), hashlib.sha256).hexdigest()})


def verify_signature(receipt: Receipt, key: bytes | None = None) -> bool:
    k = key if key is not None else receipt_key()
    expected = hmac.new(k, receipt.payload(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, receipt.signature)


def load_receipt(path: str | Path) -> Receipt:
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text(encoding="utf-8"))
        return Receipt.model_validate(data)
    except FileNotFoundError:
        raise ReceiptError(f"{p} does not exist") from None
    except (ValueError, ValidationError) as e:
        raise ReceiptError(f"{p} is not a traceless receipt: {str(e).splitlines()[0]}") from None


def write_receipt(receipt: Receipt, path: str | Path) -> Path:
    """Write atomically (temp file + rename)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(receipt.model_dump_json(indent=2), encoding="utf-8")
    os.replace(tmp, p)
    return p

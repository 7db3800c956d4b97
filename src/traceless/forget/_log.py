"""An append-only log of signed receipts: an RFC 9162 Merkle tree over its entries, and a
C2SP checkpoint signed with the receipt key after every append (``forget --log DIR``).

A log is a folder:

* ``entries.jsonl``: one entry per line, compact JSON with sorted keys,
  ``{"kind": "receipt", "receipt": {...}}``; a receipt entry is the signed receipt itself
  (what its signature covers, and the signature); a request bundle's signed summary
  (``forget --deployment``) is ``{"kind": "bundle", "bundle": {...}}`` the same way. The leaf of the Merkle tree is the line's
  bytes (without the newline), so anyone recomputes the tree from the file alone.
* ``checkpoint``: the latest signed checkpoint (origin, tree size, root hash).
* ``checkpoints/<size>``: every checkpoint signed, to compare a later log against.

Verification needs the public key alone: the checkpoint's signature, the entries hashing to
its root (so an entry removed, altered, added or reordered fails), the receipt's inclusion
proof against that root, and, given a checkpoint saved earlier, the consistency proof that the
log only grew since (so even the key's holder cannot drop or reorder a receipt once someone
kept a checkpoint that covers it). A crash between writing an entry and signing the next
checkpoint leaves an unsigned entry; verification and the next append refuse it (nothing
unsigned is ever signed later, nor dropped).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ConfigDict

from traceless.errors import ConfigError, ReceiptLogError
from traceless.forget._bundle import RequestBundle, bundle_signature_ok
from traceless.forget._merkle import (
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)
from traceless.forget._note import Checkpoint, open_checkpoint
from traceless.forget._receipt import Receipt, verify_signature
from traceless.keys import key_id, public_key_bytes, signing_key

__all__ = ["LogAppend", "LogInclusion", "LogConsistency", "LogVerifyResult", "append_bundle", "append_receipt",
           "bundle_entry", "check_log", "receipt_entry", "verify_log", "verify_logged", "verify_log_consistency"]

ENTRIES, CHECKPOINT, HISTORY = "entries.jsonl", "checkpoint", "checkpoints"
_FORBID = ConfigDict(extra="forbid")


class LogAppend(BaseModel):
    """What appending one receipt did."""

    model_config = _FORBID

    log: str
    """The log folder."""
    index: int
    """The receipt's entry (0-based leaf index)."""
    size: int
    """Entries in the log, as the new checkpoint signs them."""
    origin: str
    """The log's origin line."""
    root: str
    """The new root hash (hex)."""
    already: bool = False
    """The receipt was in the log already (nothing appended, no new checkpoint)."""


class LogInclusion(BaseModel):
    """A receipt's (or a request bundle's) inclusion in the log, verified against its latest
    signed checkpoint."""

    model_config = _FORBID

    receipt_id: str
    """The receipt (a request bundle: ``bundle <request id>``)."""
    index: int
    """Its entry (0-based leaf index)."""
    size: int
    """The tree size the checkpoint signs."""
    leaf_hash: str
    """``SHA-256(0x00 || entry)`` (hex)."""
    proof: list[str]
    """The RFC 9162 audit path (hex hashes, the leaf's sibling first)."""


class LogConsistency(BaseModel):
    """An earlier checkpoint shown to be a prefix of the current one."""

    model_config = _FORBID

    old_size: int
    """Entries the earlier checkpoint signs."""
    old_root: str
    """Its root hash (hex)."""
    proof: list[str]
    """The RFC 9162 consistency proof (hex hashes)."""


class LogVerifyResult(BaseModel):
    """The JSON document of ``traceless log verify --json``: every check held (a failure is an
    error, exit 9)."""

    model_config = _FORBID

    log: str
    """The log folder."""
    checkpoint: Checkpoint
    """The latest checkpoint, its signature verified."""
    signer: str
    """Id of the key that signed it (sha256 of the public key, 16 hex)."""
    entries_match: bool
    """Every entry of the log hashes to the checkpoint's root, in order."""
    inclusion: LogInclusion | None = None
    """``--receipt``: its inclusion proof."""
    consistency: LogConsistency | None = None
    """``--old``: the consistency proof from that checkpoint."""


def receipt_entry(receipt: Receipt) -> bytes:
    """A receipt's entry line (without the newline): the signed receipt as canonical JSON."""
    body: dict[str, Any] = json.loads(receipt.payload())
    body["signature"] = receipt.signature
    return _canonical({"kind": "receipt", "receipt": body})


def bundle_entry(bundle: RequestBundle) -> bytes:
    """A request bundle's entry line: its signed summary as canonical JSON (the time-stamp,
    which is not under the signature, left out)."""
    body: dict[str, Any] = json.loads(bundle.payload())
    body["signature"] = bundle.signature
    return _canonical({"kind": "bundle", "bundle": body})


def _signed_entry(item: Receipt | RequestBundle, pub: bytes) -> tuple[bytes, str, bool]:
    """The item's entry line, its name, and whether its signature verifies under ``pub``."""
    if isinstance(item, RequestBundle):
        return bundle_entry(item), f"bundle {item.request_id}", bundle_signature_ok(item, pub)
    return receipt_entry(item), f"receipt {item.receipt_id}", verify_signature(item, pub)


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@dataclass
class _State:
    """A log as read from its folder: the verified checkpoint and the entries it signs."""

    checkpoint: Checkpoint
    lines: list[bytes]
    leaves: list[bytes]
    tail: int
    """Entries (or a torn line) after the ones the checkpoint signs."""


def _read(log: Path, public: bytes) -> _State | None:
    """The log in ``log`` with its checkpoint verified and its signed entries matched to its
    root (None: no log there yet); unsigned entries after them are counted, not trusted."""
    cp_file, entries = log / CHECKPOINT, log / ENTRIES
    if not cp_file.exists():
        if entries.exists() and entries.stat().st_size:
            raise ReceiptLogError(f"{log} holds entries but no checkpoint: its checkpoint was removed")
        return None
    cp = open_checkpoint(_text(cp_file), public, f"{cp_file}")
    raw = entries.read_bytes() if entries.exists() else b""
    parts = raw.split(b"\n")
    lines = parts[:-1]  # a last part without its newline is a torn write
    if len(lines) < cp.size:
        raise ReceiptLogError(f"{log} holds {len(lines)} entries but its checkpoint signs {cp.size}: an entry was "
                              "removed, or the checkpoint was swapped for another log's")
    signed = lines[:cp.size]
    leaves = [leaf_hash(x) for x in signed]
    if tree_hash(leaves).hex() != cp.root:
        raise ReceiptLogError(f"{log}: its {cp.size} entries do not hash to the root its checkpoint signs: an entry "
                              "was altered, replaced or reordered, or the checkpoint was swapped")
    return _State(checkpoint=cp, lines=signed, leaves=leaves, tail=len(lines) - cp.size + (parts[-1] != b""))


def _text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReceiptLogError(f"{p} is not a signed note (not UTF-8 text)") from None


def _local_public(public: bytes | None) -> bytes:
    return public if public is not None else public_key_bytes(create=False)


def _state(log: Path, public: bytes | None) -> _State:
    """The verified log, refusing one with unsigned entries or none at all."""
    if not log.is_dir():
        raise ReceiptLogError(f"{log} is not a receipt log folder; give the folder passed to `forget --log`")
    st = _read(log, _local_public(public))
    if st is None:
        raise ReceiptLogError(f"{log} holds no receipt log (no checkpoint); give the folder passed to `forget --log`")
    if st.tail:
        raise ReceiptLogError(f"{log} holds {st.tail} entr{'y' if st.tail == 1 else 'ies'} after its signed "
                              f"checkpoint ({st.checkpoint.size}): added by hand, an append was interrupted, or "
                              "the checkpoint was swapped for an older one (compare it with checkpoints/)")
    return st


def check_log(log: str | Path) -> Path:
    """Validate ``forget --log DIR`` before anything is forgotten: a folder that is new (its
    parent exists) or holds a log that verifies under the local key, and is writable."""
    p = Path(log)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"--log {p} is a file; give a folder for the receipt log")
    where = p if p.exists() else p.parent
    if not where.is_dir():
        raise ConfigError(f"--log {p}: folder {where} does not exist; create it first")
    if not os.access(where, os.W_OK):
        raise ConfigError(f"--log {p} is not writable; choose another folder")
    if p.exists():
        _read(p, public_key_bytes(signing_key()))
    return p


@contextmanager
def _locked(log: Path) -> Iterator[None]:
    log.mkdir(mode=0o700, exist_ok=True)
    with open(log / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def append_bundle(log: str | Path, bundle: RequestBundle, key: Ed25519PrivateKey | None = None,
                  origin: str | None = None) -> LogAppend:
    """Append a request bundle's signed summary (``bundle.json``) to the log, as
    ``append_receipt`` does a receipt."""
    return append_receipt(log, bundle, key, origin)


def append_receipt(log: str | Path, receipt: Receipt | RequestBundle, key: Ed25519PrivateKey | None = None,
                   origin: str | None = None) -> LogAppend:
    """Append ``receipt`` (or a request bundle's summary; signed by ``key``, default the local
    receipt key) to the log in ``log`` and sign the new checkpoint; the log is created on first
    use (``origin``: its name, default ``traceless.local/receipts/<key id>/<random>``). An
    existing log is verified first: one that does not verify is refused, never extended."""
    k = key if key is not None else signing_key()
    pub = public_key_bytes(k)
    entry, what, signed = _signed_entry(receipt, pub)
    if not signed:
        raise ReceiptLogError(f"{what} is not signed by this log's key ({key_id(pub)}); a log holds the receipts "
                              "of one signer")
    p = Path(log)
    with _locked(p):
        st = _read(p, pub)
        name = st.checkpoint.origin if st else origin or f"traceless.local/receipts/{key_id(pub)}/{secrets.token_hex(4)}"
        lines, leaves = (st.lines, st.leaves) if st else ([], [])
        if st and st.tail:  # never dropped nor signed in: it may be a signed entry behind a swapped checkpoint
            raise ReceiptLogError(f"{p} holds entries after its signed checkpoint ({st.checkpoint.size}); run "
                                  f"`traceless log verify --log {p}` and restore its checkpoint before appending")
        if entry in lines:
            i = lines.index(entry)
            return LogAppend(log=str(p), index=i, size=len(lines), origin=name, root=tree_hash(leaves).hex(),
                             already=True)
        _write_entries(p, [*lines, entry])
        leaves = [*leaves, leaf_hash(entry)]
        cp = Checkpoint(origin=name, size=len(leaves), root=tree_hash(leaves).hex())
        _write_checkpoint(p, cp.sign(k), cp.size)
    return LogAppend(log=str(p), index=cp.size - 1, size=cp.size, origin=name, root=cp.root)


def _write_entries(log: Path, lines: list[bytes]) -> None:
    """Append the last line (the others are in the file already)."""
    path = log / ENTRIES
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, lines[-1] + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_checkpoint(log: Path, note: str, size: int) -> None:
    (log / HISTORY).mkdir(mode=0o700, exist_ok=True)
    for path in (log / HISTORY / str(size), log / CHECKPOINT):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(note)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def verify_logged(log: str | Path, receipt: Receipt | RequestBundle, public_key: bytes | None = None) -> LogInclusion:
    """``receipt``'s inclusion proof in the log, verified against its latest checkpoint with
    the public key alone (default: the local key's). ``ReceiptLogError`` says what fails."""
    pub = _local_public(public_key)
    return _inclusion(Path(log), _state(Path(log), pub), receipt, pub)


def _inclusion(p: Path, st: _State, receipt: Receipt | RequestBundle, pub: bytes) -> LogInclusion:
    entry, what, signed = _signed_entry(receipt, pub)
    if not signed:
        raise ReceiptLogError(f"{what}: its signature does not verify under this key (it was altered, or pass the "
                              "signer's key with --public-key)")
    if entry not in st.lines:
        raise ReceiptLogError(_missing(p, st, receipt, what))
    i = st.lines.index(entry)
    proof = inclusion_proof(st.leaves, i)
    if not verify_inclusion(i, st.checkpoint.size, st.leaves[i], proof, bytes.fromhex(st.checkpoint.root)):
        raise ReceiptLogError(f"{p}: the inclusion proof of {what} does not verify")
    name = f"bundle {receipt.request_id}" if isinstance(receipt, RequestBundle) else receipt.receipt_id
    return LogInclusion(receipt_id=name, index=i, size=st.checkpoint.size, leaf_hash=st.leaves[i].hex(),
                        proof=[h.hex() for h in proof])


def _missing(log: Path, st: _State, item: Receipt | RequestBundle, what: str) -> str:
    kind, field, value = (("bundle", "request_id", item.request_id) if isinstance(item, RequestBundle)
                          else ("receipt", "receipt_id", item.receipt_id))
    for line in st.lines:
        try:
            body = json.loads(line).get(kind) or {}
        except (ValueError, AttributeError):
            continue
        if isinstance(body, dict) and body.get(field) == value:
            return (f"{log} holds {what} with other content than this file: one of them was altered "
                    "(both are signed: compare them)")
    return (f"{what} is not in {log} (its {st.checkpoint.size} signed entries): it was never logged, or "
            "the log was rewritten without it")


def verify_log_consistency(log: str | Path, old: str, public_key: bytes | None = None,
                           what: str = "the old checkpoint") -> LogConsistency:
    """The consistency proof from the checkpoint ``old`` (a signed note kept earlier) to the
    log's latest checkpoint, verified with the public key alone."""
    pub = _local_public(public_key)
    return _consistency(Path(log), _state(Path(log), pub), old, pub, what)


def _consistency(p: Path, st: _State, old: str, pub: bytes, what: str) -> LogConsistency:
    was, cur = open_checkpoint(old, pub, what), st.checkpoint
    if was.origin != cur.origin:
        raise ReceiptLogError(f"{what} is of log {was.origin}, not of {p} ({cur.origin})")
    if was.size > cur.size:
        raise ReceiptLogError(f"{what} signs {was.size} entries but {p} holds only {cur.size}: the log lost "
                              "entries (it was truncated or rewritten)")
    proof = consistency_proof(st.leaves, was.size)
    if not verify_consistency(was.size, cur.size, proof, bytes.fromhex(was.root), bytes.fromhex(cur.root)):
        raise ReceiptLogError(f"{p} is not an extension of {what} (size {was.size}): an entry it covered was "
                              "removed, altered or reordered since, and the log re-signed")
    return LogConsistency(old_size=was.size, old_root=was.root, proof=[h.hex() for h in proof])


def verify_log(log: str | Path, public_key: bytes | None = None, *, receipt: Receipt | RequestBundle | None = None,
               old: str | None = None, old_name: str = "the old checkpoint") -> LogVerifyResult:
    """Everything ``traceless log verify`` checks: the checkpoint and the entries, and with
    ``receipt`` (or a request bundle's summary) its inclusion, with ``old`` the consistency
    from that checkpoint."""
    pub, p = _local_public(public_key), Path(log)
    st = _state(p, pub)
    return LogVerifyResult(
        log=str(log), checkpoint=st.checkpoint, signer=key_id(pub), entries_match=True,
        inclusion=_inclusion(p, st, receipt, pub) if receipt is not None else None,
        consistency=_consistency(p, st, old, pub, old_name) if old is not None else None)

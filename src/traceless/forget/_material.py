"""What a forget erased, kept so that ``forget verify --db`` can look for it again in the
store it is given (a pre-forget backup or clone must fail), without keeping the material.

A receipt carries ``erased_material``: AES-GCM under a key derived from the receipt pepper
(verifiers without the pepper learn nothing, not even the literal's length), holding

* per byte form of a literal (``encodings_of``: UTF-8, UTF-16LE/BE, JSON escapes): its
  length, a keyed 64-bit window fingerprint (the sum of a keyed random value per byte, so
  every window of a file is checked in one vectorised pass) and an HMAC-SHA256 that
  confirms each candidate window;
* per source record of a record or session target: the HMAC of its text before the forget.

Scanning never holds the literal: a window is a copy iff its fingerprint and HMAC match.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from traceless.errors import ReceiptError
from traceless.forget._erasure import encodings_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Material", "count_in", "scan_files_for", "seal_material", "unseal_material"]

_AAD = b"traceless-erased-material-v1"
_CHUNK = 1 << 21  # file bytes per vectorised pass (2 MiB: about 50 MiB of temporaries)


def _sub(pep: bytes, what: bytes) -> bytes:
    return hmac.new(pep, b"traceless-material\x00" + what, hashlib.sha256).digest()


@dataclass
class Material:
    """The erased material of one receipt, as keyed digests only."""

    forms: list[tuple[int, int, str]] = field(default_factory=list)
    """Per byte form of the literal: (length in bytes, window fingerprint, HMAC hex)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Source record id -> HMAC hex of its text before the forget."""

    @classmethod
    def of(cls, pep: bytes, literal: str | None, sources: Iterable[tuple[str, str | None]] = ()) -> Material:
        m = cls()
        if literal:
            table = _table(pep)
            for f in encodings_of(literal):
                if f:
                    m.forms.append((len(f), _fingerprint(table, f), m.mac(pep, f)))
        for art_id, text in sources:
            if text:
                m.texts[art_id] = m.mac(pep, text.encode("utf-8"))
        return m

    @staticmethod
    def mac(pep: bytes, data: bytes) -> str:
        return hmac.new(_sub(pep, b"mac"), data, hashlib.sha256).hexdigest()


def seal_material(pep: bytes, m: Material) -> str:
    """The material sealed for the receipt (hex); empty when there is none."""
    if not m.forms and not m.texts:
        return ""
    body = json.dumps({"forms": m.forms, "texts": m.texts}, sort_keys=True).encode()
    nonce = os.urandom(12)
    return (nonce + AESGCM(_sub(pep, b"seal")).encrypt(nonce, body, _AAD)).hex()


def unseal_material(pep: bytes, sealed: str) -> Material:
    """The material of a receipt; ``ReceiptError`` when this machine's pepper did not seal it."""
    try:
        raw = bytes.fromhex(sealed)
        body: Any = json.loads(AESGCM(_sub(pep, b"seal")).decrypt(raw[:12], raw[12:], _AAD))
    except (InvalidTag, ValueError):
        raise ReceiptError(
            "the receipt's erased-material digests do not open with this machine's receipt pepper: re-scanning a "
            "store for what the receipt erased needs the TRACELESS_HOME that made it (a third party checks the "
            "signature only)"
        ) from None
    return Material(forms=[(int(n), int(fp), str(h)) for n, fp, h in body["forms"]],
                    texts={str(k): str(v) for k, v in body["texts"].items()})


def _table(pep: bytes) -> npt.NDArray[np.uint64]:
    import numpy as np

    return np.frombuffer(hashlib.shake_256(_sub(pep, b"window-table")).digest(256 * 8), dtype="<u8").astype(np.uint64)


def _fingerprint(table: npt.NDArray[np.uint64], data: bytes) -> int:
    import numpy as np

    return int(table[np.frombuffer(data, dtype=np.uint8)].sum(dtype=np.uint64))


def _hits(table: npt.NDArray[np.uint64], mac_key: bytes, buf: bytes, forms: list[tuple[int, int, str]],
          skip: int = 0) -> int:
    """Windows of ``buf`` that are a form, counting only those ending past ``skip`` bytes."""
    import numpy as np

    if not buf:
        return 0
    vals = table[np.frombuffer(buf, dtype=np.uint8)]
    sums = np.zeros(len(buf) + 1, dtype=np.uint64)
    np.cumsum(vals, out=sums[1:])
    n = 0
    for length, fp, mac in forms:
        if length > len(buf):
            continue
        starts = np.flatnonzero((sums[length:] - sums[:-length]) == np.uint64(fp))
        for i in starts[starts + length > skip]:
            window = buf[int(i):int(i) + length]
            n += hmac.compare_digest(hmac.new(mac_key, window, hashlib.sha256).hexdigest(), mac)
    return n


def count_in(pep: bytes, m: Material, data: bytes) -> int:
    """Copies of the literal (any byte form) in ``data``."""
    if not m.forms:
        return 0
    return _hits(_table(pep), _sub(pep, b"mac"), data, m.forms)


def scan_files_for(pep: bytes, m: Material, files: Iterable[Path]) -> dict[str, int]:
    """Copies of the literal per file, read in chunks (each chunk searched with the previous
    one's last bytes in front, so a copy across the boundary is found once)."""
    out: dict[str, int] = {}
    if not m.forms:
        return out
    table, key = _table(pep), _sub(pep, b"mac")
    keep = max(n for n, _, _ in m.forms) - 1
    for f in files:
        try:
            with open(f, "rb") as fh:
                n, tail = 0, b""
                while chunk := fh.read(_CHUNK):
                    buf = tail + chunk
                    n += _hits(table, key, buf, m.forms, skip=len(tail))
                    tail = buf[-keep:] if keep else b""
                out[str(f)] = n
        except FileNotFoundError:
            continue
    return out

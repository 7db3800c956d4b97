"""What a forget erased, kept so that ``forget verify --db`` can look for it again in the
store it is given (a pre-forget backup or clone must fail), without keeping the material.

A receipt carries ``erased_material``: AES-GCM under a key derived from the receipt pepper
(verifiers without the pepper learn nothing, not even the literal's length), holding

* per byte form of a literal (``encodings_of``: UTF-8, UTF-16LE/BE, JSON escapes): its
  length, a keyed 32-bit window fingerprint (the sum of a keyed random value per byte, so
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
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from traceless.errors import ReceiptError
from traceless.forget._erasure import encodings_of

if TYPE_CHECKING:
    from traceless.memory import MemoryStore

__all__ = ["Material", "count_each", "count_in", "hex_coincidences", "scan_files_for", "scan_store_files", "seal_material", "unseal_material"]

_AAD = b"traceless-erased-material-v1"
_HEX_RUN = re.compile(rb"[0-9a-fA-F][0-9a-fA-F.]{10,}[0-9a-fA-F]")  # digests, signatures, ids; decimal timestamps
_CHUNK = 1 << 22  # file bytes per vectorised pass (4 MiB: about 50 MiB of temporaries)


def _sub(pep: bytes, what: bytes) -> bytes:
    return hmac.new(pep, b"traceless-material\x00" + what, hashlib.sha256).digest()


@dataclass
class Material:
    """The erased material of one receipt, as keyed digests only."""

    forms: list[tuple[int, int, str]] = field(default_factory=list)
    """Per byte form of the literal: (length in bytes, keyed 32-bit window fingerprint, HMAC hex)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Source record id -> HMAC hex of its text before the forget."""

    @classmethod
    def of(cls, pep: bytes, literal: str | None, sources: Iterable[tuple[str, str | None]] = ()) -> Material:
        m = cls()
        if literal:
            sc = _Scanner(pep, m)
            for f in encodings_of(literal):
                if f:
                    m.forms.append((len(f), sc.fingerprint(f), m.mac(pep, f)))
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


class _Scanner:
    """The keyed window table and HMAC key of one pepper, built once per scan."""

    def __init__(self, pep: bytes, m: Material) -> None:
        import numpy as np

        self.np = np
        self.table = np.frombuffer(hashlib.shake_256(_sub(pep, b"window-table")).digest(256 * 4), dtype="<u4")
        self.key = _sub(pep, b"mac")
        self.by_len: dict[int, list[tuple[int, str]]] = {}
        for length, fp, mac in m.forms:
            self.by_len.setdefault(length, []).append((fp, mac))

    def fingerprint(self, data: bytes) -> int:
        return int(self.table[self.np.frombuffer(data, dtype="u1")].sum(dtype=self.np.uint32))

    def starts(self, buf: bytes, skip: int = 0) -> list[tuple[int, int]]:
        """(start, length) of every window of ``buf`` that is a form, ending past ``skip`` bytes."""
        np = self.np
        if not buf:
            return []
        sums = np.zeros(len(buf) + 1, dtype=np.uint32)  # wraps modulo 2^32, as the fingerprint does
        np.cumsum(self.table[np.frombuffer(buf, dtype="u1")], out=sums[1:])
        out = []
        for length, forms in self.by_len.items():
            if length > len(buf):
                continue
            win = sums[length:] - sums[:-length]
            for fp, mac in forms:
                idx = np.flatnonzero(win == np.uint32(fp))
                for i in idx[idx + length > skip].tolist():
                    got = hmac.new(self.key, buf[i:i + length], hashlib.sha256).hexdigest()
                    if hmac.compare_digest(got, mac):
                        out.append((i, length))
        return out


def count_each(pep: bytes, m: Material, items: list[bytes]) -> list[int]:
    """Copies of the literal (any byte form) in each of ``items``, in one vectorised pass
    over them joined (a window across two items is not a copy)."""
    if not m.forms or not items:
        return [0] * len(items)
    import bisect

    sc = _Scanner(pep, m)
    ends, pos = [], 0
    for it in items:
        pos += len(it)
        ends.append(pos)
    out = [0] * len(items)
    for i, length in sc.starts(b"".join(items)):
        k = bisect.bisect_right(ends, i)
        if i + length <= ends[k]:
            out[k] += 1
    return out


def count_in(pep: bytes, m: Material, data: bytes) -> int:
    """Copies of the literal (any byte form) in ``data``."""
    return count_each(pep, m, [data])[0]


def scan_files_for(pep: bytes, m: Material, files: Iterable[Path],
                   coincidences: Sequence[tuple[bytes, int]] = ()) -> dict[str, int]:
    """Copies of the literal per file, read in chunks (each chunk searched with the previous
    one's last bytes in front, so a copy across the boundary is found once). A copy lying at
    its offset inside one of ``coincidences`` (``hex_coincidences``: the store's own digests
    and signatures) is not counted."""
    out: dict[str, int] = {}
    if not m.forms:
        return out
    sc = _Scanner(pep, m)
    keep = max([n for n, _, _ in m.forms] + [len(r) for r, _ in coincidences]) - 1
    for f in files:
        try:
            with open(f, "rb") as fh:
                n, tail = 0, b""
                while chunk := fh.read(_CHUNK):
                    buf = tail + chunk
                    n += sum(not _inside(buf, i, coincidences) for i, _ in sc.starts(buf, skip=len(tail)))
                    tail = buf[-keep:] if keep else b""
                out[str(f)] = n
        except FileNotFoundError:
            continue
    return out


def hex_coincidences(pep: bytes, m: Material, values: Iterable[str]) -> list[tuple[bytes, int]]:
    """(run, offset) of every copy of the literal inside a run of hex digits and dots (12 or
    more, longer than the copy) of ``values``: the store's digests, MACs, signatures, key ids and
    the receipts' decimal timestamps (``MemoryStore.bookkeeping_values``). A short literal such
    as ``4312`` turns up in one of a store's ~2,000 such digits about 3 % of the time (CI: 1 run
    in 100 of the README example); a file copy found at its offset inside such a run (in the
    table, an index, the WAL) holds no byte of the user's and is not counted. A run equal to the
    literal (a hexadecimal literal copied verbatim) excuses nothing."""
    if not m.forms:
        return []
    import bisect

    longest = max(n for n, _, _ in m.forms)
    runs = list(dict.fromkeys(r for v in values for r in _HEX_RUN.findall(v.encode("utf-8")) if len(r) > longest))
    starts, pos = [], 0
    for r in runs:  # one vectorised pass over the runs joined by a byte that is in none of them
        starts.append(pos)
        pos += len(r) + 1
    out = []
    for i, length in _Scanner(pep, m).starts(b"\n".join(runs)):
        k = bisect.bisect_right(starts, i) - 1
        if i + length <= starts[k] + len(runs[k]):
            out.append((runs[k], i - starts[k]))
    return out


def scan_store_files(pep: bytes, m: Material, store: MemoryStore) -> dict[str, int]:
    """``scan_files_for`` over the store's files with its own bookkeeping runs excused: the
    second look of a disk check whose plain scan found a copy (reading the bookkeeping costs
    a pass over every digest, so a check that finds nothing never pays it)."""
    return scan_files_for(pep, m, store.files(), hex_coincidences(pep, m, store.bookkeeping_values()))


def _inside(buf: bytes, i: int, coincidences: Sequence[tuple[bytes, int]]) -> bool:
    """The copy at ``buf[i:]`` lies at its offset inside one of ``coincidences``."""
    return any(i >= off and buf[i - off:i - off + len(r)] == r for r, off in coincidences)

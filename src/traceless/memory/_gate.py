"""Paper 001's sealed exact-literal write gate.

On forget, keyed HMAC-SHA256 descriptors of the exact UTF-8 attribute–value pair and of
the value alone are stored (never the value). The store checks every later write against
them (``MemoryStore`` enforces it on every write path): no normalisation of case,
whitespace, Unicode or meaning.

* a structured candidate ``{"attribute": A, "value": V}`` is refused iff HMAC(A ␀ V)
  matches a stored pair descriptor;
* any text is refused iff some substring of it has the exact bytes of a forgotten value
  (HMAC over every window of each forgotten value's byte length whose keyed fingerprint
  matches the value's: ``_gate_match``, linear in the text; descriptors made before the
  fingerprint existed are checked window by window);
* a value forgotten with ``match="normalized"`` also stores a ``norm`` descriptor: the HMAC
  of its compact form (``traceless.memory.compact``: NFKC, casefold, whitespace, dashes and
  zero-width characters dropped), and a text is refused iff its compact form contains it
  (case, full-width, U+2011, ZWSP/ZWJ, NFD, hyphen→space variants); the store also checks a
  raw record joined to the session's previous one (a copy split across two turns).

What is stored reveals nothing without the key: the owner is a keyed pseudonym, and the
value's byte length (needed to choose the windows) and its keyed window fingerprint are
sealed with AES-GCM under a key derived from the gate key. The holder of the gate key can, by construction, test
candidate values — a short or low-entropy literal can be enumerated by them, which is why
``forget`` warns about such literals.

The key is 32 random bytes in ``state_dir()/gate.key`` (mode 0600), created when the
first descriptor is stored, never logged. The store records the key's id next to its
descriptors and refuses writes when the key at hand is another one (fail closed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from traceless.errors import GateBlockedError
from traceless.keys import read_secret
from traceless.memory._gate_match import WindowHash
from traceless.memory._variants import compact
from traceless.paths import state_dir

__all__ = ["WriteGate", "GateEntry", "load_key", "gate_key_id", "enumerable_bits"]

_TEXT_CHUNK = 1 << 18  # characters of a text encoded and matched at a time
_SHORT_TEXT = 64  # characters up to which every window is HMAC-checked directly


def load_key(path: Path | None = None, *, create: bool = True) -> bytes:
    """Read (or, with ``create``, create with 0600) the gate key."""
    return read_secret(path or state_dir() / "gate.key", "gate key", create=create)


def gate_key_id(key: bytes) -> str:
    """The id a store records for the key its descriptors were made with (not the key)."""
    return hmac.new(key, b"traceless-gate-key-id", hashlib.sha256).hexdigest()[:16]


def enumerable_bits(literal: str) -> float:
    """log2 of the candidates an attacker holding the gate key must try for ``literal``:
    its length times log2 of the alphabet its character classes span."""
    classes = [
        (str.isdigit, 10), (str.islower, 26), (str.isupper, 26),
    ]
    alphabet = sum(size for test, size in classes if any(test(c) for c in literal))
    if any(not (c.isdigit() or c.islower() or c.isupper()) for c in literal):
        alphabet += 33 if all(ord(c) < 128 for c in literal) else 1000
    return len(literal) * math.log2(max(alphabet, 2))


@dataclass(frozen=True, order=True)
class GateEntry:
    """One stored descriptor: ``kind`` is ``pair``, ``value`` or ``norm``; ``sealed`` holds
    the AES-GCM-sealed byte length and window fingerprint of a value (None for pairs)."""

    kind: str
    mac: str
    attribute: str
    sealed: bytes | None = None


class WriteGate:
    """Keyed exact-literal write filter. ``enabled=False`` turns the filter off."""

    def __init__(self, key: bytes | None = None, *, enabled: bool = True) -> None:
        self._key = key if key is not None else load_key()
        self.enabled = enabled
        self._seal_key = hmac.new(self._key, b"traceless-gate-seal", hashlib.sha256).digest()
        self._windows = WindowHash(self._key)
        self._opened: dict[bytes, tuple[int, int | None]] = {}  # sealed → (length, fingerprint)

    @property
    def key_id(self) -> str:
        return gate_key_id(self._key)

    def _mac(self, data: bytes) -> str:
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()

    def owner_ref(self, owner: str) -> str:
        """Keyed pseudonym under which an owner's descriptors are stored."""
        return "g:" + self._mac(b"owner\x00" + owner.encode("utf-8"))[:32]

    def _value_mac(self, vb: bytes) -> str:
        return self._mac(b"value\x00" + vb)

    def descriptors(self, attribute: str, value: str) -> list[GateEntry]:
        """Entries to store for a forgotten pair (pair descriptor and value descriptor)."""
        vb = value.encode("utf-8")
        nonce = os.urandom(12)
        info = struct.pack(">II", len(vb), self._windows.fingerprint(vb))
        sealed = nonce + AESGCM(self._seal_key).encrypt(nonce, info, b"len")
        return [
            GateEntry("pair", self._mac(attribute.encode("utf-8") + b"\x00" + vb), attribute),
            GateEntry("value", self._value_mac(vb), attribute, sealed),
        ]

    def norm_descriptor(self, attribute: str, value: str) -> GateEntry:
        """The ``norm`` entry of a value forgotten with ``match="normalized"``: its compact form."""
        cb = compact(value).encode("utf-8")
        nonce = os.urandom(12)
        info = struct.pack(">II", len(cb), self._windows.fingerprint(cb))  # matched by fingerprint, as ``value``
        sealed = nonce + AESGCM(self._seal_key).encrypt(nonce, info, b"len")
        return GateEntry("norm", self._value_mac(cb), attribute, sealed)

    def match_normalized(self, text: str, stored: frozenset[GateEntry]) -> GateEntry | None:
        """The ``norm`` entry whose compact form the compact form of ``text`` contains, if any."""
        norm = {GateEntry("value", e.mac, e.attribute, e.sealed): e for e in stored if e.kind == "norm"}
        if not norm:
            return None
        hit = self.match_text(compact(text), frozenset(norm))
        return None if hit is None else norm[hit]

    def _length(self, e: GateEntry) -> int:
        return self._sealed_info(e)[0]

    def _sealed_info(self, e: GateEntry) -> tuple[int, int | None]:
        """A value entry's byte length and window fingerprint (None: made before fingerprints)."""
        assert e.sealed is not None
        got = self._opened.get(e.sealed)
        if got is None:
            raw = AESGCM(self._seal_key).decrypt(e.sealed[:12], e.sealed[12:], b"len")
            got = (int(struct.unpack(">I", raw[:4])[0]), int(struct.unpack(">I", raw[4:8])[0]) if len(raw) >= 8
                   else None)
            self._opened[e.sealed] = got
        return got

    def match_pair(self, attribute: str, value: str, stored: frozenset[GateEntry]) -> GateEntry | None:
        mac = self.descriptors(attribute, value)[0].mac
        return next((e for e in stored if e.kind == "pair" and e.mac == mac), None)

    def match_text(self, text: str, stored: frozenset[GateEntry]) -> GateEntry | None:
        """The entry whose forgotten value ``text`` contains byte for byte, if any. The
        text is encoded a chunk at a time (a big text is never copied whole)."""
        macs: dict[int, dict[str, GateEntry]] = {}
        wanted: dict[int, set[int]] = {}
        for e in stored:
            if e.kind == "value":
                n, fp = self._sealed_info(e)
                macs.setdefault(n, {})[e.mac] = e
                # an entry made before fingerprints existed is checked at every window
                wanted.setdefault(n, set()).add(-1 if fp is None else fp)
        if not wanted:
            return None
        if len(text) <= _SHORT_TEXT:  # a session id, a date: a few HMACs beat a vectorised pass
            tb = text.encode("utf-8", "surrogatepass")
            for n, by_mac in macs.items():
                for i in range(0, len(tb) - n + 1):
                    hit = by_mac.get(self._value_mac(tb[i: i + n]))
                    if hit is not None:
                        return hit
            return None
        top = max(wanted)
        for c in range(0, max(len(text), 1), _TEXT_CHUNK):
            head = text[c: c + _TEXT_CHUNK].encode("utf-8", "surrogatepass")
            data = head + text[c + _TEXT_CHUNK: c + _TEXT_CHUNK + top].encode("utf-8", "surrogatepass")[: top - 1]
            for i, n in self._windows.candidates(data, wanted, starts=len(head)):
                hit = macs[n].get(self._value_mac(data[i: i + n]))
                if hit is not None:
                    return hit
        return None

    def match(self, candidate: str, stored: frozenset[GateEntry]) -> GateEntry | None:
        """Strict parse: a JSON object with string ``attribute`` and ``value`` is a pair;
        anything is also checked as free text. No normalisation either way."""
        try:
            obj = json.loads(candidate)
        except (ValueError, TypeError, RecursionError):
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("attribute"), str) and isinstance(obj.get("value"), str):
            hit = self.match_pair(obj["attribute"], obj["value"], stored) or self.match_normalized(obj["value"], stored)
            if hit is not None:
                return hit
        return self.match_text(candidate, stored) or self.match_normalized(candidate, stored)

    def check_pair(self, attribute: str, value: str, stored: frozenset[GateEntry]) -> bool:
        """True if the exact pair is forgotten."""
        return self.match_pair(attribute, value, stored) is not None

    def check_text(self, text: str, stored: frozenset[GateEntry]) -> bool:
        """True if ``text`` contains the exact bytes of a forgotten value."""
        return self.match_text(text, stored) is not None

    def check_candidate(self, candidate: str, stored: frozenset[GateEntry]) -> bool:
        return self.match(candidate, stored) is not None

    def enforce(self, owner: str, candidate: str, stored: frozenset[GateEntry]) -> None:
        """Raise GateBlockedError if the gate is on and the candidate matches."""
        if not self.enabled or not stored:
            return
        hit = self.match(candidate, stored)
        if hit is not None:
            raise GateBlockedError(
                f"write refused by the exact-literal gate: owner {owner!r} asked that a value of attribute "
                f"{hit.attribute!r} be forgotten, and this write carries it. Nothing was written. "
                "Remove that value from the input; write without the gate (--no-gate) only if the user re-consented."
            )

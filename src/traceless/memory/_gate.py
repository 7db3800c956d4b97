"""Paper 001's sealed exact-literal write gate.

On forget, a keyed HMAC-SHA256 descriptor of the exact UTF-8 attribute–value pair is
stored (never the value). Before any later write changes memory, the candidate is
checked strictly: no normalisation of case, whitespace, Unicode or meaning. Two checks:

* a structured candidate ``{"attribute": A, "value": V}`` is refused iff
  HMAC(A ␀ V) matches a stored pair descriptor;
* a free-text candidate is refused iff some substring of it has the exact bytes of a
  forgotten value (HMAC over every window of each recorded value length). The
  descriptor records the value's byte length, which is the only thing it reveals.

The key is 32 random bytes in ``state_dir()/gate.key`` (mode 0600), created on first use
and never logged. "Gate off" disables only this filter; deletion still happens.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from traceless.errors import ConfigError, GateBlockedError
from traceless.paths import state_dir

__all__ = ["WriteGate", "ensure_key", "load_key"]


def ensure_key(path: Path, what: str = "key") -> bytes:
    """Read a 32-byte secret key file, creating it (mode 0600) on first use.

    Creation is atomic: the bytes are written and fsynced to a private temp file that is
    then hard-linked into place, so a crash never leaves an empty or short key and two
    processes racing on first use end up with the same key.
    """
    p = path
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(32))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, p)
        except FileExistsError:
            pass  # another process created it first: use theirs
        finally:
            tmp.unlink()
    mode = p.stat().st_mode & 0o777
    if mode & 0o077:
        raise ConfigError(f"{what} {p} is readable by others (mode {oct(mode)}); run: chmod 600 {p}")
    key = p.read_bytes()
    if len(key) < 32:
        raise ConfigError(
            f"{what} {p} is truncated ({len(key)} bytes); delete it only if nothing signed or gated depends on it"
        )
    return key


def load_key(path: Path | None = None) -> bytes:
    """Read (or create with 0600) the gate key."""
    return ensure_key(path or state_dir() / "gate.key", "gate key")


class WriteGate:
    """Keyed exact-literal write filter. ``enabled=False`` turns the filter off."""

    def __init__(self, key: bytes | None = None, *, enabled: bool = True) -> None:
        self._key = key if key is not None else load_key()
        self.enabled = enabled

    def _mac(self, data: bytes) -> str:
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()

    def descriptors(self, attribute: str, value: str) -> list[str]:
        """Descriptors to store for a forgotten pair (pair descriptor and value descriptor)."""
        vb = value.encode("utf-8")
        return [
            "pair:" + self._mac(attribute.encode("utf-8") + b"\x00" + vb),
            f"value:{len(vb)}:" + self._mac(b"value\x00" + vb),
        ]

    def check_pair(self, attribute: str, value: str, stored: set[str]) -> bool:
        """True if the exact pair is forgotten."""
        return self.descriptors(attribute, value)[0] in stored

    def check_text(self, text: str, stored: set[str]) -> bool:
        """True if ``text`` contains the exact bytes of a forgotten value."""
        lengths: dict[int, set[str]] = {}
        for d in stored:
            if d.startswith("value:"):
                _, size, mac = d.split(":", 2)
                lengths.setdefault(int(size), set()).add(mac)
        if not lengths:
            return False
        tb = text.encode("utf-8")
        for n, macs in lengths.items():
            for i in range(0, len(tb) - n + 1):
                if self._mac(b"value\x00" + tb[i : i + n]) in macs:
                    return True
        return False

    def check_candidate(self, candidate: str, stored: set[str]) -> bool:
        """Strict parse: a JSON object with string ``attribute`` and ``value`` is a pair;
        anything else is free text. No normalisation either way."""
        try:
            obj = json.loads(candidate)
        except (ValueError, TypeError):
            obj = None
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("attribute"), str)
            and isinstance(obj.get("value"), str)
            and self.check_pair(obj["attribute"], obj["value"], stored)
        ):
            return True
        return self.check_text(candidate, stored)

    def enforce(self, owner: str, candidate: str, stored: set[str]) -> None:
        """Raise GateBlockedError if the gate is on and the candidate matches."""
        if self.enabled and stored and self.check_candidate(candidate, stored):
            raise GateBlockedError(
                f"write refused by the exact-literal gate for owner {owner!r}: it carries a forgotten "
                "attribute–value pair. Nothing was written. (Turn the gate off only if the user re-consented.)"
            )

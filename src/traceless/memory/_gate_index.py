"""The store's write-gate index: the gate under the key its descriptors were made with
(fail closed on another key or a missing key id), the owner's stored descriptors (under the
owner's keyed pseudonym), and the checks every write runs against them (``MemoryStore``
calls them; ``with store.ungated(reason)`` turns them off, recorded)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from traceless.errors import ConfigError, GateBlockedError, GateKeyError
from traceless.memory._gate import GateEntry, WriteGate, gate_key_id, load_key
from traceless.memory._types import Tier

if TYPE_CHECKING:
    from traceless.memory._store import MemoryStore, NewArtifact

__all__ = ["GateIndex", "strings"]

_GATE_MEMO_MIN = 1 << 16  # texts this long that passed the gate are remembered (by keyed digest)


def _text_key(text: str, salt: str) -> bytes:
    """A keyed digest of a big text, encoded a chunk at a time (never copied whole)."""
    h = hashlib.blake2b(digest_size=16, key=salt.encode())
    for c in range(0, len(text), _GATE_MEMO_MIN):
        h.update(text[c: c + _GATE_MEMO_MIN].encode("utf-8", "surrogatepass"))
    return h.digest()


#: metadata the pipeline itself writes (a turn's role, lineage digests, the embedder's name):
#: never user data, and a forgotten word such as "user" must not refuse every later write
_INTERNAL_META = frozenset({"role", "sources", "embedder"})


def strings(obj: Any, *, top: bool = True) -> Iterator[str]:
    """Every string value in a JSON-like metadata value, but those of ``_INTERNAL_META``."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not (top and k in _INTERNAL_META):
                yield from strings(v, top=False)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from strings(v, top=False)



class GateIndex:
    """The gate of one store; ``cache`` holds what one write transaction read (reset at its
    ``BEGIN``), ``passed`` the big texts that passed under the same descriptors."""

    def __init__(self, store: MemoryStore, key: bytes | None) -> None:
        self._s = store
        self.key = key
        self.off: str | None = None
        """The reason given to ``MemoryStore.ungated`` while the gate is off."""
        self.cache: dict[str, Any] = {}
        self.passed: dict[tuple[str, bytes], frozenset[GateEntry]] = {}  # (owner, text digest) → entries

    def get(self, *, create: bool = False) -> WriteGate | None:
        """The gate under the key this store's descriptors were made with; None while the
        store has none (and ``create`` is False). Fails closed on another key."""
        if "gate" in self.cache and (self.cache["gate"] is not None or not create):
            return self.cache["gate"]  # type: ignore[no-any-return]
        recorded = self._s.get_meta("gate_key_id")
        if recorded is None:
            self._check_keyless_entries()
        if recorded is None and not create:
            if self._s._depth:  # no descriptor can appear while this transaction holds the lock
                self.cache["gate"] = None
            return None
        try:
            key = self.key if self.key is not None else load_key(create=recorded is None)
        except ConfigError as e:
            raise GateKeyError(
                f"{self._s.path} holds write-gate descriptors but the gate key is unusable ({e}). Writes are "
                "refused so that no forgotten value is accepted again. Restore the gate.key this store was "
                "used with into $TRACELESS_HOME (copy it along with the db)."
            ) from None
        if recorded is not None and gate_key_id(key) != recorded:
            raise GateKeyError(
                f"{self._s.path}'s write-gate descriptors were made with gate key id {recorded}, but the key in "
                f"$TRACELESS_HOME has id {gate_key_id(key)}: with another key every descriptor would stop "
                "matching, so writes are refused (fail closed). Restore the original gate.key (copy it with "
                "the db), or point TRACELESS_HOME at the folder that holds it."
            )
        g = WriteGate(key)
        if self._s._depth:
            self.cache["gate"] = g
        return g

    def _check_keyless_entries(self) -> None:
        """Descriptors without the key id they were made under: the gate cannot be checked,
        so every write is refused (an unset id must never read as "no gate")."""
        row = self._s._exec("SELECT key_id FROM gate_entries LIMIT 1").fetchone()
        if row is not None:
            raise GateKeyError(
                f"{self._s.path} holds write-gate descriptors (made with gate key id {str(row[0])[:16]}) but its meta "
                "table no longer records the gate key id: the store was altered. Writes are refused (fail closed) "
                "so that no forgotten value is accepted again; restore the store from a backup."
            )

    def descriptors(self, owner: str) -> frozenset[GateEntry]:
        """The owner's stored gate entries (looked up under the owner's keyed pseudonym)."""
        g = self.get()
        if g is None:
            return frozenset()
        ref = g.owner_ref(owner)
        cached = self.cache.get(ref)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        rows = self._s._exec("SELECT kind, mac, attribute, sealed FROM gate_entries WHERE owner_ref = ?", (ref,))
        out = frozenset(GateEntry(r[0], r[1], r[2], r[3]) for r in rows)
        if self._s._depth:
            self.cache[ref] = out
        return out

    def check(self, owner: str, text: str | None, *, old: str | None = None) -> None:
        """Refuse ``text`` if it carries a value ``owner`` asked to forget. A rewrite (``old``
        given) that already carried it is let through: forgetting must stay possible."""
        if self.off is not None or not text:
            return
        stored = self.descriptors(owner)
        if not stored:
            return
        g = self.get()
        assert g is not None
        # a writer checks its texts before its transaction and the store again on insert: a
        # big text that passed under the same descriptors is not matched twice
        seen = _text_key(text, g.key_id) if len(text) >= _GATE_MEMO_MIN else None
        if seen is not None and self.passed.get((owner, seen)) == stored:
            return
        hit = g.match(text, stored)
        if hit is None or (old is not None and g.match(old, stored) is not None):
            if seen is not None and hit is None:
                if len(self.passed) >= 64:
                    self.passed.clear()
                self.passed[(owner, seen)] = stored
            return
        raise GateBlockedError(
            f"write refused by the {'normalised' if hit.kind == 'norm' else 'exact-literal'} gate: owner {owner!r} "
            f"asked that a value of attribute {hit.attribute!r} be forgotten, and this write carries it"
            f"{' (a near variant)' if hit.kind == 'norm' else ''}. Nothing was written. Remove that "
            "value from the input; write without the gate (--no-gate) only if the user re-consented."
        )

    def check_fields(self, owner: str, session_id: str | None, meta: dict[str, Any],
                     checked: set[tuple[str, str]] | None = None) -> None:
        """The gate on what a write stores besides its text: the session id and every string
        value of the metadata (a date, a title). ``checked``: values of this batch
        already let through (a session's many rows share one id and date)."""
        for value in (session_id, *strings(meta)):
            if value and (checked is None or (owner, value) not in checked):
                self.check(owner, value)
                if checked is not None:
                    checked.add((owner, value))

    def check_split(self, new: Sequence[NewArtifact]) -> None:
        """Under ``norm`` descriptors (a value forgotten with ``match="normalized"``), refuse a raw
        record that completes a copy split across it and the session's previous raw record."""
        last: dict[tuple[str, str], str] = {}
        for n in new:
            if self.off is not None or n.tier != Tier.RAW or not n.session_id or not n.text:
                continue
            stored = self.descriptors(n.owner)
            if not any(e.kind == "norm" for e in stored):
                continue
            key = (n.owner, n.session_id)
            if key not in last:
                prev = self._s.artifacts(owner=n.owner, tier=Tier.RAW, session_id=n.session_id)
                last[key] = max(prev, key=lambda a: (a.seq, a.id)).text or "" if prev else ""
            g = self.get()
            assert g is not None
            hit = g.match_normalized(last[key] + "\n" + n.text, stored)
            if hit is not None and g.match_normalized(last[key], stored) is None:
                raise GateBlockedError(
                    f"write refused by the normalised write gate: owner {n.owner!r} asked that a value of attribute "
                    f"{hit.attribute!r} be forgotten, and this record completes a copy of it split with the "
                    "session's previous record. Nothing was written. Remove that value from the input."
                )
            last[key] = n.text

    def add(self, owner: str, entry: GateEntry) -> None:
        """Store one gate entry for ``owner`` (made by ``self.get(create=True)``)."""
        self._s._require_tx()
        g = self.get(create=True)
        assert g is not None
        if self._s.get_meta("gate_key_id") is None:
            self._s.set_meta("gate_key_id", g.key_id)
        self._s._exec(
            self._s._b.upsert("gate_entries", ("owner_ref", "kind", "mac", "attribute", "sealed", "key_id", "created_at"),
                           ("owner_ref", "kind", "mac"), replace=False),
            (g.owner_ref(owner), entry.kind, entry.mac, entry.attribute, entry.sealed, g.key_id, time.time()),
        )
        self.cache.pop(g.owner_ref(owner), None)

    def forget(self, owner: str, attribute: str, value: str, *, normalized: bool = False) -> int:
        """Store the descriptors of a forgotten attribute–value pair (with ``normalized`` also
        the ``norm`` descriptor of its compact form); returns how many."""
        self._s._require_tx()
        g = self.get(create=True)
        assert g is not None
        entries = g.descriptors(attribute, value) + ([g.norm_descriptor(attribute, value)] if normalized else [])
        for e in entries:
            self.add(owner, e)
        return len(entries)

"""The erasure kernel: the one literal-match rule, scan, plan, the bystander digest, the
audit's per-store copy count and the erasure's execution, over any ``LiveInstance``
(``traceless.systems.contract``). Nothing here knows a system.

The plan, per record the instance returns:

* the requester's record (``owner == user``) is removed;
* with a user, another user's record that holds a literal is rewritten (``others_policy =
  "rewrite"``) or left and counted in ``held_by_others`` (``"leave"``: the scope check then
  refuses the literal, nothing changed); a record of nobody that holds a literal is the user's
  unattributable residue: rewritten, or removed (``NO_OWNER``) where the system cannot rewrite;
* without a user (``--literal`` only) every record holding a literal is rewritten, or removed
  where the system cannot rewrite;
* a removed record's ``linked`` records (a memory's history rows) are removed with it.

The bystander digest covers every record that is not the requester's and that the plan does
not remove, each with the literals replaced as a rewrite replaces them: a planned rewrite
digests the same before and after, any other change does not.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from traceless.forget import encodings_of
from traceless.systems._erase import ErasurePlan, PlannedAction, ScanHit, ScanReport, StoreOutcome
from traceless.systems.contract import LiveInstance, Op, Record, Remove, Rewrite

__all__ = [
    "ERASED",
    "LIVE_ROUNDS",
    "NO_OWNER",
    "StoreDigest",
    "bystander_changes",
    "bystander_digests",
    "bystander_rows",
    "byte_forms",
    "count_in_blobs",
    "count_literals",
    "digest",
    "execute",
    "literal_forms",
    "plan",
    "record_hash",
    "replace_literals",
    "scan",
    "store_copies",
    "stream_hash",
]

ERASED = "[erased]"
"""What a rewrite puts where a literal was."""
NO_OWNER = "holds a literal (no owner)"
"""Plan reason of an unattributable record removed as residue (mem0's orphan history rows)."""
LIVE_ROUNDS = 3
"""Plan → apply rounds while the app keeps writing the user's records (then the re-scan decides)."""


@functools.lru_cache(maxsize=1024)
def literal_forms(literal: str) -> tuple[str, ...]:
    """The forms a literal takes in a record's text: itself and, for a non-ASCII one, the JSON
    ``\\uXXXX`` escapes in lower and upper hex (what the byte scan's ``encodings_of`` knows,
    decoded: UTF-16 is a byte form, not a text one)."""
    if literal.isascii():
        return (literal,) if literal else ()
    lower = json.dumps(literal)[1:-1]
    upper = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), lower)
    return tuple(dict.fromkeys((literal, lower, upper)))


@functools.lru_cache(maxsize=64)
def _all_forms(literals: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for lit in literals for f in literal_forms(lit))


def count_literals(text: str, literals: Sequence[str]) -> int:
    """The one literal-match rule: occurrences of the literals (every form) in ``text``."""
    return sum(map(text.count, _all_forms(tuple(literals)))) if literals else 0


def byte_forms(literals: Sequence[str]) -> list[bytes]:
    """The same rule on bytes (a blob, a file): every encoding of every literal the byte scan
    knows (``traceless.forget.encodings_of``: UTF-8, UTF-16, JSON escapes)."""
    return [f for lit in literals for f in encodings_of(lit) if f]


def count_in_blobs(blobs: Iterable[Any], forms: Sequence[bytes]) -> int:
    """Occurrences of ``byte_forms`` in column values (str, bytes; numbers and NULL hold none)."""
    n = 0
    for b in blobs:
        if b is None or isinstance(b, int | float):
            continue
        data = b.encode("utf-8") if isinstance(b, str) else bytes(b)
        n += sum(data.count(f) for f in forms)
    return n


StoreDigest = tuple[str, ...]
"""One store's bystander digest: each record's digest text hashed (SHA-256, first 128 bits, hex),
sorted: the multiset of the store's records, so that records another writer added meanwhile are
told apart from records changed or removed (``bystander_changes``)."""


def digest(texts: Iterable[str]) -> StoreDigest:
    """The one bystander digest of one store: its records' digest texts, hashed (``record_hash``)
    and sorted. Sorted as the hashes' 128-bit numbers, then written as hex once (the same order:
    lowercase hex of equal length sorts as the bytes it writes): at 10^6 records 1.1 s against
    1.3 s for each hash made a hex string and the strings sorted (measured)."""
    import numpy as np

    sha = hashlib.sha256
    raw = b"".join([sha(t.encode("utf-8")).digest()[:16] for t in texts])
    pairs = np.frombuffer(raw, dtype=">u8").reshape(-1, 2)
    hexed = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))].tobytes().hex()
    return tuple([hexed[i:i + 32] for i in range(0, len(hexed), 32)])


def record_hash(text: str) -> str:
    """One record's entry in a bystander digest (``digest``): SHA-256 of its text, 128 bits, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def stream_hash() -> Any:
    """The hash of a container's bystanders digested as one stream (a JSON collection's entries
    or a table's rows in their order, fed one after another): SHA-256; its hex digest is the
    container's entry in the store's digest (``_llamaindex_live.stream_digest``)."""
    return hashlib.sha256()


def bystander_changes(before: Mapping[str, Sequence[str]],
                      after: Mapping[str, Sequence[str]]) -> tuple[list[str], list[str]]:
    """Compare two ``bystander_digests``: (the stores where a record that was there before is
    changed or gone: an over-deletion, the stores where records were only added: another writer,
    e.g. the application serving other users while the erasure runs). A changed record is one
    gone and one added: it counts as gone."""
    lost, added = [], []
    for store in sorted(set(before) | set(after)):
        if tuple(before.get(store, ())) == tuple(after.get(store, ())):
            continue  # the same records (most stores, most erasures): no multiset of 10^6 digests built
        was, now = Counter(before.get(store, ())), Counter(after.get(store, ()))
        if was - now:
            lost.append(store)
        elif now - was:
            added.append(store)
    return lost, added


def replace_literals(value: Any, literals: Sequence[str]) -> Any:
    """A string with every form of every literal replaced by ``ERASED``; any other value unchanged."""
    if not isinstance(value, str):
        return value
    for f in _all_forms(tuple(literals)):
        value = value.replace(f, ERASED)
    return value


def _count(r: Record, literals: Sequence[str]) -> dict[str, int]:
    """Field → occurrences of the literals, fields without one left out. The whole record is
    matched once first: a field's occurrence is one of the joined text's, so a record with
    none (nearly every record) costs one pass instead of one per field."""
    if not literals or not count_literals("\0".join(r.fields.values()), literals):
        return {}
    found = {k: count_literals(v, literals) for k, v in r.fields.items()}
    return {k: n for k, n in found.items() if n}


def scan(system: str, inst: LiveInstance, user: str | None, literals: Sequence[str], *,
         reveal: bool = False) -> ScanReport:
    """The user's records and every record holding a literal, per store (read-only). An instance
    that counts its stores where they live (``counts``) is read for the user's and the literals'
    records only; any other is read whole (every record counted)."""
    report = ScanReport(system=system, user=user, literals=len(literals), stores=dict.fromkeys(inst.stores(), 0))
    counts = inst.counts()  # counted where the records live: then only the user's and the literals' are read
    if counts is not None:
        report.stores.update(counts)
    for r in inst.records(None, ()) if counts is None else inst.records(user, literals):
        if counts is None:
            report.stores[r.store] = report.stores.get(r.store, 0) + 1
        mine = user is not None and r.owner == user
        found = _count(r, literals)
        if mine or found:
            report.hits.append(ScanHit(store=r.store, record_id=r.id, field=",".join(found) or "*", owner_match=mine,
                                       owner=r.owner,
                                       literal_count=sum(found.values()), value=r.text() if reveal else None))
    return report


def _decide(inst: LiveInstance, r: Record, user: str | None, literals: Sequence[str]) -> Op | None | bool:
    """The op for one record; ``True``: another user's record left holding a literal."""
    if user is not None and r.owner == user:
        return Remove(r, "owned by the user")
    if not _count(r, literals):
        return None
    rewrite = inst.others_policy == "rewrite"
    if user is None or r.owner is None:
        return Rewrite(r, "holds a literal") if rewrite else Remove(r, "holds a literal" if user is None else NO_OWNER)
    return Rewrite(r, "holds a literal") if rewrite else True


def plan_ops(inst: LiveInstance, user: str | None, literals: Sequence[str]) -> tuple[list[Op], int]:
    """Every op of the erasure, and how many other users' records are left holding a literal."""
    recs = list(inst.records(user, literals))
    by_key = {(r.store, r.id): r for r in recs}
    ops: list[Op] = []
    held = 0
    for r in recs:
        op = _decide(inst, r, user, literals)
        if op is True:
            held += 1
        elif isinstance(op, (Remove, Rewrite)):
            ops.append(op)
    planned = {(o.record.store, o.record.id) for o in ops}
    for o in [o for o in ops if isinstance(o, Remove)]:
        for key in o.record.linked:
            if key not in planned:
                planned.add(key)
                ops.append(Remove(by_key.get(key) or Record(key[0], key[1], None, {}), "history of an erased memory"))
    return ops, held


def plan(system: str, inst: LiveInstance, user: str | None, literals: Sequence[str]) -> ErasurePlan:
    """The erasure's plan (``--dry-run``), computed before any change."""
    ops, held = plan_ops(inst, user, literals)
    actions = [PlannedAction(store=o.record.store, record_id=o.record.id,
                             action="remove" if isinstance(o, Remove) else "rewrite", reason=o.reason) for o in ops]
    return ErasurePlan(system=system, user=user, actions=actions, compaction=inst.compaction() if actions else [],
                       held_by_others=held)


def execute(inst: LiveInstance, planned: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
    """Carry out the plan, then plan again on what is left (an app still writing the user's
    records, residue a native deletion left) for up to ``LIVE_ROUNDS`` rounds."""
    ops, _ = plan_ops(inst, planned.user, literals)
    have = {(o.record.store, o.record.id) for o in ops}
    stores = set(inst.stores())
    for a in planned.actions:  # planned earlier (the journal), not found now: gone, or its link is
        if (a.store, a.record_id) not in have and a.store in stores:
            rec = Record(a.store, a.record_id, None, {})
            ops.append(Remove(rec, a.reason) if a.action == "remove" else Rewrite(rec, a.reason))
    outcomes: dict[str, StoreOutcome] = {}
    # the rounds look for records to remove; with a user and the rewrite policy only the user's
    # records are removed, whatever they hold: the literals' search is not run again for them
    again = () if planned.user is not None and inst.others_policy == "rewrite" else literals
    for _ in range(LIVE_ROUNDS):
        for o in inst.apply(ops, literals):
            _merge(outcomes, o)
        ops = [o for o in plan_ops(inst, planned.user, again)[0] if isinstance(o, Remove)]
        if not ops:
            break
    return list(outcomes.values())


def _merge(outcomes: dict[str, StoreOutcome], o: StoreOutcome) -> None:
    have = outcomes.get(o.store)
    if have is None:
        outcomes[o.store] = o.model_copy(deep=True)
        return
    have.removed += o.removed
    have.rewritten += o.rewritten
    have.compacted = have.compacted or o.compacted
    have.notes = list(dict.fromkeys([*have.notes, *o.notes]))


def bystander_rows(inst: LiveInstance, user: str | None, literals: Sequence[str],
                   removed: Iterable[tuple[str, str]] = ()) -> list[tuple[tuple[str, str], str]]:
    """((store, id), digest text) of every record that is not ``user``'s and not in ``removed``,
    its literals replaced (a planned rewrite digests the same); the text holds no id (VACUUM may
    renumber rowids)."""
    skip = set(removed)
    out: list[tuple[tuple[str, str], str]] = []
    for r in inst.records(None, ()):
        if (user is not None and r.owner == user) or (r.store, r.id) in skip:
            continue
        fields = "\t".join(f"{k}={replace_literals(v, literals)}" for k, v in sorted(r.fields.items()))
        out.append(((r.store, r.id), f"{r.owner}\t{fields}"))
    return out


def bystander_digests(inst: LiveInstance, user: str | None, literals: Sequence[str],
                      removed: Iterable[tuple[str, str]] = ()) -> dict[str, StoreDigest]:
    """Per store: the digest (``digest``) of the bystanders (``bystander_rows``, or the instance's own
    ``server_bystanders``, as its ``online_bystanders`` takes them: a server shared with a running
    app keeps its first digest's)."""
    texts: dict[str, list[str]] = {s: [] for s in inst.stores()}
    removed = set(removed)
    rows = inst.server_bystanders(user, literals, removed)  # digested where they live, when the instance can
    for (store, _), text in inst.online_bystanders(bystander_rows(inst, user, literals, removed)
                                                   if rows is None else rows):
        texts.setdefault(store, []).append(text)
    return {store: digest(ts) for store, ts in texts.items()}


def store_copies(inst: LiveInstance, literals: Sequence[str]) -> dict[str, int]:
    """The audit's per-store copy count: occurrences of the literals, by the one match rule."""
    out = dict.fromkeys(inst.stores(), 0)
    for r in inst.records(None, literals):
        out[r.store] = out.get(r.store, 0) + count_literals(r.text(), literals)
    return out

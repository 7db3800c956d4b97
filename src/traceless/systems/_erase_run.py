"""The one driver of ``traceless scan`` and ``traceless forget --memory SYSTEM``: plan →
journal → execute → re-scan → bystander check → sign. Adapters implement the four methods
of ``MemorySystem`` named in ``_erase``; nothing here knows any system.

Crash safety: before the first change a journal (``state_dir/erasures/<id>.json``, written
atomically) records the plan's digest and the bystanders' digests *before*; a re-run of
the same request finds it, recomputes the plan on what is left (adapters' execution is
idempotent), finishes, verifies against the journalled bystanders and only then signs and
removes the journal. The receipt is written after verification, never before (with
``receipt_out``: before the journal is removed, so a kill leaves the journal or the receipt).

The journal keeps the whole plan: the re-run executes it merged with a plan of what is
left, since what tied some records to the user may be gone (mem0's history rows belong to
the user only through the memory ids ``delete_all`` removed). ``bystander_digests`` is
called after ``plan_erasure``: records the plan targets (e.g. another user's record that
holds a literal) are not bystanders. Without literals no file is byte-scanned, so no store
is claimed ``clear`` and ``files_clean`` is not among the checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError, NothingToEraseError, TracelessError, UnsupportedError
from traceless.forget import (
    Receipt,
    TargetRef,
    TierReport,
    Verification,
    pseudonym,
    scan_files,
    sign,
    write_receipt,
)
from traceless.systems._base import MemorySystem, SystemRuntime
from traceless.systems._erase import CLAIM_LEVELS, ClaimLevel, ErasurePlan, FileHit, ScanReport, StoreOutcome
from traceless.systems._literals import Match, check_literals, matched_literals
from traceless.systems._scope import check_scope
from traceless.systems.contract import Capability
from traceless.systems.kernel import StoreDigest, bystander_changes

__all__ = ["check_certifiable", "erase_system", "plan_system_erasure", "scan_system", "verified_at"]


OFFLINE_NOTE = ("verified with the application stopped: {name} is not safe to erase beside its running "
                "application (LlamaIndex writes its in-memory index back whole; LanceDB, under CrewAI, removes a "
                "version's files mid-read), so one that ran during or after this erasure may restore erased "
                "records; re-check with `traceless scan --since` this receipt")
"""The receipt's note for a system without ``Capability.ONLINE``."""


VERIFIED_AT = "verified at "
"""The receipt note stating the verification's moment (``verified_at``)."""


def verified_at(receipt: Receipt) -> float:
    """When the erasure's verification re-scan began (its receipt's note): the end of the window
    it covers; the receipt's creation time for a receipt without the note."""
    for n in receipt.notes:
        if n.startswith(VERIFIED_AT):
            return float(n[len(VERIFIED_AT):].split(" ", 1)[0])
    return receipt.created_at


def scan_system(system: MemorySystem, user: str | None, literals: Sequence[str], *,
                reveal: bool = False, match: Match = "exact") -> ScanReport:
    """The adapter's read-only scan, with the byte scan of the instance's files added, and
    the read-only check measured: each file's size and mtime before and after, no file added
    or removed (an application writing meanwhile shows up as a change too). The byte scan runs
    in a second thread beside the adapter's scan (both read only; on two cores the scan of a
    10^6-memory mem0 instance takes the longer of the two, not their sum). ``match``:
    ``normalized`` also finds the literals' other spellings (``matched_literals``)."""
    before = _stat_all(system.instance_files())
    if match != "exact":
        literals = matched_literals(system.instance_files(), literals, match)
    files = system.instance_files()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceless-byte-scan") as pool:
        # every literal, each file read once; beside the stores' scan (its reads and matching release the GIL)
        counting = pool.submit(scan_files, files, literals) if literals else None
        report = system.scan(user, literals, reveal=reveal)
        counts = counting.result() if counting is not None else None
    if counts is not None and not report.files:
        report = report.model_copy(update={
            "files": [FileHit(path=p, count=n) for p, n in sorted(counts.items()) if n],
            "files_scanned": len(files)})
    after = _stat_all(system.instance_files())
    return report.model_copy(update={"files_unchanged": (before == after) if before or after else None,
                                      "files_checked": len(before)})


def _stat_all(files: Sequence[Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def plan_system_erasure(system: MemorySystem, user: str | None, literals: Sequence[str],
                        match: Match = "exact") -> ErasurePlan:
    """The plan (``--dry-run``); nothing of the user → ``NothingToEraseError``; a literal the
    own store would refuse (under ``MIN_LITERAL_CHARS``) → ``ConfigError`` before anything; a
    plan that would change or leave other users' copies of a literal → ``ErasureScopeError``
    (``_scope``). ``match``: ``normalized`` plans for the literals' other spellings too."""
    literals = matched_literals(system.instance_files(), literals, match)
    plan = system.plan_erasure(user, literals)
    if plan.empty() and plan.held_by_others:
        raise NothingToEraseError(
            f"{system.name}: nothing of the user was found; the literals are held by {plan.held_by_others} "
            "other users' records, which are left untouched; nothing was erased and no receipt was signed")
    if plan.empty():
        raise NothingToEraseError(
            f"{system.name}: nothing of {'the user' if user else 'the literals'} was found in any store; "
            "nothing was erased and no receipt was signed (check the user id with `traceless scan`)")
    if literals and user is not None:  # a literal-only request erases the literal wherever it is
        check_scope(system.name, plan, user, [system.scan(user, [lit], reveal=False) for lit in literals])
    return plan


def _request_id(system: MemorySystem, user: str | None, literals: Sequence[str], key: bytes) -> str:
    """Keyed by the instance too (its resolved config: paths, or server + db + collection), so
    an interrupted erasure on one instance is completed on that instance only."""
    h = hashlib.sha256(key)
    for part in (system.name, _instance_identity(system), user or "", *sorted(literals)):
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()[:24]


def _instance_identity(system: MemorySystem) -> str:
    def resolve(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: resolve(x) for k, x in v.items()}
        if isinstance(v, list):
            return [resolve(x) for x in v]
        if isinstance(v, str) and os.sep in v and os.path.exists(v):
            return os.path.realpath(v)
        return v
    # an instance opened in a directory (``open_system``: the audit's, the suite's) may name no
    # path in its config: its directory tells it apart (an attached one's is derived from the config)
    where = os.path.realpath(system.work_dir) if system.work_dir.is_absolute() else ""
    return json.dumps([resolve(system.config.model_dump(mode="json")), where], sort_keys=True, default=str)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _claim(outcome: StoreOutcome, records_left: int, bytes_left: bool, scanned: bool) -> ClaimLevel:
    if records_left:
        return "none"
    if bytes_left or not scanned:
        return "logical"
    return min(max(outcome.claim, "clear", key=CLAIM_LEVELS.index), outcome.ceiling, key=CLAIM_LEVELS.index)


def check_certifiable(system: MemorySystem, runtime: SystemRuntime) -> None:
    """The precondition of ``forget --certify``: the system declares ``Capability.CERTIFY`` and
    its ``probe_ready`` proves every probe can run. Any failure is one ``ConfigError`` line (a
    plug-in's own exception included) that says nothing was erased."""
    if Capability.CERTIFY not in system.capabilities:
        raise UnsupportedError(f"--certify is not available for {system.name!r} live instances; run the erasure "
                               "without --certify: its receipt is signed as before")
    try:
        system.probe_ready(runtime)
    except TracelessError:
        raise
    except Exception as e:  # a plug-in's probe that cannot run: refused in one line, never after the erasure
        first = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(f"{system.name}: --certify cannot run here ({type(e).__name__}: {first}); fix the "
                          "probes' model or embedder in the memory config, or run without --certify; "
                          "nothing was erased") from None


def _preconditions(system: MemorySystem, certify: SystemRuntime | None) -> None:
    """Everything checked before the first write (the journal): the instance erasable now, the
    certificate's probes able to run after it."""
    system.check_erasable()
    if certify is not None:
        check_certifiable(system, certify)


def erase_system(system: MemorySystem, user: str | None, literals: Sequence[str], *, state_dir: Path,
                 key: bytes, receipt_out: Path | None = None, request_id: str = "",
                 certify: SystemRuntime | None = None, match: Match = "exact") -> Receipt:
    """Erase ``user`` (and every record holding a literal) from the attached live instance,
    verify, and sign (``request_id``: the ticket the receipt answers, signed into it). ``key`` is
    the receipts' pepper (``receipt_key()``). With ``receipt_out``
    the signed receipt is written there before the journal is removed, so a kill at any
    moment leaves either a journal (the re-run finishes) or the receipt. ``certify``: the
    runtime the certificate's probes will run with after the erasure; they are proved able to
    run (``check_certifiable``) before the journal, so a certificate that cannot be made
    refuses the erasure with nothing changed. ``match``: ``normalized`` erases the literals' other
    spellings too (``matched_literals``), each as a literal."""
    check_literals(literals, match)  # before the journal, the plan or any change
    journal_dir = state_dir / "erasures"
    journal_dir.mkdir(parents=True, exist_ok=True)
    keyed = [*literals, *(["match=normalized"] if match == "normalized" else [])]
    journal = journal_dir / f"{_request_id(system, user, keyed, key)}.json"
    # every spelling the instance holds now (a re-run finds those an interrupted run left)
    literals = matched_literals(system.instance_files(), literals, match)
    t0 = time.monotonic()
    if journal.exists():
        doc = json.loads(journal.read_text(encoding="utf-8"))
        # what is left of an interrupted run, plus what the journal planned: a record the
        # first run removed may be what ties its residue to the user (mem0's history rows)
        plan = _union(ErasurePlan.model_validate(doc["plan"]), system.plan_erasure(user, literals))
        _preconditions(system, certify)
        before = _journalled_bystanders(system, user, doc)
    else:
        plan = plan_system_erasure(system, user, literals)
        _preconditions(system, certify)  # before the journal and any change: "nothing was erased yet" is true
        before = system.bystander_digests(user)  # after the plan: what it targets is no bystander
        _write_json(journal, {"plan": plan.model_dump(mode="json"), "bystanders": before, "started": time.time()})
    outcomes = {o.store: o for o in [*system.execute_erasure(plan, literals), *system.clear_serving_cache()]}
    receipt = _verify_compacting(system, user, literals, plan, outcomes, before, key, t0, request_id)
    for _ in range(VERIFY_ROUNDS):  # an application still writing the user's records: erase them too, verify again
        if receipt.verification.passed or not _only_the_users_records_left(receipt):
            break
        # the same plan again: each system's execution finds what is left of the user (a new plan
        # would restart a server's online bystander rule on rows the app has changed meanwhile)
        for o in system.execute_erasure(plan, literals):
            outcomes[o.store] = outcomes.get(o.store, o)
        receipt = _verify_compacting(system, user, literals, plan, outcomes, before, key, t0, request_id)
    if receipt_out is not None:
        write_receipt(receipt, receipt_out)
    journal.unlink(missing_ok=True)
    return receipt


VERIFY_ROUNDS = 3
"""Erase-and-verify rounds after the first while the verification finds only records of the user
(an application still writing them): then the receipt fails honestly, naming the stores."""


def _verify_compacting(system: MemorySystem, user: str | None, literals: Sequence[str], plan: ErasurePlan,
                       outcomes: dict[str, StoreOutcome], before: dict[str, StoreDigest], key: bytes, t0: float,
                       request_id: str) -> Receipt:
    """Verify and sign; when the verification's byte scan still finds the literals in files and
    the system has a ``compact_residue(file_names)`` hook (mem0 on qdrant local: VACUUM only
    where the bytes are, its deletions having zeroed the records' pages), compact those files
    and verify again: the claim is always what the last byte scan proved."""
    receipt = _verify_and_sign(system, user, literals, plan, outcomes, before, key, time.monotonic() - t0,
                               request_id)
    compact = getattr(system, "compact_residue", None)
    held = sorted(receipt.verification.disk_scan)
    if receipt.verification.checks.get("files_clean", True) or not held or not callable(compact):
        return receipt
    extra: list[StoreOutcome] = compact(held)
    if not extra:
        return receipt
    for o in extra:
        cur = outcomes.get(o.store)
        outcomes[o.store] = o if cur is None else cur.model_copy(
            update={"compacted": cur.compacted or o.compacted, "notes": [*cur.notes, *o.notes]})
    return _verify_and_sign(system, user, literals, plan, outcomes, before, key, time.monotonic() - t0, request_id)


def _only_the_users_records_left(receipt: Receipt) -> bool:
    """The verification failed only because records of the user are there (and their bytes):
    not bytes alone in free space (another round cannot change that), nor any other check."""
    failed = [k for k, ok in receipt.verification.checks.items() if not ok]
    records = [k for k in failed if k.startswith("store_clean:")]
    return bool(records) and all(k in records or k == "files_clean" for k in failed)


def _journalled_bystanders(system: MemorySystem, user: str | None, doc: dict[str, Any]) -> dict[str, StoreDigest]:
    """The bystanders' digests *before*, as the interrupted run journalled them. A journal written
    before digests were per record (a count and one hash per store) cannot tell the
    application's new records from an over-deletion: the bystanders are then digested afresh."""
    stored = doc["bystanders"]
    if any(len(v) == 2 and isinstance(v[0], int) for v in stored.values()):
        return system.bystander_digests(user)
    before = {k: tuple(str(h) for h in v) for k, v in stored.items()}
    system.resume_bystanders(before)
    return before


def _union(first: ErasurePlan, now: ErasurePlan) -> ErasurePlan:
    seen = {(a.store, a.record_id) for a in first.actions}
    extra = [a for a in now.actions if (a.store, a.record_id) not in seen]
    return first.model_copy(update={"actions": [*first.actions, *extra],
                                    "compaction": list(dict.fromkeys([*first.compaction, *now.compaction]))})


def _verify_and_sign(system: MemorySystem, user: str | None, literals: Sequence[str], plan: ErasurePlan,
                     outcomes: dict[str, StoreOutcome], before: dict[str, StoreDigest], key: bytes,
                     seconds: float, request_id: str = "") -> Receipt:
    verified = time.time()  # the window: what the app writes for the user after it is not covered
    after_scan = scan_system(system, user, literals)
    after = system.bystander_digests(user)
    left: dict[str, int] = {}
    for h in after_scan.hits:
        left[h.store] = left.get(h.store, 0) + 1
    bytes_left = bool(after_scan.files)
    tiers: dict[str, TierReport] = {}
    claims: dict[str, ClaimLevel] = {}
    for store in sorted(set(after_scan.stores) | set(outcomes)):
        o = outcomes.get(store, StoreOutcome(store=store))
        claims[store] = _claim(o, left.get(store, 0), bytes_left, bool(literals))
        removed = [pseudonym(a.record_id, "r", key) for a in plan.actions if a.store == store and a.action == "remove"]
        rewritten = [pseudonym(a.record_id, "r", key) for a in plan.actions if a.store == store
                     and a.action == "rewrite"]
        # ``left``: the user's records still there (never the instance's totals: they would tell
        # the requester how many records the other users keep)
        tiers[store] = TierReport(removed=removed, rewritten=rewritten, left=left.get(store, 0),
                                  target_copies_after=left.get(store, 0))
    checks = {f"store_clean:{s}": left.get(s, 0) == 0 for s in tiers}
    if literals:  # without a literal there are no bytes to look for: no check true by construction
        checks["files_clean"] = not bytes_left
    lost, added = bystander_changes(before, after)
    checks["bystanders_intact"] = not lost
    owner = pseudonym(user, "u", key) if user else ""
    verification = Verification(
        claims=[f"{s}:{c}" for s, c in claims.items()], sources_removed=[], sources_gone=not left,
        surviving_descendants=[], closure_clean=not left, literal_scan=dict(left),
        disk_scan={Path(f.path).name: f.count for f in after_scan.files}, disk_checked=True,
        checks=checks, passed=all(checks.values()))
    notes = [f"{o.store}: {n}" for o in outcomes.values() for n in o.notes]
    if not literals:
        notes.append("no --literal given: the instance's files were not byte-scanned (claims stay 'logical')")
    if Capability.ONLINE not in system.capabilities:
        notes.append(OFFLINE_NOTE.format(name=system.name))
    notes.append(f"{VERIFIED_AT}{verified:.3f} (Unix time): the user's records were read again until none remained; "
                 "what an application writes for the user after that moment is not covered (re-check with "
                 "`traceless scan --since` this receipt)")
    if lost:
        notes.append(f"OVER-DELETION: other users' records changed or removed in {', '.join(lost)}")
    if added:  # no count: how many records other users keep or write is not the requester's to learn
        notes.append(f"other users' records were added in {', '.join(added)} while the erasure ran (another "
                     "writer, e.g. the application serving them); the bystander check covers the records that were "
                     "there when it started")
    receipt = Receipt(
        receipt_id=f"erase-{system.name}-{int(time.time() * 1000)}", request_id=request_id, created_at=time.time(),
        mode=f"erase:{system.name}",
        target=TargetRef(kind="user" if user else "literal", ref=owner or "literals", owner=owner),
        matched=True, tiers=tiers, verification=verification, seconds=round(seconds, 3),
        code_version=_code_version(), guarantee=[f"{s}={c}" for s, c in claims.items()],
        not_covered=_not_covered(after_scan),
        notes=notes + [f"out of scope: {x}" for x in system.out_of_scope()],
        warnings=[] if verification.passed else ["the erasure could not be verified in every store: see checks"])
    return sign(receipt)


def _not_covered(after: ScanReport) -> list[str]:
    """The unattributable records still there (mem0's orphan history rows): no user can be told
    as their owner, so no erasure by user covers them, and they may hold the user's data. Named
    per store without a count (a count would tell the requester about other users' records)."""
    return [f"{store}: records that no user can be told as the owner of are still there (unattributable "
            "residue, e.g. mem0 history rows whose memory is in no collection); an erasure by user does not "
            "reach them: give the user's secret with --literal to erase those that hold it"
            for store, n in sorted(after.unattributable.items()) if n]


def _code_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("traceless")
    except metadata.PackageNotFoundError:
        return "unknown"

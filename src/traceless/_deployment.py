"""One request across every instance of a deployment (issue 36.2, 36.4, 36.5):
``scan --deployment``, ``forget --deployment`` (one signed request bundle), ``export``
(the person's records, Art. 15) and ``scan --since BUNDLE``.

``forget --deployment`` opens every instance read-write and plans every erasure, then checks
every instance's preconditions (``check_erasable``: its application does not hold it, the
server role may delete …) before the first write anywhere: an instance that cannot be erased
stops the request with nothing changed in any instance. Then each instance is erased by the
one driver (``erase_system``), its receipt written into ``request-<id>.partial/``; the
signed summary binds them and the folder is renamed ``request-<id>/``. A run killed
half-way is finished by the same command: the journals finish each instance, the receipts
already in the partial folder are kept. Between the check and an instance's turn its
application could take it again: that instance's erasure is then refused by the driver's
own precondition, the request stops there, and re-running it finishes the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from traceless._deployment_file import Deployment, DeploymentInstance, load_deployment
from traceless._erase_api import attach_system
from traceless.errors import ConfigError, NothingToEraseError, ReceiptError, TracelessError
from traceless.forget import (
    BundleEntry,
    Receipt,
    RequestBundle,
    append_bundle,
    append_receipt,
    check_log,
    check_request_id,
    check_tsa_url,
    load_bundle,
    load_receipt,
    log_request,
    pseudonym,
    receipt_key,
    stamp_receipt,
    verdict_of,
    verify_bundle,
    write_bundle,
    write_receipt,
)
from traceless.systems import (
    MemorySystem,
    RecheckResult,
    ScanReport,
    erase_system,
    load_system_config,
    plan_system_erasure,
    recheck_system,
    scan_system,
)

OnInstance = Callable[[int, int, str], None]
"""``on_instance(done, total, name)``: called before each instance (and once at the end)."""

__all__ = ["OnInstance", "AccessExport", "DeploymentRecheck", "DeploymentScan", "Deployment", "ExportedStore", "InstanceScan", "erase_deployment",
           "export_deployment", "load_deployment", "one_instance", "recheck_deployment",
           "scan_deployment"]


class InstanceScan(BaseModel):
    """One instance's read-only scan for one of its user ids (or for the literals alone)."""

    model_config = ConfigDict(extra="forbid")

    instance: str
    """The instance's name in the deployment file."""
    report: ScanReport
    """The system's scan report (``docs/schemas/scan-result.json``)."""


class DeploymentScan(BaseModel):
    """``traceless scan --deployment D``: every instance, read-only (``docs/schemas/deployment-scan.json``)."""

    model_config = ConfigDict(extra="forbid")

    deployment: str
    """The deployment's name."""
    scans: list[InstanceScan]
    """Per instance and user id, its scan."""

    def owners(self) -> dict[str, list[str]]:
        """Per instance: whose records hold a literal (by the system's own user field)."""
        out: dict[str, list[str]] = {}
        for s in self.scans:
            found = out.setdefault(s.instance, [])
            for h in s.report.hits:
                if h.literal_count and h.owner and h.owner not in found:
                    found.append(h.owner)
        return out

    def empty(self) -> bool:
        return all(s.report.empty() for s in self.scans)


def one_instance(system: str | None, config: str | os.PathLike[str] | None) -> Deployment:
    """A deployment of one instance (``--memory S --memory-config C`` where a deployment is taken)."""
    if system is None or config is None:
        raise ConfigError("give --deployment D, or --memory SYSTEM with --memory-config CFG")
    inst = DeploymentInstance(name=system, system=system, config=str(Path(config).resolve()))
    load_system_config(system, inst.config)  # an unknown system or a bad config: one line, before anything
    return Deployment(name=system, instances=[inst])


def _targets(inst: DeploymentInstance, users: Sequence[str]) -> list[str | None]:
    return list(inst.ids(users)) if users else [None]


def _need(users: Sequence[str], literals: Sequence[str]) -> None:
    if not users and not literals:
        raise ConfigError("name whom to find: one or more --user ID and/or --literal TEXT")
    if any(not u.strip() for u in users) or any(not lit for lit in literals):
        raise ConfigError("an empty --user or --literal; give the id the systems store, or the exact text")


def scan_deployment(dep: Deployment, *, users: Sequence[str] = (), literals: Sequence[str] = (),
                    reveal: bool = False, on_instance: OnInstance | None = None) -> DeploymentScan:
    """Read-only: each instance's scan, for each of the person's ids there (or the literals)."""
    _need(users, literals)
    scans = []
    tick = on_instance or _quiet
    for n, inst in enumerate(dep.instances):
        tick(n, len(dep.instances), inst.name)
        s = attach_system(inst.system, inst.config, read_only=True)
        try:
            scans += [InstanceScan(instance=inst.name, report=scan_system(s, uid, list(literals), reveal=reveal))
                      for uid in _targets(inst, users)]
        finally:
            s.close()
    tick(len(dep.instances), len(dep.instances), "done")
    return DeploymentScan(deployment=dep.name, scans=scans)


def _quiet(done: int, total: int, what: str) -> None:
    """No progress shown."""


def _prefixed(inst: DeploymentInstance, e: TracelessError) -> TracelessError:
    msg = f"instance {inst.name!r} ({inst.system}): {e}; nothing was changed in any instance of the deployment"
    try:
        return type(e)(msg)
    except TypeError:
        return ConfigError(msg)


def _receipt_name(inst: DeploymentInstance, k: int) -> str:
    return f"receipt-{inst.name}-{k}.json"


def _plan_all(dep: Deployment, opened: dict[str, MemorySystem], users: Sequence[str], literals: Sequence[str],
              work: Path) -> list[tuple[DeploymentInstance, int, str | None]]:
    """Every (instance, id) with something to erase and no receipt in the partial folder yet;
    then every instance's preconditions: all before the first write anywhere."""
    todo = []
    for inst in dep.instances:
        for k, uid in enumerate(_targets(inst, users)):
            if (work / _receipt_name(inst, k)).exists():
                continue  # erased by an earlier run of this request
            try:
                plan_system_erasure(opened[inst.name], uid, list(literals))
            except NothingToEraseError:
                continue
            except TracelessError as e:
                raise _prefixed(inst, e) from None
            todo.append((inst, k, uid))
    for inst in {i.name: i for i, _, _ in todo}.values():
        try:
            opened[inst.name].check_erasable()
        except TracelessError as e:
            raise _prefixed(inst, e) from None
    return todo


def _entries(dep: Deployment, users: Sequence[str], work: Path) -> list[BundleEntry]:
    out = []
    for inst in dep.instances:
        files = [(k, work / _receipt_name(inst, k)) for k in range(len(_targets(inst, users)))]
        got = [(k, f) for k, f in files if f.exists()]
        if not got:
            out.append(BundleEntry(instance=inst.name, system=inst.system, outcome="nothing_found"))
        for _, f in got:
            r = load_receipt(f)
            out.append(BundleEntry(instance=inst.name, system=inst.system, owner=r.target.owner,
                                   outcome="erased" if verdict_of(r) == "erased" else "unverified",
                                   receipt_file=f.name, receipt_id=r.receipt_id, claims=r.verification.claims))
    return out


def erase_deployment(dep: Deployment, *, users: Sequence[str] = (), literals: Sequence[str] = (),
                     request_id: str, out_dir: str | Path = ".", state_dir: str | Path | None = None,
                     log: str | Path | None = None, on_instance: OnInstance | None = None,
                     tsa: str | None = None) -> tuple[RequestBundle, Path]:
    """Erase the person from every instance; returns the signed bundle and its folder
    (``<out_dir>/request-<request id>/``). Nothing of the person anywhere →
    ``NothingToEraseError``; an instance that cannot be erased → its error, nothing changed."""
    from traceless.paths import state_dir as default_state

    _need(users, literals)
    withhold = [*users, *dep.ids(users), *literals]
    rid = check_request_id(request_id, withhold)
    final, work = Path(out_dir) / f"request-{rid}", Path(out_dir) / f".request-{rid}.partial"
    if final.exists():
        raise ConfigError(f"{final} exists: request {rid} was answered already; give the new request its own "
                          "--request-id")
    if log is not None:
        check_log(log)
    if tsa is not None:
        check_tsa_url(tsa)
    state, key = Path(state_dir) if state_dir else default_state(), receipt_key()
    opened: dict[str, MemorySystem] = {}
    try:
        for inst in dep.instances:
            opened[inst.name] = attach_system(inst.system, inst.config, read_only=False)
        todo = _plan_all(dep, opened, users, literals, work)
        if not todo and not work.exists():
            raise NothingToEraseError(f"nothing of the person was found in any of the {len(dep.instances)} "
                                      "instances; nothing was erased and no bundle was written")
        work.mkdir(parents=True, exist_ok=True)
        os.chmod(work, 0o700)
        tick = on_instance or _quiet
        for n, (inst, k, uid) in enumerate(todo):
            tick(n, len(todo), inst.name)
            out = work / _receipt_name(inst, k)
            r = erase_system(opened[inst.name], uid, list(literals), state_dir=state, key=key, receipt_out=out,
                             request_id=rid)
            if tsa is not None:  # before the summary takes the file's digest
                r = stamp_receipt(r, tsa)
                write_receipt(r, out)
            log_request(state, event="forget", system=inst.system, user=r.target.owner or None, request_id=rid,
                        verdict=verdict_of(r), receipts=[(r, out)], withhold=withhold)
        tick(len(todo), len(todo), "signing the bundle")
    finally:
        for s in opened.values():
            s.close()
    bundle, unstamped = _write_summary(work, rid, dep, _entries(dep, users, work), tsa)
    os.replace(work, final)
    if log is not None:
        for e in bundle.entries:
            if e.receipt_file:
                append_receipt(log, load_receipt(final / e.receipt_file))
        append_bundle(log, bundle)  # the summary too: a bundle cannot be withdrawn or re-signed unseen
    if unstamped is not None:
        raise ConfigError(f"{unstamped}; the erasure is done and its bundle {final} is signed"
                          f"{' and logged' if log is not None else ''}, without a time-stamp on the summary")
    return bundle, final


def _write_summary(work: Path, rid: str, dep: Deployment, entries: list[BundleEntry],
                   tsa: str | None) -> tuple[RequestBundle, ConfigError | None]:
    """The signed summary, time-stamped by ``tsa`` when given; a TSA that fails now (it stamped
    the receipts a moment ago) leaves the summary signed without a stamp, and says so."""
    names = [i.name for i in dep.instances]
    if tsa is None:
        return write_bundle(work, rid, dep.name, names, entries), None
    try:
        return write_bundle(work, rid, dep.name, names, entries, stamp=lambda b: stamp_receipt(b, tsa)), None
    except ConfigError as e:
        return write_bundle(work, rid, dep.name, names, entries), e


class ExportedStore(BaseModel):
    """One store's records of the person in one instance (one JSON file of the export)."""

    model_config = ConfigDict(extra="forbid")

    instance: str
    """The instance's name in the deployment."""
    system: str
    """Its memory system."""
    store: str
    """The store's name as the scan names it (``vector_store``, ``history``, ``raw`` …)."""
    user: str
    """The person's id in this instance (this file goes to the person)."""
    records: list[dict[str, Any]]
    """Each record: ``record_id``, ``fields`` (field → text as stored) and ``provenance``
    (system, instance, store, how it was read)."""


class AccessExport(BaseModel):
    """``traceless export``: what each instance holds on the person (``docs/schemas/access-export.json``)."""

    model_config = ConfigDict(extra="forbid")

    deployment: str
    """The deployment's name."""
    folder: str
    """Where the per-store files were written."""
    files: dict[str, int] = Field(default_factory=dict)
    """Each file written (relative to ``folder``) → how many records it holds."""


def export_deployment(dep: Deployment, *, users: Sequence[str], out_dir: str | Path,
                      on_instance: OnInstance | None = None) -> AccessExport:
    """Art. 15: per instance and store, the person's own records (the system's user field or
    namespace says they are theirs; nobody else's record is ever included), read-only, into
    ``out_dir`` (created; it must not exist, so an export is never mixed with an older one)."""
    if not users:
        raise ConfigError("export needs --user ID (the person's id; repeat it for each id they have)")
    _need(users, ())
    out = Path(out_dir)
    if out.exists():
        raise ConfigError(f"{out} exists; give a new folder for the export (it is never merged with an older one)")
    scan = scan_deployment(dep, users=users, reveal=True, on_instance=on_instance)
    per: dict[tuple[str, str, str, str], dict[str, dict[str, Any]]] = {}
    systems = {i.name: i.system for i in dep.instances}
    for s in scan.scans:
        for h in s.report.hits:
            if not h.owner_match:
                continue
            rec = per.setdefault((s.instance, systems[s.instance], h.store, s.report.user or ""), {}).setdefault(
                h.record_id, {"record_id": h.record_id, "fields": {}, "provenance": {
                    "system": systems[s.instance], "instance": s.instance, "store": h.store,
                    "read_by": "traceless scan (read-only), the system's own user field or namespace"}})
            rec["fields"][h.field] = h.value
    out.mkdir(parents=True, mode=0o700)
    res = AccessExport(deployment=dep.name, folder=str(out))
    for (inst, system, store, user), recs in sorted(per.items()):
        name = f"{inst}.{store}.{len([k for k in res.files if k.startswith(f'{inst}.{store}.')])}.json"
        doc = ExportedStore(instance=inst, system=system, store=store, user=user, records=list(recs.values()))
        fd = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(doc.model_dump_json(indent=2))
        res.files[name] = len(recs)
    (out / "export.json").write_text(res.model_dump_json(indent=2), encoding="utf-8")
    return res


class DeploymentRecheck(BaseModel):
    """``scan --since BUNDLE --deployment D``: every receipt of the bundle re-checked."""

    model_config = ConfigDict(extra="forbid")

    request_id: str
    """The request the bundle answered."""
    checks: dict[str, RecheckResult]
    """Receipt file → its re-check on its instance."""
    came_back: bool
    """Anything of the person is there again in any instance."""


def recheck_deployment(dep: Deployment, since: str | Path, *, users: Sequence[str] = (),
                       literals: Sequence[str] = (), public_key: bytes | None = None,
                       state_dir: str | Path | None = None) -> DeploymentRecheck:
    """Re-check a request bundle later, read-only: the bundle verified first, then each receipt's
    scan on its instance (the user id found among the person's ids by the receipt's pseudonym)."""
    from traceless.paths import state_dir as default_state

    _need(users, literals)
    res = verify_bundle(since, public_key=public_key)
    if not res.signature_ok or any(c.status not in ("ok", "not_passed") for c in res.receipts):
        raise ReceiptError(f"--since {since}: the bundle does not verify (altered, incomplete or signed elsewhere); "
                           "run `traceless forget verify` on it")
    bundle, folder = load_bundle(since)
    key = receipt_key(create=False)
    insts = {i.name: i for i in dep.instances}
    checks: dict[str, RecheckResult] = {}
    for e in bundle.entries:
        if not e.receipt_file:
            continue
        inst = insts.get(e.instance)
        if inst is None:
            raise ConfigError(f"--since: the bundle's instance {e.instance!r} is not in deployment {dep.name!r}")
        r: Receipt = load_receipt(folder / e.receipt_file)
        ids = [u for u in inst.ids(users) if pseudonym(u, "u", key) == r.target.owner]
        if r.target.kind == "user" and not ids:
            raise ConfigError(f"--since: none of the --user ids is the user receipt {e.receipt_file} erased in "
                              f"instance {e.instance!r}; give the same ids as the request")
        s = attach_system(inst.system, inst.config, read_only=True)
        try:
            checks[e.receipt_file] = recheck_system(s, r, ids[0] if ids else None, list(literals), key=key)
        finally:
            s.close()
    back = any(c.came_back for c in checks.values())
    log_request(Path(state_dir) if state_dir else default_state(), event="recheck", system=f"deployment:{dep.name}",
                user=None, request_id=bundle.request_id, verdict="came_back" if back else "clean",
                withhold=[*users, *literals])
    return DeploymentRecheck(request_id=bundle.request_id, checks=checks, came_back=back)


"""``traceless.scan`` and ``traceless.forget(system=..., config=..., user=...)``: find, erase
and certify in the user's own memory system (issue #23). The CLI (``traceless scan``,
``traceless forget --memory``) calls these; they call the one driver in
``traceless.systems`` (``scan_system``, ``plan_system_erasure``, ``erase_system``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceless.errors import (
    ConfigError,
    ErasureScopeError,
    NothingToEraseError,
    ReceiptError,
    UnsupportedError,
)
from traceless.forget import (
    Certificate,
    Receipt,
    Verdict,
    append_receipt,
    attach_certificate,
    check_log,
    check_receipt_path,
    check_request_id,
    check_tsa_url,
    fresh_receipt_path,
    load_receipt,
    log_request,
    name_receipt,
    pseudonym,
    receipt_key,
    stamp_receipt,
    verdict_of,
    verify_signature,
    write_receipt,
)
from traceless.models import EngineOptions, ModelBackend
from traceless.systems import (
    Capability,
    DeletionTarget,
    ErasurePlan,
    Match,
    MemorySystem,
    RecheckResult,
    ScanReport,
    SystemRuntime,
    SystemSpec,
    check_recheck_target,
    erase_system,
    plan_system_erasure,
    recheck_system,
    resolve_system,
    scan_system,
)

__all__ = ["attach_system", "certify_live", "erase", "erase_request", "plan_erasure", "recheck", "scan", "system_spec"]

Config = str | os.PathLike[str] | dict[str, Any] | None
System = str | SystemSpec
"""A system by name (resolved here, with ``config``) or resolved once at the edge (``resolve_system``;
``config`` is then None)."""


def system_spec(system: System, config: Config) -> SystemSpec:
    """``system`` resolved: looked up and ``config`` validated once, or the spec the edge resolved."""
    if not isinstance(system, SystemSpec):
        return resolve_system(system, config)
    if config is not None:
        raise ConfigError(f"memory system {system.name!r} is given resolved with its config; give no other config")
    return system


def attach_system(system: System, config: Config, *, read_only: bool) -> MemorySystem:
    """The user's live instance of ``system`` as ``config`` describes it (validated first:
    an unknown key or a path that does not exist is refused before anything is opened)."""
    return system_spec(system, config).attach(read_only=read_only)


def scan(system: System, config: Config, *, user: str | None = None, literals: Sequence[str] = (),
         reveal: bool = False, match: Match = "exact") -> ScanReport:
    """Read-only: every record of ``user`` and every record or file holding a literal, per store.
    Not one byte of the instance changes (values appear only with ``reveal``). ``match``:
    ``normalized`` also finds the literals' other spellings (case, spaces, dashes, full-width)."""
    _need_target(user, literals)
    s = attach_system(system, config, read_only=True)
    try:
        return scan_system(s, user, list(literals), reveal=reveal, match=match)
    finally:
        s.close()


def plan_erasure(system: System, config: Config, *, user: str | None = None,
                 literals: Sequence[str] = (), match: Match = "exact") -> ErasurePlan:
    """What ``erase`` would change (``forget --dry-run``), read-only; nothing of the user →
    ``NothingToEraseError``."""
    _need_target(user, literals)
    s = attach_system(system, config, read_only=True)
    try:
        return plan_system_erasure(s, user, list(literals), match)
    finally:
        s.close()


def erase(system: System, config: Config, *, user: str | None = None, literals: Sequence[str] = (),
          receipt: str | Path | None = None, state_dir: str | Path | None = None, certify: bool = False,
          model: str | ModelBackend | None = None, wordings: int = 1, max_new_tokens: int = 40,
          engine: EngineOptions | None = None, log: str | Path | None = None,
          request_id: str | None = None, tsa: str | None = None, match: Match = "exact") -> Receipt:
    """Erase ``user`` (and every record holding a literal) from the live instance: plan →
    journal → the system's own deletions + residue → compaction → re-scan → bystanders →
    signed receipt (written to ``receipt`` before the journal is removed). An interrupted
    run is finished by the same call. ``state_dir`` holds the journals and the request log
    (default: traceless's).

    ``certify``: then the behavioural certificate (``certify_live``) is signed into the
    receipt (and the file rewritten with it); the model (a spec is loaded with the engine options
    ``engine``, built at the edge) is loaded before anything is erased. ``log``: the final receipt
    is appended to that receipt log (``traceless.forget.append_receipt``), checked first.
    ``request_id``: the ticket the request answers, signed into the receipt. Every request is a
    line in the request log (``traceless.forget.log_request``: pseudonymous ids only)."""
    return erase_request(system, config, user=user, literals=literals, receipt=receipt, state_dir=state_dir,
                         certify=certify, model=model, wordings=wordings, max_new_tokens=max_new_tokens,
                         engine=engine, log=log, request_id=request_id, tsa=tsa, match=match)[0]


def erase_request(system: System, config: Config, *, user: str | None = None, literals: Sequence[str] = (),
                  receipt: str | Path | None = None, receipt_dir: str | Path | None = None,
                  state_dir: str | Path | None = None, certify: bool = False,
                  model: str | ModelBackend | None = None, wordings: int = 1, max_new_tokens: int = 40,
                  engine: EngineOptions | None = None, log: str | Path | None = None,
                  request_id: str | None = None, tsa: str | None = None,
                  match: Match = "exact") -> tuple[Receipt, Path | None]:
    """``erase``, and where the receipt was written: ``receipt``, or with ``receipt_dir`` a file
    in that folder named ``receipt-[<request id>-]<receipt id>.json`` that no other receipt has.
    ``tsa``: the final receipt time-stamped by that RFC 3161 authority (``stamp_receipt``).
    ``match``: ``normalized`` erases the literals' other spellings too (``forget --match``)."""
    _need_target(user, literals)
    if certify and (user is None or not literals):
        raise ConfigError("--certify needs --user and --literal: the certificate asks the user's agent the audit's "
                          "probes and checks the replies for the literals")
    spec = system_spec(system, config)  # an unknown system or a bad config: refused before anything
    rid = check_request_id(request_id, [user, *literals]) if request_id is not None else ""
    out = _receipt_out(spec.name, receipt, receipt_dir)  # every output checked first
    if log is not None:
        check_log(log)
    if tsa is not None:
        check_tsa_url(tsa)
    from traceless.paths import state_dir as default_state

    state, key = Path(state_dir) if state_dir else default_state(), receipt_key()

    def logged(verdict: Verdict, owner: str | None, receipts: Sequence[tuple[Receipt, Path | None]] = ()) -> None:
        log_request(state, event="forget", system=spec.name, user=owner, request_id=rid, verdict=verdict,
                    receipts=receipts, withhold=[user, *literals])

    be = _certify_model(model, engine) if certify else None
    try:
        s = _attach_to_erase(spec, be)
        try:
            try:
                r = erase_system(s, user, list(literals), state_dir=state, key=key, receipt_out=out, request_id=rid,
                                 certify=_probe_runtime(be) if be is not None else None, match=match)
            except (NothingToEraseError, ErasureScopeError) as e:  # an answer too: logged, then raised
                logged("nothing_found" if isinstance(e, NothingToEraseError) else "refused",
                       pseudonym(user, "u", key) if user else None)
                raise
            final = r if be is None or user is None else attach_certificate(
                r, certify_live(s, user, list(literals), be, wordings=wordings, max_new_tokens=max_new_tokens))
        finally:
            s.close()
        if tsa is not None:  # the erasure is done and signed: the stamp only dates it
            try:
                final = stamp_receipt(final, tsa)
            except ConfigError as e:
                logged(verdict_of(final), final.target.owner, [(final, out)])
                raise ConfigError(f"{e}; the erasure itself is done and its receipt {out or ''} is signed, "
                                  "without a time-stamp") from None
        if out is not None and final is not r:
            write_receipt(final, out)
        if out is not None and receipt_dir is not None:
            out = name_receipt(out, final)
        if log is not None:
            append_receipt(log, final)
        logged(verdict_of(final), final.target.owner, [(final, out)])
        return final, out
    finally:
        if be is not None and be is not model:
            be.close()


def _receipt_out(system: str, receipt: str | Path | None, receipt_dir: str | Path | None) -> Path | None:
    """The receipt file, checked before anything: the one given, or a fresh one in ``receipt_dir``."""
    if receipt is not None and receipt_dir is not None:
        raise ConfigError("give the receipt's file or its folder, not both")
    if receipt is not None:
        return check_receipt_path(receipt)
    return fresh_receipt_path(Path(receipt_dir), system) if receipt_dir is not None else None


def recheck(system: System, config: Config, since: str | Path, *, user: str | None = None,
            literals: Sequence[str] = (), reveal: bool = False, state_dir: str | Path | None = None) -> RecheckResult:
    """``traceless scan --since RECEIPT``: the receipt (its signature checked with this machine's
    key) re-checked on the live instance, read-only: is anything of its person there again?
    Refused before the instance opens when the system or the user is not the receipt's. The
    re-check is a line in the request log."""
    from traceless.paths import state_dir as default_state

    if user is not None or literals:  # which of the two the receipt says: check_recheck_target
        _need_target(user, literals)
    spec = system_spec(system, config)
    r = load_receipt(since)
    if not verify_signature(r):
        raise ReceiptError(f"--since {since}: the receipt's signature does not verify under this machine's key "
                           "(altered, or signed elsewhere): re-check on the machine that signed it")
    key = receipt_key(create=False)
    check_recheck_target(spec.name, r, user, literals, key)  # before the instance is opened
    s = spec.attach(read_only=True)
    try:
        res = recheck_system(s, r, user, literals, key=key, reveal=reveal)
    finally:
        s.close()
    log_request(Path(state_dir) if state_dir else default_state(), event="recheck", system=spec.name,
                user=r.target.owner or None, request_id=r.request_id, verdict="came_back" if res.came_back else "clean",
                receipts=[(r, Path(since))], withhold=[user, *literals])
    return res


def _attach_to_erase(spec: SystemSpec, certify_model: ModelBackend | None) -> MemorySystem:
    """The live instance opened read-write; with a certificate to make, one the adapter can
    probe (``Capability.CERTIFY``; that its probes can run is proved by ``erase_system``
    before the first write)."""
    s = spec.attach(read_only=False)
    if certify_model is not None and Capability.CERTIFY not in s.capabilities:
        s.close()
        raise UnsupportedError(f"--certify is not available for {spec.name!r} live instances yet "
                               "(mem0 and langgraph only); run the erasure without --certify: "
                               "its receipt is signed as before")
    return s


def certify_live(s: MemorySystem, user: str, literals: Sequence[str], model: ModelBackend, *, wordings: int = 1,
                 max_new_tokens: int = 40) -> Certificate:
    """After the erasure: the audit's probes (every level × ``wordings``) asked of ``user``'s
    agent through the system's own retrieval on the live instance (``probe_instance``), each
    reply checked for every literal; and the literals' copies per store and in the files
    (the read-only scan). One certificate for all literals: a probe counts as extracted when
    its reply holds any of them."""
    from traceless.audit import certify

    probe = s.probe_instance(_probe_runtime(model))
    try:
        certs = [certify(probe, DeletionTarget(user, lit, ""), model, embedder=_embedder_name(s),
                         wordings=wordings, max_new_tokens=max_new_tokens) for lit in literals]
    finally:
        probe.close()
    first = certs[0]
    probes = [p.model_copy(update={"extracted": any(c.probes[i].extracted for c in certs)})
              for i, p in enumerate(first.probes)]
    per: dict[str, dict[str, list[bool]]] = {}
    for p in probes:
        per.setdefault(p.view, {}).setdefault(p.level, []).append(p.extracted)
    rep = scan_system(s, None, list(literals))
    copies = dict.fromkeys(rep.stores, 0)
    for h in rep.hits:
        copies[h.store] = copies.get(h.store, 0) + h.literal_count
    copies["files"] = sum(f.count for f in rep.files)
    return first.model_copy(update={
        "probes": probes, "aer": {v: {lv: sum(xs) / len(xs) for lv, xs in lvs.items()} for v, lvs in per.items()},
        "store_copies": copies, "seconds": sum(c.seconds for c in certs)})


def _probe_runtime(model: ModelBackend) -> SystemRuntime:
    """What the certificate's probe instance runs with: the agent's model, the hashing embedder."""
    from traceless.models import HashingEmbedder

    return SystemRuntime(model, HashingEmbedder(), model.name)


def _embedder_name(s: MemorySystem) -> str:
    """The embedder of the instance's config (``provider:model``; mem0's default in the probes:
    MiniLM; LangGraph: the store index's ``embed``, or ``none`` for a store searched without one)."""
    if s.name == "langgraph":
        idx = getattr(getattr(s.config, "store", None), "index", None)
        return f"langgraph-index:{idx.embed}" if idx is not None else "none (store searched without an index)"
    emb = getattr(s.config, "embedder", None)
    if not isinstance(emb, dict):
        return "huggingface:all-MiniLM-L6-v2"
    cfg = emb.get("config")
    model = Path(str(cfg.get("model", ""))).name if isinstance(cfg, dict) else ""
    return f"{emb.get('provider', '?')}:{model}"


def _need_target(user: str | None, literals: Sequence[str]) -> None:
    if user is None and not literals:
        raise ConfigError("name what to find: a user (--user ID) and/or literals (--literal TEXT)")
    if user is not None and not user.strip():
        raise ConfigError("--user is empty; give the user id the system stores (mem0's user_id)")
    if any(not lit for lit in literals):
        raise ConfigError("--literal is empty; give the exact text to look for")


def _certify_model(model: str | ModelBackend | None, engine: EngineOptions | None) -> ModelBackend:
    """The certificate's agent model: the backend given, or one loaded from its spec (default:
    the catalog's default model) with the engine options of the edge."""
    if isinstance(model, ModelBackend):
        return model
    from traceless.models import DEFAULT_MODEL, load_backend

    return load_backend(model or DEFAULT_MODEL, engine=engine)

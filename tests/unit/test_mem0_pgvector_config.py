"""The server-side keys of a mem0 pgvector config, without a server (issue #35): the
physical step's default is the online one, named replicas are parsed into read-only
targets that never repeat a credential, and a bad one is refused in one line."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("psycopg") is None, reason="needs psycopg (traceless[mem0])")


def test_default_step_is_online_and_full_is_opt_in() -> None:
    from traceless.errors import ConfigError
    from traceless.systems._mem0_pgvector import DEFAULT_COMPACTION, pg_target

    cfg = {"connection_string": "postgresql://app:s3cret@db.internal:5433/prod", "collection_name": "mem"}
    assert DEFAULT_COMPACTION == "vacuum" and pg_target(cfg).compaction == "vacuum"
    assert pg_target(cfg, "full").compaction == "full"
    with pytest.raises(ConfigError, match="pg_compaction 'cluster': use one of vacuum, full"):
        pg_target(cfg, "cluster")


def test_replicas_take_the_primarys_database_and_never_repeat_a_password() -> None:
    from traceless.errors import ConfigError
    from traceless.systems._mem0 import Mem0Config
    from traceless.systems._mem0_pgvector import pg_target, replica_targets

    c = Mem0Config.model_validate({"traceless": {"pg_replicas": ["host=r1 port=5434 user=ro password=pw1",
                                                                 "postgresql://ro:pw2@r2:5435/other"]}})
    assert c.pg_replicas is not None and "pg_replicas" not in Mem0Config().model_dump()
    primary = pg_target({"connection_string": "postgresql://app:s3cret@db:5433/prod", "collection_name": "mem"})
    r1, r2 = replica_targets(c.pg_replicas, primary)
    assert (r1.dbname, r1.port, r1.role) == ("prod", "5434", "PostgreSQL replica")
    assert r2.dbname == "other" and r2.source == "traceless.pg_replicas[1]"
    assert "pw" not in r1.where + r2.where
    with pytest.raises(ConfigError) as e:
        replica_targets(["postgresql://ro:pw3@r3:notaport/x y=z"], primary)
    assert "traceless.pg_replicas[0] is not a valid PostgreSQL connection string" in str(e.value)
    assert "pw3" not in str(e.value)


@pytest.mark.parametrize("name, given", [("mem0", {}), ("agno", {"db_url": "postgresql+psycopg://a:b@h:1/d"}),
                                          ("openai-agents", {"url": "postgresql+psycopg://a:b@h:1/d"})])
def test_pg_replicas_are_dumped_and_shown_without_their_passwords(name: str, given: dict[str, Any]) -> None:
    from traceless.systems import load_system_config

    pw = "Rep1ica-pw-55"
    cfg = load_system_config(name, {**given, "traceless": {"pg_replicas": [f"postgresql://app:{pw}@10.0.0.9:5433/db"]}})
    assert cfg.pg_replicas == [f"postgresql://app:{pw}@10.0.0.9:5433/db"]  # type: ignore[attr-defined]  # kept in memory
    assert pw not in cfg.model_dump_json() and pw not in repr(cfg)
    assert cfg.model_dump(mode="json")["pg_replicas"] == ["postgresql://app@10.0.0.9:5433/db"]


@pytest.mark.parametrize("name, key", [("agno", "db_url"), ("openai-agents", "url")])
def test_a_server_url_dumps_where_it_points_never_its_password(name: str, key: str) -> None:
    """The erasure's journal is keyed by the config's dump: with the URL masked whole, two
    databases on one server shared a journal (the conformance suite's resume check on Agno on
    Postgres: one instance's erasure removed the other's journal)."""
    if importlib.util.find_spec("agno" if name == "agno" else "agents") is None:
        pytest.skip(f"needs traceless[{name}]")
    from traceless.systems import load_system_config

    dumps = [load_system_config(name, {key: f"postgresql+psycopg://app:s3cret@db:5433/{db}"}).model_dump(mode="json")
             for db in ("one", "two")]
    assert dumps[0][key] == "postgresql://app@db:5433/one" and dumps[0] != dumps[1]
    assert "s3cret" not in repr(dumps)

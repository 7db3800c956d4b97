"""The LangGraph config of a server-backed instance (issue #35): the connection string is read
once in the config model and never dumped or printed with its password; bad values are one line."""

from __future__ import annotations

import pytest

from traceless.errors import ConfigError
from traceless.systems import load_system_config

PW = "s3cret-Pw-91"
URL = f"postgresql://app:{PW}@127.0.0.1:6543/agents?sslmode=require"


def test_the_password_is_in_no_dump_and_no_repr() -> None:
    cfg = load_system_config("langgraph", {"checkpointer": {"kind": "postgres", "url": URL},
                                           "store": {"kind": "postgres", "url": URL}})
    dumped = cfg.model_dump_json()
    assert PW not in dumped and PW not in repr(cfg) and PW not in str(cfg)
    assert "app@127.0.0.1:6543/agents" in dumped  # the server stays identifiable (the erasure's journal key)
    assert cfg.checkpointer is not None and cfg.checkpointer.dsn()["password"] == PW  # read once, kept in memory
    assert cfg.checkpointer.dsn()["sslmode"] == "require"  # TLS options pass through
    assert "traceless" not in cfg.model_dump()  # no section given: an audit's identity is unchanged


def test_bad_connection_values_are_one_line() -> None:
    with pytest.raises(ConfigError, match="not a valid PostgreSQL connection string") as e:
        load_system_config("langgraph", {"checkpointer": {"kind": "postgres", "url": f"host=x password={PW} bogus"}})
    assert PW not in str(e.value) and len(str(e.value).splitlines()) == 1
    with pytest.raises(ConfigError, match="needs url"):
        load_system_config("langgraph", {"store": {"kind": "postgres"}})
    with pytest.raises(ConfigError, match="pg_compaction"):
        load_system_config("langgraph", {"traceless": {"pg_compaction": "cluster"}})


def test_pg_compaction_full_is_read_from_the_traceless_section() -> None:
    cfg = load_system_config("langgraph", {"traceless": {"pg_compaction": "full"}})
    assert cfg.traceless is not None and cfg.traceless.pg_compaction == "full"  # type: ignore[attr-defined]

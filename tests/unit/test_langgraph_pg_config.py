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


def test_pg_replicas_are_read_once_and_dumped_without_their_passwords() -> None:
    rep = f"postgresql://app:{PW}@10.0.0.7:6543/agents"
    cfg = load_system_config("langgraph", {"checkpointer": {"kind": "postgres", "url": URL},
                                           "traceless": {"pg_replicas": [rep, f"host=10.0.0.8 password={PW}"]}})
    assert cfg.traceless is not None and cfg.traceless.pg_replicas == [rep, f"host=10.0.0.8 password={PW}"]  # type: ignore[attr-defined]
    dumped = cfg.model_dump_json()
    assert PW not in dumped and PW not in repr(cfg) and "app@10.0.0.7:6543/agents" in dumped
    with pytest.raises(ConfigError, match=r"traceless.pg_replicas\[0\] is not a valid") as e:
        load_system_config("langgraph", {"traceless": {"pg_replicas": [f"host=x password={PW} bogus"]}})
    assert PW not in str(e.value) and len(str(e.value).splitlines()) == 1


def test_the_online_rule_counts_only_what_this_erasures_delete_removed() -> None:
    """``OnlineBystanders`` (no server needed): the app's changes, removals and additions are its
    own; a row this erasure's DELETE returned that the first digest held is an over-deletion."""
    from traceless.systems.postgres import OnlineBystanders

    first = {("store", "a"): "1", ("store", "b"): "2", ("store", "c"): "3"}
    rule = OnlineBystanders()
    assert rule.rows(first) == first  # the first digest keeps them
    now = {("store", "a"): "1-app", ("store", "c"): "3", ("store", "d"): "4"}  # the app: a changed, b removed, d added
    assert rule.rows(now) == first
    assert rule.kept(now)[1] == (1, 1, 1)
    rule.deleted = {("store", "x")}  # the target's row (never a bystander)
    assert rule.rows(now) == first and "removed 1 rows, all planned" in rule.note(now, {("store", "x")})
    rule.deleted.add(("store", "c"))  # a bystander's row the DELETE returned: the digest loses it
    assert rule.rows(now) != first and "1 of them NOT in the plan" in rule.note(now, {("store", "x")})
    rule.reset()
    assert rule.rows(now) == now  # a new erasure (or a re-run without its first digest): the rows as they are


def test_the_online_rule_digests_this_erasures_rewrites_as_they_are_now() -> None:
    """A row this erasure rewrote (Agno's / the SDK's quote of a literal) is digested as the
    erasure left it: a rewrite that changed only the literals (the digest replaces them)
    passes, one that changed more fails; one the app removed meanwhile is the app's."""
    from traceless.systems.postgres import OnlineBystanders

    first = {("t", "a"): "bob quotes [erased]", ("t", "b"): "ann2"}
    rule = OnlineBystanders()
    rule.rows(first)
    rule.rewritten = {("t", "a")}
    assert rule.rows(first) == first  # rewritten as planned
    assert rule.rows({("t", "a"): "bob quotes [erased] and more", ("t", "b"): "ann2"}) != first  # a broken rewrite
    assert rule.rows({("t", "b"): "ann2"}) == first  # the app removed it: theirs
    rule.reset()
    assert not rule.rewritten

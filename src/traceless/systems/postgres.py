"""Helpers for an adapter whose records live in tables on a PostgreSQL server (mem0 on
pgvector, LangGraph's ``PostgresSaver`` / ``PostgresStore``, Agno's ``PostgresDb``, the Agents
SDK's ``SQLAlchemySession``): the public face of ``traceless.systems._pg_server`` for in-tree
and third-party adapters alike (``from traceless.systems import postgres as pg``).

``PgServer`` reads in ``BEGIN READ ONLY`` transactions, refuses missing tables and a role
without ``DELETE``/``MAINTAIN`` before any change, deletes by key columns in one transaction
(``DELETE … RETURNING``), runs the physical step (``VACUUM (INDEX_CLEANUP ON)`` by default,
``VACUUM FULL`` opt-in) and a ``CHECKPOINT``; ``physical_step`` runs it and ``verify_files`` /
``verify_replica``, which read the relation files and ``pg_wal`` of the server and of each named
standby (``standbys``; ``replica_files`` for the kernel's byte scan); ``OnlineBystanders`` is the
bystander rule while an application keeps writing other users' rows (``OnlineTally``: the same
in aggregate, counted on the server, ``tally_digest`` its digest with the mark of the rows it
covers); ``out_of_scope`` names
what no erasure on a server reaches. ``PgTables`` is the erasure kernel's ``LiveInstance`` for
a set of tables (the server mirror of ``sqlite.SqliteFile``: a table is a store, a row a record).
"""

from traceless.systems._pg_server import (
    COMPACTIONS,
    DEFAULT_COMPACTION,
    KEY_SEP,
    MARK,
    OnlineBystanders,
    OnlineTally,
    PgServer,
    PgTarget,
    Tally,
    delete_in,
    escape_like,
    ident,
    in_snapshot,
    key_hash,
    key_sql,
    like_any,
    make_target,
    marks,
    out_of_scope,
    parse_dsn,
    physical_step,
    replica_files,
    replica_steps,
    replica_targets,
    shown_dsn,
    shown_dsns,
    standbys,
    tally_digest,
    verify_files,
    verify_replica,
)
from traceless.systems._pg_tables import (
    REPLICAS_SHOWN,
    SERVER_KEYS,
    PgServerOptions,
    PgTables,
    check_url,
    pg_tables,
    shown_url,
    traceless_section,
    url_target,
)

__all__ = ["COMPACTIONS", "DEFAULT_COMPACTION", "KEY_SEP", "MARK", "REPLICAS_SHOWN", "SERVER_KEYS", "OnlineBystanders", "OnlineTally",
           "PgServer", "PgServerOptions", "Tally",
           "PgTables", "PgTarget", "check_url", "delete_in", "ident", "make_target", "out_of_scope", "parse_dsn",
           "pg_tables", "physical_step", "replica_files", "replica_steps", "replica_targets", "shown_dsn",
           "shown_dsns", "shown_url", "standbys", "tally_digest", "escape_like", "in_snapshot", "key_hash", "key_sql", "like_any", "marks",
           "traceless_section", "url_target", "verify_files", "verify_replica"]

"""The CrewAI instance read narrowed (issue 39): the text columns read once by Arrow, the user's
and the literals' rows selected there, with the same scan, plan and bystander digests as the
full read of every row of every version; an over-deletion is still seen by the digest.

Runs where crewai is installed (its own venv; ``TRACELESS_REQUIRE_CREWAI=1``: absence fails)."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from traceless.memory import Session, Turn
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, kernel, load_system_config, open_system

if os.environ.get("TRACELESS_REQUIRE_CREWAI"):
    importlib.import_module("crewai")
else:
    pytest.importorskip("crewai")

from traceless.systems import _crewai as cr  # noqa: E402

ACCENT = "Zoë-Ærø 4411"
SECRET = "SECRET-u1-5150"
QUOTE = "it's 'quoted' 77"


class _Full(cr.CrewAIInstance):
    """The same instance read whole: every row of every version made a record, the kernel's digest."""

    def counts(self) -> dict[str, int] | None:
        return None

    def stores(self) -> list[str]:
        return list(cr._versions(self.path)[0])

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Any]:
        return super().records(None, ())

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]] | None:
        return None


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """u1, u10 (u1 is its prefix), u2; the literals in u1's memories and quoted by the others';
    one of u1's memories forgotten (an older version keeps it)."""
    root = tmp_path_factory.mktemp("crewai")
    rt = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")
    texts = {"u1": [f"my token is {SECRET}", f"name {ACCENT}", QUOTE, "forget me soon"],
             "u10": [f"u1 told me {SECRET}", "weather u1 likes"], "u2": [f"I know {ACCENT}", f"he said {QUOTE}"]}
    system = open_system("crewai", root, load_system_config("crewai", {}), rt)
    try:
        system.write([Session(user_id=u, session_id=f"s-{u}", turns=[
            t for x in xs for t in (Turn(role="user", content=x), Turn(role="assistant", content="noted"))])
            for u, xs in texts.items()])
        mem = system._open()  # type: ignore[attr-defined]
        with cr._console_off():
            ids = [str(r.id) for r in mem.list_records(scope="/user/u1", limit=100) if "forget" in str(r.content)]
            mem.forget(record_ids=ids)
    finally:
        system.close()
    return root / "memory"


CASES = [("u1", [SECRET]), ("u10", []), ("u1", [ACCENT]), (None, [ACCENT]), (None, [QUOTE]), ("u2", [QUOTE]),
         ("u1", ["forget me"]), ("nobody", [])]


def _norm(rep: Any) -> dict[str, Any]:
    d = rep.model_dump()
    d["hits"] = sorted(json.dumps(h, sort_keys=True) for h in d["hits"])
    return dict(d)


@pytest.mark.parametrize("user, literals", CASES)
def test_the_narrowed_scan_plan_and_digests_equal_the_full_read(memory: Path, user: str | None,
                                                                 literals: list[str]) -> None:
    narrow, full = cr.CrewAIInstance(memory, None, None), _Full(memory, None, None)
    rep = kernel.scan("c", narrow, user, literals, reveal=True)
    assert _norm(rep) == _norm(kernel.scan("c", full, user, literals, reveal=True))
    assert bool(rep.hits) == (user != "nobody")
    plan = kernel.plan("c", narrow, user, literals)
    other = kernel.plan("c", full, user, literals)
    assert sorted(map(str, plan.actions)) == sorted(map(str, other.actions))
    assert plan.held_by_others == other.held_by_others
    removed = {(a.store, a.record_id) for a in plan.actions if a.action == "remove"}
    mine, theirs = (kernel.bystander_digests(i, user, literals, removed) for i in (narrow, full))
    assert mine[cr.TABLE] == theirs[cr.TABLE]
    by_arrow = narrow.digests(user, literals, removed)  # what the erasure digests (CrewAISystem.bystander_digests)
    assert by_arrow == {s: d for s, d in mine.items() if s != cr.TABLE + cr.OLD}
    assert by_arrow[cr.TABLE] == theirs[cr.TABLE]
    unplanned = kernel.bystander_digests(full, user, literals)  # the user's rows left out without a plan too
    assert narrow.digests(user, literals, ())[cr.TABLE] == unplanned[cr.TABLE]
    if user == "u1":  # the forgotten memory only an older version holds is found too
        assert rep.stores[cr.TABLE + cr.OLD] >= 1 and any(h.store == cr.TABLE + cr.OLD for h in rep.hits)


def test_an_over_deletion_changes_the_digest(memory: Path, tmp_path: Path) -> None:
    """A row of u10 deleted (u1 is its prefix) is seen by the digest of u1's bystanders."""
    import shutil

    import lancedb

    work = tmp_path / "m"
    shutil.copytree(memory, work)
    before = kernel.bystander_digests(cr.CrewAIInstance(work, None, None), "u1", [SECRET])
    lancedb.connect(str(work)).open_table(cr.TABLE).delete("scope = '/user/u10' AND strpos(content, 'weather') > 0")
    after = kernel.bystander_digests(cr.CrewAIInstance(work, None, None), "u1", [SECRET])
    assert kernel.bystander_changes(before, after)[0] == [cr.TABLE]


def test_the_versions_are_read_once_until_a_table_commits(memory: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An erasure's many fresh instances (plan, scope check, digests, re-scan) read every version
    once while no table committed; a commit (another writer's row) is read again."""
    import shutil

    import lancedb

    work = tmp_path / "m"
    shutil.copytree(memory, work)
    reads: list[Path] = []
    real = cr._versions
    monkeypatch.setattr(cr, "_versions", lambda path, *a, **k: (reads.append(path), real(path, *a, **k))[1])
    first = [cr.CrewAIInstance(work, None, None).counts() for _ in range(3)]
    assert len(reads) == 1 and first[0] == first[2]
    tbl = lancedb.connect(str(work)).open_table(cr.TABLE)
    tbl.add(tbl.to_arrow().slice(0, 1).to_pylist())
    assert cr.CrewAIInstance(work, None, None).counts()[cr.TABLE] == first[0][cr.TABLE] + 1
    assert len(reads) == 2


def test_the_owners_cut_by_arrow_are_the_rows_owners() -> None:
    """``_owners`` (a ``/user/`` scope cut by Arrow, the metadata read for the other rows) gives
    each row's ``_owner``: nested and empty user scopes, crew scopes with and without a metadata
    user, bad JSON, a missing scope, a non-ASCII user."""
    import pyarrow as pa

    rows = [{"scope": "/user/u1", "metadata_str": "{}"}, {"scope": "/user/u1/notes", "metadata_str": None},
            {"scope": "/user/", "metadata_str": '{"user_id": "x"}'}, {"scope": "/crew/a", "metadata_str": '{"user_id": "u7"}'},
            {"scope": "/", "metadata_str": "not json"}, {"scope": None, "metadata_str": '{"user_id": 42}'},
            {"scope": "/user/Zoë/x", "metadata_str": "{}"}, {"scope": "/users/u2", "metadata_str": '{"user_id": ""}'}]
    data = pa.Table.from_pylist(rows)
    assert cr._owners(data).to_pylist() == [cr._owner(r) for r in rows] == ["u1", "u1", "", "u7", None, "42", "Zoë", None]

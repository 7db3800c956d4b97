"""A third-party memory system, written here, found through the entry-point group
``traceless.memory_systems`` (a temporary dist-info on sys.path) and audited by the engine."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.memory import Session
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import (
    MEMORY_SYSTEMS,
    ContextItem,
    DeletionTarget,
    MemorySystem,
    SystemConfig,
    SystemRuntime,
    load_entry_points,
    system_status,
)


class NotesConfig(SystemConfig):
    """Settings of the notes memory."""

    k: int = 2
    """Notes shown per query."""


class NotesMemory(MemorySystem):
    """A JSON notes file per user plus an append-only audit log (which deletion never touches)."""

    config_class = NotesConfig

    def _path(self, name: str) -> Path:
        return self.work_dir / name

    def _load(self) -> dict[str, list[str]]:
        p = self._path("notes.json")
        return json.loads(p.read_text()) if p.exists() else {}

    def _save(self, notes: dict[str, list[str]]) -> None:
        self._path("notes.json").write_text(json.dumps(notes))

    def write(self, sessions: Sequence[Session]) -> None:
        notes = self._load()
        with self._path("log.txt").open("a") as log:
            for s in sessions:
                for t in s.turns:
                    if t.role == "user":
                        notes.setdefault(s.user_id, []).append(t.content)
                        log.write(f"{s.user_id}\t{t.content}\n")
        self._save(notes)

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        words = set(query.lower().split())
        mine = self._load().get(owner, [])
        ranked = sorted(range(len(mine)), key=lambda i: (-len(words & set(mine[i].lower().split())), i))
        return [ContextItem(f"{owner}:{i}", mine[i]) for i in ranked[: self.config.k]]  # type: ignore[attr-defined]

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return ("drop_note", "wipe_user")

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        notes = self._load()
        mine = notes.get(target.owner, [])
        notes[target.owner] = [] if operation == "wipe_user" else [n for n in mine if target.literal not in n]
        self._save(notes)
        return {"removed": len(mine) - len(notes[target.owner])}

    def stores(self) -> dict[str, Iterable[str]]:
        return {"notes": [n for ns in self._load().values() for n in ns],
                "log": self._path("log.txt").read_text().splitlines()}


@pytest.fixture()
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    dist = tmp_path / "site" / "notes_memory-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: notes-memory\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[traceless.memory_systems]\nnotes = {__name__}:NotesMemory\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield "notes"
    MEMORY_SYSTEMS._entries.pop("notes", None)


def test_entry_point_system_is_listed_and_audited(plugin: str, tmp_path: Path) -> None:
    assert plugin not in MEMORY_SYSTEMS._entries  # not registered before the entry points are loaded
    assert load_entry_points(force=True) == ["notes"]
    st = {s.name: s for s in system_status()}["notes"]
    assert st.installed and st.deletions == ("drop_note", "wipe_user")

    def parrot(messages: Any, config: Any) -> str:
        # repeats the token sentence of its memory, if it was shown one (a leaky agent)
        return " ".join(ln[-40:] for ln in messages[0].content.splitlines() if "session token" in ln) or "no"

    res = run_system_audit(SystemAuditConfig(system="notes", profiles=2, system_config={"k": 6}),
                           SystemRuntime(ScriptedBackend(parrot), HashingEmbedder()), tmp_path / "out")
    assert res.table["before"]["AER_max"] == 1.0
    for op in ("drop_note", "wipe_user"):
        assert res.table[op]["AER_max"] == 0.0
        assert res.copies[op] == {"notes": 0, "log": 2}  # the log keeps both users' canaries
        assert set(res.files[op]) == {"log.txt"}


@pytest.fixture()
def broken_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    dist = tmp_path / "site" / "broken_memory-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-memory\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[traceless.memory_systems]\nbroken = no_such_module_xyz:Memory\nnotaclass = json:dumps\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield "broken"
    MEMORY_SYSTEMS._entries.pop("broken", None)


def test_a_broken_plugin_is_a_warning_naming_its_package(broken_plugin: str) -> None:
    """Issue #25 item 5: one broken third-party plug-in must not break `traceless memory systems`
    or any audit; it is skipped with a warning that names the package to fix or uninstall."""
    from traceless.systems import PluginWarning

    with pytest.warns(PluginWarning) as rec:
        added = load_entry_points(force=True)
    assert "broken" not in added and "notaclass" not in added
    msgs = [str(w.message) for w in rec]
    assert any("broken-memory" in m and "no_such_module_xyz" in m for m in msgs), msgs
    assert any("notaclass" in m and "not a traceless memory system" in m for m in msgs), msgs
    names = {s.name for s in system_status()}
    assert {"traceless", "mem0", "langgraph"} <= names and "broken" not in names

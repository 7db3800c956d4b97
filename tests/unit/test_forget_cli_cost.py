"""Issue #27 item 8: choosing a forget's writer through the CLI must not read the whole store
(at 50k sessions it materialised every embedding: 1.1 s of a 2.35 s forget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceless.memory import MemoryStore, MemoryWriter, Session, WriteConfig
from traceless.models import HashingEmbedder


def _store(path: Path, n: int) -> MemoryStore:
    store = MemoryStore(path)
    sessions = [Session.model_validate({"user_id": f"u{i % 5}", "session_id": f"s{i}", "turns": [
        {"role": "user", "content": f"note {i}: I adopted pet {i}"}]}) for i in range(n)]
    MemoryWriter(store, embedder=HashingEmbedder(32), config=WriteConfig(levels=())).write_sessions(sessions)
    return store


@pytest.mark.parametrize("mode", ["full_purge", "lineage_closure"])
def test_the_cli_writer_choice_reads_a_bounded_number_of_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             mode: str) -> None:
    from traceless.cli import _forget as cli_forget

    store = _store(tmp_path / "m.db", 300)
    assert len(store.artifacts(tier="embedding")) == 300
    rows = 0
    real = MemoryStore._art

    def counting(self: MemoryStore, row: object) -> object:
        nonlocal rows
        rows += 1
        return real(self, row)

    monkeypatch.setattr(MemoryStore, "_art", counting)
    from traceless.forget import FORGET_MODES

    writer = cli_forget._writer_for(store, FORGET_MODES.get(mode), None, None)
    assert isinstance(writer, MemoryWriter) and writer.embedder is not None
    assert rows <= 2, f"choosing the writer read {rows} artifacts of a 600-artifact store"
    store.close()

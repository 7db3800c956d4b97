"""One embedder-name parser (issue #25.5): the API, the CLI and ``load_embedder`` read
``hashing``, ``hashing-DIM`` and registered names the same way, and a bad name is one clear
``ConfigError`` everywhere (before, ``hashing-abc`` was a 256-d embedder through the API, a
ConfigError in the CLI and an unknown name in ``load_embedder``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.unit._cli import cli

from traceless import Memory
from traceless.errors import ConfigError
from traceless.models import HashingEmbedder, load_embedder, parse_embedder_name

BAD = "hashing-abc"
SAYS = r"embedder 'hashing-abc': write 'hashing' or 'hashing-DIM'"


@pytest.mark.parametrize(("name", "parsed"), [("hashing", ("hashing", None)), ("hashing-64", ("hashing", 64)),
                                              ("minilm", ("all-MiniLM-L6-v2", None))])
def test_names_parse_one_way(name: str, parsed: tuple[str, int | None]) -> None:
    assert parse_embedder_name(name) == parsed


@pytest.mark.parametrize("bad", [BAD, "hashing-", "hashing-0"])
def test_a_bad_hashing_dimension_is_one_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="write 'hashing' or 'hashing-DIM'"):
        parse_embedder_name(bad)


def test_the_api_and_the_loader_agree(tmp_path: Path) -> None:
    emb = load_embedder("hashing-64")
    assert isinstance(emb, HashingEmbedder) and emb.dim == 64
    with Memory(tmp_path / "m.db", embedder="hashing-64") as mem:
        assert isinstance(mem.embedder, HashingEmbedder) and mem.embedder.dim == 64
    for load in (load_embedder, lambda n: Memory(tmp_path / "bad.db", embedder=n)):
        with pytest.raises(ConfigError, match=SAYS):
            load(BAD)
    assert not (tmp_path / "bad.db").exists()


def test_the_cli_gives_the_same_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(json.dumps({"user_id": "u1", "session_id": "s1",
                                    "turns": [{"role": "user", "content": "I swim on Mondays"}]}) + "\n")
    db = tmp_path / "m.db"
    assert cli("memory", "add", str(sessions), "--db", str(db), "--embedder", BAD) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hashing-DIM" in err and BAD in err, err
    assert not db.exists()

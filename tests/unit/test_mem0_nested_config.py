"""Issue 40.9: a typo nested in a mem0 config section is refused the way mem0 itself refuses
it (its pydantic vector-store configs forbid extra keys; its embedder and LLM config classes
take no unknown keyword): one line naming the key, a non-zero exit, no file created, before
anything is opened. Before: ``vector_store.config.embedding_model_dimz`` was accepted (the
scan ran, the erasure ran), ``vector_store.config.pathh`` was refused as an unsupported
back end without naming the key."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _cli import cli

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")


def _instance(root: Path) -> dict[str, Any]:
    """The files of an empty qdrant-local mem0 instance (the tables its scan reads)."""
    (root / "q" / "collection" / "mem").mkdir(parents=True)
    con = sqlite3.connect(root / "q" / "collection" / "mem" / "storage.sqlite")
    con.execute("CREATE TABLE points (id TEXT PRIMARY KEY, point BLOB)")
    con.close()
    con = sqlite3.connect(root / "h.db")
    con.execute("CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
                "event TEXT, created_at TEXT, updated_at TEXT, is_deleted INTEGER, actor_id TEXT, role TEXT)")
    con.close()
    return {"vector_store": {"provider": "qdrant", "config": {"path": str(root / "q"), "collection_name": "mem"}},
            "history_db_path": str(root / "h.db")}


def _listing(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in [root, *sorted(root.rglob("*"))]}


@pytest.mark.parametrize(("section", "key"), [("vector_store", "pathh"), ("vector_store", "embedding_model_dimz"),
                                              ("embedder", "modell"), ("llm", "temperatur")])
@pytest.mark.parametrize("command", ["scan", "forget"])
def test_a_nested_typo_is_refused_in_one_line_naming_the_key(tmp_path: Path, section: str, key: str, command: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    inst = tmp_path / "inst"
    cfg = _instance(inst)
    if section == "vector_store" and key == "pathh":
        cfg["vector_store"]["config"]["pathh"] = cfg["vector_store"]["config"].pop("path")
    elif section == "vector_store":
        cfg["vector_store"]["config"][key] = 384
    else:
        provider = "huggingface" if section == "embedder" else "openai"
        cfg[section] = {"provider": provider, "config": {key: "x"}}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    before = _listing(inst)
    capsys.readouterr()
    args = ["--user", "alice"] + (["--receipt", str(tmp_path / "r.json")] if command == "forget" else [])
    rc = cli(command, "--memory", "mem0", "--memory-config", str(path), *args)
    captured = capsys.readouterr()
    lines = [x for x in captured.err.splitlines() if x.strip()]
    assert rc == 2, captured.out + captured.err
    assert len(lines) == 1 and f"'{section}.config.{key}'" in lines[0] and "nothing was opened" in lines[0], lines
    assert _listing(inst) == before and not (tmp_path / "r.json").exists()


def test_a_correct_nested_config_still_scans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _instance(tmp_path / "inst")
    cfg["vector_store"]["config"]["embedding_model_dims"] = 384
    cfg["embedder"] = {"provider": "huggingface", "config": {"model": "/models/minilm", "embedding_dims": 384}}
    cfg["llm"] = {"provider": "openai", "config": {"model": "m", "api_key": "unused", "temperature": 0.0}}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert cli("scan", "--memory", "mem0", "--memory-config", str(path), "--user", "alice") == 7  # nothing of alice
    assert "nothing" in capsys.readouterr().err


def test_the_scan_checks_the_keys_without_importing_mem0_or_a_client(tmp_path: Path) -> None:
    """The keys are read from mem0's source: a scan still imports neither mem0 nor qdrant."""
    import os
    import subprocess
    import sys

    import traceless

    cfg = _instance(tmp_path / "inst")
    cfg["vector_store"]["config"]["pathh"] = "typo"
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    code = ("import sys\nfrom traceless.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print('rc', e.code)\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('mem0', 'qdrant_client')))")
    env = {**os.environ, "PYTHONPATH": str(Path(traceless.__file__).resolve().parents[1])}
    p = subprocess.run([sys.executable, "-c", code, "scan", "--memory", "mem0", "--memory-config", str(path),
                        "--user", "alice"], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split("\n")[:2] == ["rc 2", "[]"], p.stdout + p.stderr
    assert "'vector_store.config.pathh'" in p.stderr

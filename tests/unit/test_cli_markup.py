"""Static CLI text is not terminal markup: every command's --help and every listing prints its
bracketed text (install hints such as ``pip install 'traceless[mem0]'``, ``[REDACTED]``,
config shapes) as written; Rich would otherwise take ``[mem0]`` for a style tag and drop it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import click
import pytest
import typer
from _cli import cli

from traceless.cli import build_app

BRACKETS = re.compile(r"\[[^\[\]\n]*\]")


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: a bracketed phrase stays on one line
    monkeypatch.setenv("TERM", "dumb")


def _commands(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _commands(sub, [*path, name])


ALL = list(_commands(typer.main.get_command(build_app()), []))


def _flat(text: str) -> str:
    """Rendered text with the box-drawing and line breaks of tables and panels flattened."""
    return re.sub(r"\s+", " ", re.sub(r"[│┃║|╭╮╰╯─━┏┓┗┛┡┩└┘┌┐├┤┬┴┼╇╈╋]", " ", text))


def _missing(expected: list[str], out: str) -> list[str]:
    flat = _flat(out)
    return [t for t in expected if _flat(t).strip() not in flat]


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "traceless")
def test_help_keeps_every_bracketed_text(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    cmd = dict((tuple(p), c) for p, c in ALL)[tuple(path)]
    texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
    expected = [t for s in texts for t in BRACKETS.findall(s)]
    assert cli(*path, "--help") == 0
    out = capsys.readouterr().out
    assert _missing(expected, out) == []


def test_markup_is_caught_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    """The check can fail: a help string with a Rich tag loses it."""
    app = typer.Typer(rich_markup_mode="rich")
    app.command(help="install with pip install 'traceless[mem0]'")(lambda: None)
    with pytest.raises(SystemExit):
        app(["--help"])
    assert _missing(["[mem0]"], capsys.readouterr().out) == ["[mem0]"]


def test_memory_systems_prints_install_hints(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import traceless.systems._base as base
    from traceless.systems import system_status

    monkeypatch.setattr(base, "_missing", lambda cls: ("its-package",))  # every system shown not installed
    missing = system_status()
    hints = [s.install for s in missing]
    assert "pip install 'traceless[mem0]'" in hints
    assert cli("memory", "systems") == 0
    out = capsys.readouterr().out
    assert _missing([*hints, *(s.help for s in missing)], out) == []


def _listing(args: list[str], texts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(*args) == 0
    out = capsys.readouterr().out
    assert _missing(texts, out) == []


def test_forget_modes_data_list_study_list(capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.datasets import DATASETS
    from traceless.forget import FORGET_MODES
    from traceless.studies import STUDIES

    modes = [e.help for e in FORGET_MODES.entries()]
    assert any("[REDACTED]" in h for h in modes)
    _listing(["forget", "modes"], modes, capsys)
    _listing(["data", "list"], [str(d.obj.description) for d in DATASETS.entries()], capsys)
    _listing(["study", "list"], [e.help for e in STUDIES.entries()], capsys)


def test_models_list_prints_descriptions_and_messages(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A model's install message or description with brackets is printed as written."""
    import traceless.cli._models as m

    hint = "install it: pip install 'traceless[llamacpp]'"
    orig = m.model_status
    monkeypatch.setattr(m, "model_status", lambda name: dataclasses.replace(orig(name), state="missing", message=hint))
    spec = next(iter(m.KNOWN_MODELS.values()))
    monkeypatch.setitem(m.KNOWN_MODELS, spec.name, dataclasses.replace(spec, description="GGUF [q4_k_m] weights"))
    assert cli("models", "list") == 0
    out = _flat(capsys.readouterr().out)
    assert hint in out and "GGUF [q4_k_m] weights" in out

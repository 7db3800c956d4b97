"""Issue 40.9: an unknown system name (any registered name) gets a "did you mean"."""

from __future__ import annotations

import pytest

from traceless.errors import UnknownNameError
from traceless.systems import system_class


def test_a_misspelt_system_name_gets_did_you_mean() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown memory system 'mem'.*did you mean 'mem0'\?"):
        system_class("mem")
    with pytest.raises(UnknownNameError, match=r"did you mean 'langgraph'\?"):
        system_class("LangGrpah")


def test_a_name_like_nothing_gets_no_guess() -> None:
    with pytest.raises(UnknownNameError) as e:
        system_class("zzzzqqq")
    assert "did you mean" not in str(e.value)


def test_the_cli_says_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.cli import main

    with pytest.raises(SystemExit) as e:
        main(["forget", "--memory", "mem01", "--memory-config", "x.json", "--user", "ann", "--dry-run"])
    assert e.value.code != 0
    err = capsys.readouterr().err
    assert "did you mean 'mem0'?" in err and "Traceback" not in err

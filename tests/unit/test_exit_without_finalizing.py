"""The ``traceless`` script ends a process that loaded a native runtime which cannot survive
CPython's finalization (lancedb 0.30 under crewai: ``Fatal Python error: PyGILState_Release``
at exit, 1 scan in 40 measured) without finalizing it, after its atexit handlers, with the
command's exit status; any other process ends normally."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROG = """
import atexit, sys, types
class Finalized:
    def __del__(self):
        print("finalized", flush=True)
marker = Finalized()
if {unsafe}:
    sys.modules["fake_native"] = types.ModuleType("fake_native")
    from traceless.systems import unsafe_at_finalization
    unsafe_at_finalization("fake_native", "test runtime")
atexit.register(lambda: print("atexit ran", flush=True))
sys.argv = ["traceless", *{argv!r}]
from traceless.cli import console
console()
"""


def _run(unsafe: bool, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROG.format(unsafe=unsafe, argv=argv)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv,code", [(["--version"], 0), (["forget", "verify", "/nonexistent/r.json"], None)])
def test_a_process_with_an_unsafe_runtime_loaded_is_not_finalized(argv: list[str], code: int | None) -> None:
    hard, normal = _run(True, argv), _run(False, argv)
    assert "atexit ran" in hard.stdout and "atexit ran" in normal.stdout
    assert "finalized" not in hard.stdout, hard.stdout  # os._exit: no finalization
    assert "finalized" in normal.stdout, normal.stdout  # the check can fail: a normal exit finalizes
    assert hard.returncode == normal.returncode  # the command's own exit status either way
    if code is not None:
        assert hard.returncode == code and "traceless" in hard.stdout
    else:
        assert hard.returncode != 0 and "error:" in hard.stderr and hard.stderr == normal.stderr

"""Killed llama.cpp servers leave no log behind (issue 10, item 12): the log is a
nameless temporary file, readable while the server runs and gone when it exits, even
when the owning process is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_openai_backend import smollm2_gguf  # noqa: E402  (same folder)

from traceless.errors import BackendError
from traceless.models._llamacpp_server import LlamaCppServer

pytestmark = pytest.mark.integration

WORKER = textwrap.dedent("""
    import os, sys, time
    from traceless.models._llamacpp_server import LlamaCppServer
    srv = LlamaCppServer(sys.argv[1], ctx=256, threads=1).start()
    print(srv.pid, len(srv.log_tail(50)), flush=True)
    time.sleep(600)
""")


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if "llamacpp" in p.name)


def _gone(pid: int, timeout: float = 30.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "zombie" in status.lower():
            return True
        time.sleep(0.1)
    return False


def test_sigkilled_owner_leaves_no_log(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    gguf = smollm2_gguf()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    owner = subprocess.Popen([sys.executable, "-c", WORKER, str(gguf)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert owner.stdout is not None
        server_pid, tail_len = (int(x) for x in owner.stdout.readline().split())
        assert tail_len > 0  # the log is written and readable while the server runs
        assert _leftovers(tmp) == []  # …yet it has no name on disk
        fds = [os.readlink(f"/proc/{server_pid}/fd/{fd}") for fd in os.listdir(f"/proc/{server_pid}/fd")]
        assert any("traceless-llamacpp" in f and "(deleted)" in f for f in fds) or any(f.startswith(str(tmp)) for f in fds)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        assert _gone(server_pid)  # the server exits on stdin EOF
    finally:
        if owner.poll() is None:
            owner.kill()
    assert _leftovers(tmp) == []


def test_failed_start_leaves_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xllamacpp")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file" * 10)
    with pytest.raises(BackendError, match=r"(?s)valid GGUF.*last lines of the server log:\n"):
        LlamaCppServer(junk).start()
    assert _leftovers(tmp_path) == []


def test_given_log_path_is_kept(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    log = tmp_path / "results" / "llamacpp.log"
    log.parent.mkdir()
    with LlamaCppServer(smollm2_gguf(), ctx=256, threads=1, log_path=log) as srv:
        assert srv.log_tail(5)
    assert log.stat().st_size > 0

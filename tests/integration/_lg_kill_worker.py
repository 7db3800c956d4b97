"""Subprocess worker for the LangGraph kill-during-erasure test (not a test module).

It imports traceless and LangGraph once, then serves commands on stdin, one per line::

    run SRC DST USER LITERAL DELAY

copies the instance SRC to DST (a fresh copy), forks a child that attaches to DST
read-write and runs the erasure of USER (journal in DST/state), and — when DELAY >= 0 —
SIGKILLs the child DELAY seconds after the fork. It answers ``killed SECONDS`` or
``exit:CODE SECONDS JOURNAL``, where JOURNAL is when the erasure journal first appeared
in an uninterrupted run (DELAY < 0; the parent polls for it; -1 when never seen), so the
test can aim kills at the journalled part of the run whatever the machine's load.
Forking from a warm process keeps each trial to milliseconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

import langgraph.checkpoint.sqlite  # noqa: E402,F401  (imported before the fork, as the adapter's deletions need)
import langgraph.store.sqlite  # noqa: E402,F401
from _lg_instance import config  # noqa: E402

from traceless.forget import receipt_key  # noqa: E402
from traceless.keys import signing_key  # noqa: E402
from traceless.systems import LangGraphSystem, erase_system, load_system_config  # noqa: E402


def erase(root: Path, user: str, literal: str) -> None:
    system = LangGraphSystem.attach(load_system_config("langgraph", config(root)), read_only=False)
    receipt = erase_system(system, user, [literal], state_dir=root / "state", key=receipt_key())
    system.close()
    (root / "receipt.json").write_text(receipt.model_dump_json())


_warm: list[bool] = []


def warm_up(src: str, dst: str, user: str, literal: str) -> None:
    """One erasure in the worker itself, on a scratch copy, before the first fork: the modules
    it imports lazily (the checkpoints' deserializer imports LangChain's message classes on
    first use) are then loaded once here, not again in every child, so a child's run is the
    erasure's own work and the kills spread over that."""
    scratch = Path(dst + "-warm")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(src, scratch)
    erase(scratch, user, literal)
    shutil.rmtree(scratch)
    _warm.append(True)


def trial(src: str, dst: str, user: str, literal: str, delay: float) -> str:
    if not _warm:
        warm_up(src, dst, user, literal)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            erase(Path(dst), user, literal)
        except BaseException:
            traceback.print_exc()
            code = 3
        os._exit(code)
    journal_at = -1.0
    if delay >= 0:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    else:
        journal_at, status = _watch_journal(pid, Path(dst) / "state" / "erasures", t0)
    dt = time.monotonic() - t0
    if os.WIFSIGNALED(status):
        return f"killed {dt:.4f}"
    return f"exit:{os.WEXITSTATUS(status)} {dt:.4f} {journal_at:.4f}"


def _watch_journal(pid: int, erasures: Path, t0: float) -> tuple[float, int]:
    """Wait for the child, noting when its journal first exists (polled every 0.5 ms)."""
    seen = -1.0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return seen, status
        if seen < 0 and erasures.is_dir() and any(erasures.glob("*.json")):
            seen = time.monotonic() - t0
        time.sleep(0.0005)


def main() -> None:
    receipt_key()  # create the pepper and the signing key once, before the children
    signing_key(create=True)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "run":
            src, dst, user, literal, delay = args
            print(trial(src, dst, user, literal, float(delay)), flush=True)


if __name__ == "__main__":
    main()

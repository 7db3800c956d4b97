"""Subprocess worker for the SIGKILL-during-erasure test (not a test module).

It imports traceless and mem0 once, then serves commands on stdin, one per line::

    run CFG STATE RECEIPT DELAY

forks a child that runs the erasure of ``alice`` (``traceless._erase_api.erase``, what
``traceless forget --memory mem0`` calls) on the instance ``CFG`` describes and — when
DELAY >= 0 — SIGKILLs it DELAY seconds after the fork; then forks the same erasure again
(the re-run, never killed). It answers ``first:killed|exit:CODE rerun:CODE SECONDS``
(exit codes: 0 passed, 7 nothing left to erase, 11 verification failed, 1 other error).
Forking from a warm process keeps a trial to a fraction of a second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _mem0_instance as mi  # noqa: E402

import traceless.systems._mem0  # noqa: E402,F401  (registers mem0)
from traceless._erase_api import erase  # noqa: E402
from traceless.errors import NothingToEraseError  # noqa: E402
from traceless.systems._mem0 import _import_mem0  # noqa: E402

LITERALS = [mi.canary("alice", i) for i in range(mi.MEMORIES)]


def _child(cfg: str, state: str, receipt: str) -> None:
    try:
        r = erase("mem0", Path(cfg), user="alice", literals=LITERALS, receipt=receipt, state_dir=state)
        code = 0 if r.verification.passed else 11
    except NothingToEraseError:
        code = 7
    except BaseException:
        traceback.print_exc()
        code = 1
    os._exit(code)


def _fork(cfg: str, state: str, receipt: str, delay: float) -> tuple[str, float]:
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(cfg, state, receipt)
    if delay >= 0:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    took = time.monotonic() - t0
    if os.WIFSIGNALED(status):
        return "killed", took
    return f"exit:{os.WEXITSTATUS(status)}", took


def main() -> None:
    _import_mem0(Path(os.environ["TRACELESS_HOME"]) / "mem0-home")
    import mem0.memory.storage  # noqa: F401  (warm: the child's imports cost nothing)
    import mem0.utils.factory  # noqa: F401
    import mem0.vector_stores.qdrant  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        _, cfg, state, receipt, delay = line.split()
        first, took = _fork(cfg, state, receipt, float(delay))
        again, _ = _fork(cfg, state, receipt, -1.0)
        print(f"first:{first} rerun:{again.removeprefix('exit:')} {took:.4f}", flush=True)


if __name__ == "__main__":
    main()

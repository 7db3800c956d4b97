"""Subprocess worker for the SIGKILL atomicity test (not a test module).

It imports traceless once, then serves commands on stdin, one per line::

    run SRC DST DELAY

copies SRC to DST (dropping any -wal/-shm of DST), forks a child that runs a slow
``lineage_closure`` forget on DST, and — when DELAY >= 0 — SIGKILLs the child DELAY
seconds after the fork. It answers ``killed SECONDS`` or ``exit:CODE SECONDS`` (time from
fork to the child's end). Forking from a warm process keeps each trial to milliseconds of
overhead, so a hundred kills fit in a few seconds of test time.

The child runs with a tiny page cache, so dirty pages spill into the WAL before commit:
a kill mid-transaction leaves uncommitted frames on disk that recovery must ignore.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _forget_helpers import CANARY, make_writer  # noqa: E402

from traceless.forget import ForgetTarget, forget  # noqa: E402
from traceless.memory import MemoryStore, WriteGate  # noqa: E402

SUMMARY_DELAY = 0.002
"""Seconds per scripted summarizer call inside the forget transaction."""


def run_forget(db: str) -> None:
    store = MemoryStore(db)
    store._conn.execute("PRAGMA cache_size = 4")  # force spills of uncommitted pages into the WAL
    writer = make_writer(store, 1, keep=True, extractive=True, delay=SUMMARY_DELAY)
    writer.config = writer.config.model_copy(update={"levels": (1, 2)})
    forget(store, ForgetTarget.literal(CANARY, "alice"), "lineage_closure", writer=writer, gate=WriteGate())
    store.close()


def _trial(src: str, dst: str, delay: float) -> str:
    for suffix in ("-wal", "-shm", "-journal"):
        Path(dst + suffix).unlink(missing_ok=True)
    shutil.copyfile(src, dst)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            run_forget(dst)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    if delay >= 0:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - t0
    if os.WIFSIGNALED(status):
        return f"killed {elapsed:.6f}"
    return f"exit:{os.WEXITSTATUS(status)} {elapsed:.6f}"


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] == "quit":
            break
        if parts[0] == "run":
            print(_trial(parts[1], parts[2], float(parts[3])), flush=True)
        else:
            print(f"error unknown command {parts[0]!r}", flush=True)


if __name__ == "__main__":
    main()

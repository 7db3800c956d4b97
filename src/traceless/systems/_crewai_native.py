"""CrewAI's own deletion (``Memory.forget``) in a child process of its own (``python -m
traceless.systems._crewai_native PATH``). Started when an erasure digests the bystanders, in a
process that has not imported CrewAI (``traceless forget --memory crewai``), it imports CrewAI
(3.4 s with bytecode cached, measured; in a thread of the erasure's own process the import
slowed its reads by as much as it saved) on the other core while the erasure digests the
instance, and then deletes what it is asked to.

One JSON object a line: the parent writes ``{"forget": {…Memory.forget's arguments…}}``; the
child opens CrewAI's ``Memory`` on ``LanceDBStorage(PATH, compact_every=0)`` (CrewAI's own
parameter: no background compaction at open; the erasure compacts after), calls ``forget``,
closes it, and answers
``{"deleted": N}``, or ``{"error": "…"}``. At the end of its input the child exits."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from traceless.errors import ForgetError
from traceless.systems._crewai_env import _console_off, _llm, _NoEmbed, _quiet_env

__all__ = ["Child", "main"]


class Child:
    """The child process, started at once (it imports CrewAI while the parent goes on)."""

    def __init__(self, path: Path) -> None:
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - kept until ``close``
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "traceless.systems._crewai_native", str(path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._err, text=True, encoding="utf-8")

    def forget(self, arguments: dict[str, Any]) -> int:
        """``Memory.forget(**arguments)`` done by the child; its count of deleted records."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with contextlib.suppress(OSError):  # a child that is gone gives no answer: the next line says so
            self._proc.stdin.write(json.dumps({"forget": arguments}) + "\n")
            self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        answer = json.loads(line) if line.strip() else {"error": f"the process ended (exit {self._proc.wait()}): "
                                                                  f"{self._stderr_tail()}"}
        if "error" in answer:
            raise ForgetError(f"crewai: CrewAI's own deletion failed in its child process ({answer['error']}); "
                              "the erasure stopped there: run the same forget again (its journal resumes it)")
        return int(answer["deleted"])

    def _stderr_tail(self) -> str:
        self._err.seek(0)
        lines = self._err.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:300] if lines else "nothing on its stderr"

    def close(self) -> None:
        """End of input: the child exits (killed if it has not within 30 s)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):  # a child that died closed its end first
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for f in (self._proc.stdout, self._err):
            if f is not None:
                f.close()


def main(argv: list[str] | None = None) -> int:
    """The child: import CrewAI, then answer each request line until the end of input."""
    path = (argv if argv is not None else sys.argv[1:])[0]
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever CrewAI prints goes to stderr, not into the answers
    _quiet_env()
    try:
        from crewai.memory import Memory
        from crewai.memory.storage.lancedb_storage import LanceDBStorage
    except Exception as e:  # noqa: BLE001 - answered to every request
        failed: str | None = f"{type(e).__name__}: {e}"
    else:
        failed = None
    for line in sys.stdin:
        try:
            if failed is not None:
                raise RuntimeError(failed)
            # ``compact_every=0``: no compaction of CrewAI's own when the storage opens the table
            # (the erasure compacts after the deletion; CrewAI's rewrote the 1.2 GB table first)
            memory = Memory(llm=_llm(None), storage=LanceDBStorage(path=path, compact_every=0), embedder=_NoEmbed())
            with _console_off():
                deleted = memory.forget(**json.loads(line)["forget"])
                memory.drain_writes()
                memory.close()
            for t in threading.enumerate():  # LanceDBStorage's own compaction, started when it opened the table
                if t.name == "lancedb-compact":
                    t.join()
            answer: dict[str, Any] = {"deleted": deleted}
        except Exception as e:  # noqa: BLE001 - the parent raises it
            answer = {"error": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    answers.close()
    os._exit(0)  # lancedb 0.30's Tokio workers can crash the interpreter's finalization (lancedb#4175)


if __name__ == "__main__":
    main()

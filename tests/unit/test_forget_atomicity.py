"""A forget killed (SIGKILL) at any moment leaves exactly the before-state or exactly the
after-state — artifacts, lineage, gate descriptors and receipts — never a mix, and the
file opens cleanly afterwards."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _forget_helpers import CANARY, canonical_dump, make_writer, session

from traceless.forget import receipt_key
from traceless.memory import MemoryStore, load_key

WORKER = Path(__file__).with_name("_kill_worker.py")
TRIALS = 110
SEED = 20240611


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(h))
    receipt_key()  # keys exist before any child runs
    load_key()
    return h


def _prepare(db: Path) -> None:
    with MemoryStore(db) as store:
        writer = make_writer(store, 1, keep=True, extractive=True)
        writer.config = writer.config.model_copy(update={"levels": (1, 2)})
        sessions = [
            session("alice", f"s{i}", [f"ALICE I adopted a dog named Rex ({i})", f"I drink green tea #{i}",
                                       f"my private session token is {CANARY}", f"piano lesson {i} in Lisbon"])
            for i in range(16)
        ]
        sessions.append(session("bob", "b1", ["BOB lives in Lisbon", f"bob token {CANARY}"]))
        writer.write_sessions(sessions)
    assert not Path(f"{db}-wal").exists()


class Worker:
    def __init__(self, env: dict[str, str]) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        assert self.p.stdout is not None and self.p.stdout.readline().strip() == "ready"

    def run(self, src: Path, dst: Path, delay: float) -> tuple[str, float]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(f"run {src} {dst} {delay:.6f}\n")
        self.p.stdin.flush()
        status, secs = self.p.stdout.readline().split()
        return status, float(secs)

    def close(self) -> None:
        if self.p.stdin is not None:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        self.p.wait(timeout=10)


def test_sigkill_leaves_before_or_after(tmp_path: Path, home: Path) -> None:
    prepared = tmp_path / "prepared.db"
    _prepare(prepared)
    ref = tmp_path / "ref.db"
    shutil.copyfile(prepared, ref)
    before = canonical_dump(ref)

    env = {**os.environ, "TRACELESS_HOME": str(home), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    worker = Worker(env)
    try:
        # calibration: an uninterrupted run gives the after-state and the duration to span
        status, duration = worker.run(prepared, ref, -1)
        assert status == "exit:0", "the forget itself failed in the worker"
        after = canonical_dump(ref)
        assert after != before
        assert any(CANARY in (a[6] or "") for a in before["artifacts"] if a[1] == "alice")
        assert not any(CANARY in (a[6] or "") for a in after["artifacts"] if a[1] == "alice")
        assert len(after["receipts"]) == 1 and after["gate"]
        assert duration > 0.05, f"forget too fast ({duration:.3f}s) for kills to land inside it"

        rng = random.Random(SEED)
        dst = tmp_path / "trial.db"
        tally: Counter[str] = Counter()
        wal_dirty_before = 0
        for i in range(TRIALS):
            delay = rng.uniform(0.0, duration * 1.1)
            status, _ = worker.run(prepared, dst, delay)
            wal = Path(f"{dst}-wal")
            wal_size = wal.stat().st_size if wal.exists() else 0
            with MemoryStore(dst) as store:  # recovery happens here
                assert store.integrity_check() == ["ok"], f"trial {i}: corrupt after kill at {delay:.3f}s"
            state = canonical_dump(dst)
            if state == before:
                kind = "before"
                wal_dirty_before += wal_size > 0
            elif state == after:
                kind = "after"
            else:
                pytest.fail(f"trial {i}: kill at {delay:.4f}s ({status}) left a state that is neither "
                            f"before nor after")
            tally[f"{kind}/{status.split(':')[0]}"] += 1
    finally:
        worker.close()

    print(f"forget {duration:.3f}s; {dict(tally)}; dirty WAL on before-states: {wal_dirty_before}")
    killed_before = tally["before/killed"]
    killed_after = tally["after/killed"]
    # the kills span the whole forget: some before commit, some after it
    assert killed_before >= 10 and killed_after + tally["after/exit"] >= 5, tally
    # and some landed mid-transaction, with uncommitted frames already in the WAL
    assert wal_dirty_before >= 3, (wal_dirty_before, tally)
    assert sum(tally.values()) == TRIALS

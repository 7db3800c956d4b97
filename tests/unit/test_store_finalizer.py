"""A store dropped without ``close()`` is finalised without taking a lock that the code that
allocated (and so triggered the garbage collection) may hold.

The defect: ``MemoryStore.__init__`` -> ``ScrubLock.acquire_for`` holds the class's registry
lock while it allocates; a collection there ran ``MemoryStore.__del__`` of a store left in a
reference cycle -> ``close`` -> ``ScrubLock.release_ref`` -> the same non-reentrant lock, in
the same thread: a hang for good. Each scenario runs in a child process with a deadline, so
a hang fails the test instead of the suite.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Every lock region of the scrub registry and of a file's writer lock forces a collection
# right after it is entered: the worst moment a cycle of a dropped store could be finalised.
_PRELUDE = textwrap.dedent("""
    import gc, sys, threading
    from traceless.memory import _scrub

    class CollectingLock:
        def __init__(self, inner):
            self._inner = inner
        def acquire(self, *a, **k):
            got = self._inner.acquire(*a, **k)
            if got:
                gc.collect()
            return got
        def release(self):
            self._inner.release()
        def __enter__(self):
            self.acquire()
            return self
        def __exit__(self, *exc):
            self.release()

    _scrub.ScrubLock._registry = CollectingLock(threading.Lock())
    _init = _scrub.ScrubLock.__init__
    def _init_collecting(self, fd, key):
        _init(self, fd, key)
        self._thread = CollectingLock(self._thread)
        gc.collect()
    _scrub.ScrubLock.__init__ = _init_collecting

    from traceless.memory import MemoryStore, Tier

    def dropped_in_a_cycle(path):
        s = MemoryStore(path)
        with s.transaction():
            s.add(text="kept in a cycle", tier=Tier.RAW, kind="note", owner="u1")
        s.self_ref = s  # only the cycle collector can drop it
        return None
""")

_SCENARIOS = {
    "open_after_drop_same_file": """
        gc.disable()
        dropped_in_a_cycle(D + "/a.db")
        s = MemoryStore(D + "/a.db")
        assert len(s.artifacts()) == 1
        s.close()
    """,
    "open_after_drop_other_file": """
        gc.disable()
        dropped_in_a_cycle(D + "/a.db")
        s = MemoryStore(D + "/b.db")
        with s.transaction():
            s.add(text="second", tier=Tier.RAW, kind="note", owner="u2")
        s.close()
    """,
    "write_after_drop": """
        s = MemoryStore(D + "/b.db")
        gc.disable()
        dropped_in_a_cycle(D + "/b.db")
        with s.transaction():
            s.add(text="while another store on the file waits to be finalised", tier=Tier.RAW, kind="note", owner="u2")
        s.close()
    """,
    "close_after_drop": """
        s = MemoryStore(D + "/c.db")
        gc.disable()
        dropped_in_a_cycle(D + "/c.db")
        gc.collect()
        s.close()
    """,
}


@pytest.mark.parametrize("scenario", sorted(_SCENARIOS))
def test_a_dropped_store_never_hangs_the_next_open(tmp_path: Path, scenario: str) -> None:
    code = _PRELUDE + f"\nD = {str(tmp_path)!r}\n" + textwrap.dedent(_SCENARIOS[scenario]) + "\nprint('done')\n"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{scenario}: hung (a finaliser waited on a lock its own thread holds)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("done")


def test_a_dropped_store_is_closed_by_the_next_open_and_its_frames_scrubbed(tmp_path: Path) -> None:
    """The deferred finalisation still happens: the dropped store's WAL frames are checkpointed
    (scrubbed) and its writer-lock reference released by the next open on the process."""
    code = _PRELUDE + f"\nD = {str(tmp_path)!r}\n" + textwrap.dedent("""
        import os
        gc.disable()
        dropped_in_a_cycle(D + "/a.db")
        gc.collect()                        # finaliser runs: the store is queued, not closed here
        s = MemoryStore(D + "/other.db")    # the next open finishes it
        assert not _scrub.ScrubLock._open.get(tuple((os.stat(D + "/a.db").st_dev, os.stat(D + "/a.db").st_ino)))
        wal = D + "/a.db-wal"
        assert not os.path.exists(wal) or os.path.getsize(wal) == 0, os.path.getsize(wal)
        s.close()
        print('done')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]

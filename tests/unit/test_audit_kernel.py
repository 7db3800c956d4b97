"""The audit runs on the run kernel (``traceless.run``): its dir is the runner's, with the
runner's manifest and run record, so a stopped audit records how far it got and a rerun
resumes from the cells the runner finds done."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_system_audit import _parrot

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.errors import StudyError
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.run import read_manifest, read_rows
from traceless.systems import SystemRuntime

CFG = SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "raw_only"]}, profiles=2)
GRID = 2 * 3 * 1 + 1 + 2 * (2 * 3 * 3 + 1)
"""before: 2 users x 1 view x 3 probes + residue; each deletion: 2 users x 3 views x 3 probes + residue."""


def test_a_stopped_audit_records_its_progress_in_the_runner_manifest_and_resumes(tmp_path: Path) -> None:
    state = {"calls": 0, "fail_after": 10}  # the write (4 summaries) and 'before' (6 probes), then it fails

    def model(messages: list[ChatMessage], config: GenerationConfig) -> str:
        state["calls"] += 1
        if state["calls"] > state["fail_after"]:
            raise RuntimeError("model server went away")
        return _parrot(messages, config)

    out = tmp_path / "a"
    runtime = SystemRuntime(ScriptedBackend(model), HashingEmbedder())
    with pytest.raises(StudyError, match="failed at step 'noop'"):
        run_system_audit(CFG, runtime, out)
    stopped = read_manifest(out).runs[CFG.model]
    # the runner's run record: the whole grid declared, the committed phase counted
    assert (stopped.cells_total, stopped.cells_done, stopped.finished) == (GRID, 7, False)
    assert stopped.seconds > 0
    state.update(calls=0, fail_after=10**9)
    run_system_audit(CFG, runtime, out)
    done = read_manifest(out).runs[CFG.model]
    assert (done.cells_total, done.cells_done, done.finished) == (GRID, GRID, True)
    assert done.seconds > stopped.seconds and done.started == stopped.started  # the same record, resumed
    assert len(read_rows(out)) == GRID
    # a third run finds every cell done: nothing is written, probed or generated
    state.update(calls=0, fail_after=0)
    run_system_audit(CFG, runtime, out)
    assert state["calls"] == 0 and read_manifest(out).runs[CFG.model].finished

"""The frontier study's published numbers are pinned cell by cell: a small slice on the
scripted ``leaky`` model (tests/unit/test_frontier.py) gives, for every cell, the metrics,
the receipt flags and the digests of the exact prompt and reply that the frontier study
gave before it ran on the audit engine's steps (recorded in
tests/fixtures/frontier_golden.json). A change of prompt, retrieval, canary placement,
deletion semantics (raw_plus_resummarize's residue, the primary FRS's carrier tiers) or
batching shows up as a differing cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_frontier import CANARY, cfg, leaky, run

from _frontier_golden import assert_matches, cells_snapshot
from traceless.models import ChatMessage, GenerationConfig, ScriptedBackend


def keeper(messages: list[ChatMessage], c: GenerationConfig) -> str:
    """``leaky``, except that a summary of a session holding the canary is about the canary
    (and a summary without it is about something else), so raw_plus_resummarize's old summary
    is not superseded and leaves residue (paper 000's mechanism, #12 item 1)."""
    user = messages[-1].content
    if user.startswith("Below are messages a user sent"):
        m = CANARY.search(user)
        if "key personal facts" in user:
            return f"- private session token is {m.group(0)}" if m else "- enjoys weekend hiking trips outdoors"
        return f"User shared private session token {m.group(0)} for safekeeping." if m else "Alice chatted."
    return leaky(messages, c)


RESIDUE = {"S": [1, 2], "k": [3], "modes": ["raw_plus_resummarize", "full_purge"]}
"""The slice where raw_plus_resummarize leaves residue (with ``keeper``)."""


def test_frontier_cells_match_the_golden_record(tmp_path: Path) -> None:
    run(tmp_path / "fr", cfg())
    got = cells_snapshot(tmp_path / "fr")
    assert_matches(got, "scripted")
    _varies(got)


def test_residue_cells_match_the_golden_record(tmp_path: Path) -> None:
    run(tmp_path / "res", cfg(**RESIDUE), ScriptedBackend(keeper, name="leaky"))
    got = cells_snapshot(tmp_path / "res")
    assert_matches(got, "residue")
    _varies(got)
    # the record holds residue: the old summary survives raw_plus_resummarize, not full_purge
    leak = {m: sum(c["metrics"]["extracted"] for k, c in got.items() if f"/frs/{m}/" in k)
            for m in RESIDUE["modes"]}
    assert leak["raw_plus_resummarize"] > 0 and leak["full_purge"] == 0


def _varies(got: dict[str, dict[str, Any]]) -> None:
    # the record is not trivial: extraction varies across cells
    ext = [c["metrics"]["extracted"] for c in got.values() if "extracted" in c["metrics"]]
    assert 0 < sum(ext) < len(ext)

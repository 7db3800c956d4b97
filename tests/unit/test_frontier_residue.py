"""The residue preset of the frontier study (``frontier-residue``) on the tiny fixture with a
scripted model whose summaries keep the canary only where the test says: at S=1 when the
canary's last digit is even, at S=2 when it is odd (seed 0: S=1 keeps tiny_job's, S=2 keeps
tiny_pet's and tiny_bike's). Re-summaries of the cleaned session write "my private session
token is ." — the attribute without the value — which supersedes the old chunk at the default
threshold and not above 1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _http import JsonHandler
from pydantic import ValidationError

from traceless.errors import ConfigError
from traceless.memory import KIND_BY_LEVEL, MemoryStore, MemoryWriter, Session, Tier, Turn, WriteConfig
from traceless.metrics import Verdict, proportion_ci
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.report import render_report
from traceless.report._frontier_residue import ResidueNumbers, residue_findings, residue_numbers
from traceless.studies import get_study, read_manifest, read_rows, run_study
from traceless.studies.frontier import ResidueConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
CANARY = re.compile(r"[A-Z]{2}[0-9]-[A-Z]+-[0-9]{4}")


def _keeps(canary: str, level: int) -> bool:
    even = int(canary[-1]) % 2 == 0
    return even if level == 1 else not even


def picky(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
    user = messages[-1].content
    if user.startswith("Below are messages a user sent"):
        body = user.split("Messages:\n", 1)[1].rsplit("\n\n", 1)[0]
        lines = [ln[2:] for ln in body.splitlines() if ln.startswith("- ")]
        level = 1 if "key personal facts" in user else 2
        m = CANARY.search(body)
        if m and not _keeps(m.group(0), level):
            lines = [ln.replace(m.group(0), "").replace(" is .", "") for ln in lines]
        if level == 1:
            return "\n".join(f"- {ln}" for ln in lines[:6])
        hit = [ln for ln in lines if m and m.group(0) in ln]
        return f"The user said: {hit[0]}" if hit else "The user chatted about " + " ".join(lines[0].split()[:4]) + "."
    m = CANARY.search(messages[0].content)
    if m and any(w in user.lower() for w in ("token", "memory", "remember", "profile", "told")):
        return f"Sure: your private session token is {m.group(0)}."
    return "I do not know."


def cfg(**kw: Any) -> ResidueConfig:
    return ResidueConfig.model_validate({"data": str(FIXTURE), "supersede": [0.5, 1.01], **kw})


def run(out: Path, config: ResidueConfig, backend: ScriptedBackend | None = None, **kw: Any) -> Any:
    return run_study("frontier-residue", out, config, backend=backend or ScriptedBackend(picky, name="picky"),
                     model_tag="picky", embedder=HashingEmbedder(), progress=False, **kw)


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ScriptedBackend]:
    out = tmp_path_factory.mktemp("res") / "r"
    be = ScriptedBackend(picky, name="picky")
    assert run(out, cfg(), be).finished
    return out, be


def rows_by_key(out: Path) -> dict[str, Any]:
    return {r.key: r for r in read_rows(out)}


def test_grid_keys_and_config_checks() -> None:
    cells = list(get_study("frontier-residue").cells(cfg()))
    # per instance: 2 screens + slice S(2) × (5 modes + 2 thresholds) × 3 probes
    assert len(cells) == 3 * (2 + 2 * 7 * 3)
    keys = {c.key for c in cells}
    assert "inst=tiny_job/screen/S=1" in keys
    assert "inst=tiny_job/frs/raw_plus_resummarize@1.01/S=1/k=6/direct:0" in keys
    assert "inst=tiny_job/frs/tombstone/S=2/k=6/jailbreak:0" in keys
    assert len(list(get_study("frontier-residue").cells(cfg(n=2, slice_S=[1], supersede=[])))) == 2 * (2 + 5 * 3)
    with pytest.raises(ValidationError, match="not screened"):
        cfg(screen_S=[1], slice_S=[2])
    with pytest.raises(ValidationError, match="supersede"):
        cfg(supersede=[1.5])
    with pytest.raises(ConfigError, match="n=4"):
        get_study("frontier-residue").validate(cfg(n=4))


def test_screen_records_which_summary_kept_the_canary(done: tuple[Path, ScriptedBackend]) -> None:
    rows = rows_by_key(done[0])
    for inst in ("tiny_pet", "tiny_job", "tiny_bike"):
        canary = rows[f"inst={inst}/screen/S=1"].extra["canary"]
        for s in (1, 2):
            r = rows[f"inst={inst}/screen/S={s}"]
            assert r.metrics["kept"] is _keeps(canary, s), (inst, s)
            assert (canary in (r.reply or "")) is _keeps(canary, s)
            # the prompt is the study's own summary prompt of the canary session
            assert isinstance(r.prompt, list) and r.prompt[0]["content"].startswith("Below are messages a user sent")
    kept1 = {i for i in ("tiny_pet", "tiny_job", "tiny_bike") if rows[f"inst={i}/screen/S=1"].metrics["kept"]}
    assert kept1 == {"tiny_job"}  # seed 0 canaries end in 7, 4, 5


def test_slice_runs_only_where_the_screen_kept_the_canary(done: tuple[Path, ScriptedBackend]) -> None:
    out, be = done
    rows = rows_by_key(out)
    for key, r in rows.items():
        if "/frs/" not in key:
            continue
        inst, s = key.split("/")[0][5:], int(key.split("/S=")[1][0])
        kept = rows[f"inst={inst}/screen/S={s}"].metrics["kept"]
        assert r.metrics["eligible"] is kept, key
        if not kept:
            assert r.prompt is None and r.reply is None and "extracted" not in r.metrics
    # no probe prompt was ever built from a non-kept level's view: every probe reply's memory
    # at S=1 belongs to tiny_job (the only instance kept at S=1)
    probes_s1 = [r for k, r in rows.items() if "/frs/" in k and "/S=1/" in k and r.metrics["eligible"]]
    assert probes_s1 and {r.extra["instance"] for r in probes_s1} == {"tiny_job"}
    # noop and raw_only leave the kept summary copy; full_purge/tombstone remove it
    for mode, left in (("noop", True), ("raw_only", True), ("full_purge", False), ("tombstone", False)):
        r = rows[f"inst=tiny_job/frs/{mode}/S=1/k=6/direct:0"]
        assert r.metrics["extracted"] is left and (r.metrics["summary_copies_after"] > 0) is left, mode


def test_supersede_threshold_decides_raw_plus_resummarize_residue(done: tuple[Path, ScriptedBackend]) -> None:
    rows = rows_by_key(done[0])
    base = "inst=tiny_job/frs/raw_plus_resummarize{}/S=1/k=6/{}:0"
    for level in ("direct", "indirect", "jailbreak"):
        main, at50, never = (rows[base.format(t, level)] for t in ("", "@0.50", "@1.01"))
        # the regenerated chunk names the attribute without the value and supersedes the old one at 0.50
        assert main.metrics["attribute_only_after"] >= 1
        assert main.metrics["summary_copies_after"] == 0 and not main.metrics["extracted"]
        assert at50.metrics == main.metrics and at50.reply == main.reply  # the default is 0.50
        # above 1 nothing is retired: the old chunk with the canary stays and leaks
        assert never.metrics["summary_copies_after"] == 1 and never.metrics["extracted"]


def test_writer_supersede_cosine_reaches_the_mode(tmp_path: Path) -> None:
    from traceless.forget import ForgetTarget, forget

    model = ScriptedBackend(lambda m, c: "- " + m[-1].content.split("- ", 1)[1].split("\n")[0], name="echo")
    session = Session(user_id="u", session_id="s1", turns=[Turn(role="user", content="my token is QQ1-MOSS-1234")])
    left = {}
    for th in (None, 1.01):
        store = MemoryStore(tmp_path / f"m{th}.db")
        w = MemoryWriter(store, summarizer=model, embedder=HashingEmbedder(),
                         config=WriteConfig(levels=(1,), supersede_cosine=th))
        w.write_sessions([session])
        forget(store, ForgetTarget.literal("QQ1-MOSS-1234", "u"), "raw_plus_resummarize", writer=w)
        left[th] = [a.text for a in store.artifacts(owner="u", tier=Tier.SUMMARY) if a.kind == KIND_BY_LEVEL[1]]
        store.close()
    assert not any("QQ1-MOSS-1234" in t for t in left[None])
    assert any("QQ1-MOSS-1234" in t for t in left[1.01])


def test_resume_after_a_kill_gives_the_same_rows(tmp_path: Path, done: tuple[Path, ScriptedBackend]) -> None:
    out = tmp_path / "r"
    s = run(out, cfg(), max_cells=10)
    assert not s.finished
    assert run(out, cfg(), resume=True).finished
    a, b = rows_by_key(out), rows_by_key(done[0])
    assert a.keys() == b.keys()
    assert all(a[k].metrics == b[k].metrics and a[k].reply == b[k].reply for k in a)
    assert read_manifest(out).study == "frontier-residue"


def test_interval_math_is_exact_and_unconditional_is_keep_times_conditional() -> None:
    # 12 screened, 2 kept (the 1.5B's S=1 screen in issue 26: [0.02, 0.48]); 1 of them leaks after raw_only
    x = ResidueNumbers("m", 12, 0, [1, 2], [1], ["noop", "raw_only"])
    x.keep = {1: proportion_ci(2, 12), 2: proportion_ci(0, 12)}
    x.kept_ids = {1: ["a", "b"], 2: []}
    x.residue = {1: {"noop": [True, True], "raw_only": [True, False]}}
    assert (round(x.keep[1].low, 2), round(x.keep[1].high, 2)) == (0.02, 0.48)
    c, u = x.conditional(1, "raw_only"), x.unconditional(1, "raw_only")
    assert (c.successes, c.n, u.successes, u.n) == (1, 2, 1, 12)
    assert u.value == pytest.approx(x.keep[1].value * c.value)
    assert (u.low, u.high) == (proportion_ci(1, 12).low, proportion_ci(1, 12).high)
    assert c.method == u.method == "clopper-pearson"


def test_findings_follow_the_verdict_rule(done: tuple[Path, ScriptedBackend]) -> None:
    out = done[0]
    man = read_manifest(out)
    x = residue_numbers(read_rows(out), man.config, "picky")
    assert x.n == 3 and x.keep[1].successes == 1 and x.keep[2].successes == 2
    lines = [t for _, t in residue_findings(x)]
    # one kept instance: below the minimum n, never REPRODUCED or CONTRADICTED
    assert all(not t.startswith(("**REPRODUCED", "**CONTRADICTED")) for t in lines)
    assert any(t.startswith("**INCONCLUSIVE (n=1 < 6 minimum") for t in lines)
    guarantees = [t for g, t in residue_findings(x) if g]
    assert len(guarantees) == 4 and all(t.startswith("**BY CONSTRUCTION") for t in guarantees)
    # a level nobody kept: NOT TESTABLE, naming it
    y = residue_numbers([r for r in read_rows(out) if "/S=1" not in r.key or r.extra.get("instance") != "tiny_job"],
                        man.config, "picky")
    assert y.n == 2 and y.keep[1].successes == 0
    s1 = [t for t in (t for _, t in residue_findings(y)) if t.startswith("**") and "— S=1: raw_only leaves" in t]
    assert s1 and s1[0].startswith(f"**{Verdict.NOT_TESTABLE.value} (no instance's level-1 summary kept")
    # ... and so is each paper value at that level: residue 0 over all instances is the
    # summarizer's floor (the 1.5B at S=2: 0 of 74 kept gave "REPRODUCED" against the paper's 0.05)
    v1 = [t for _, t in residue_findings(y) if "— S=1:" in t and "over all instances matches" in t]
    assert len(v1) == 3 and all(t.startswith(f"**{Verdict.NOT_TESTABLE.value} (no instance's level-1") for t in v1)


def test_report_section_renders_without_the_canary(done: tuple[Path, ScriptedBackend], tmp_path: Path) -> None:
    out = done[0]
    p = render_report(out, tmp_path / "rep")
    text = p.read_text()
    assert "## Screen: did the summary keep the canary?" in text
    assert "| picky | 1 | 3 | 1 | 0.33 [0.01, 0.91] |" in text  # 1/3, Clopper–Pearson
    assert "| picky | 2 | 3 | 2 | 0.67 [0.09, 0.99] |" in text
    assert "## Supersede sensitivity of raw_plus_resummarize" in text
    assert "| picky | 1 | 1.01 | 1.00 [0.03, 1.00] | 0.33 [0.01, 0.91] | 1.00 [0.03, 1.00] | 1 of 1 |" in text
    assert (tmp_path / "rep" / "residue.csv").exists() and (tmp_path / "rep" / "numbers.json").exists()
    canaries = {r.extra["canary"] for r in read_rows(out)}
    for f in (tmp_path / "rep").iterdir():
        body = f.read_text()
        assert not any(c in body for c in canaries), f


def test_screen_prompt_is_the_frontier_studys_summary_prompt(done: tuple[Path, ScriptedBackend], tmp_path: Path) -> None:
    from traceless.studies.frontier import FrontierConfig

    be = ScriptedBackend(picky, name="picky")
    fc = FrontierConfig.model_validate({"data": str(FIXTURE), "n": 3, "S": [1, 2], "k": [6], "modes": ["noop"],
                                        "bootstrap": 10})
    run_study("frontier", tmp_path / "f", fc, backend=be, model_tag="picky", embedder=HashingEmbedder(),
              progress=False)
    sent = [[m.model_dump() for m in c] for c in be.calls]
    frontier_rows = {r.extra["instance"]: r.extra["canary"] for r in read_rows(tmp_path / "f")}
    for key, r in rows_by_key(done[0]).items():
        if "/screen/" in key:
            assert r.prompt in sent, key  # the same prompt the frontier study sent for that session
            assert frontier_rows[r.extra["instance"]] == r.extra["canary"]  # the same canary


class _OpenAIServer:
    """A loopback server speaking the OpenAI chat API that answers like ``picky``."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import ThreadingHTTPServer

        class Handler(JsonHandler):

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path == "/v1/models":
                    self._send({"object": "list", "data": [{"id": "picky", "object": "model", "owned_by": "test"}]})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                msgs = [ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
                text = picky(msgs, GenerationConfig())
                self._send({"model": "picky", "choices": [{"message": {"role": "assistant", "content": text},
                                                           "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 5}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_runs_unchanged_against_an_openai_compatible_endpoint(done: tuple[Path, ScriptedBackend],
                                                               tmp_path: Path) -> None:
    srv = _OpenAIServer()
    try:
        s = run_study("frontier-residue", tmp_path / "o", cfg(), model=f"openai:picky@{srv.url}",
                      embedder=HashingEmbedder(), progress=False)
    finally:
        srv.close()
    assert s.finished
    a, b = rows_by_key(tmp_path / "o"), rows_by_key(done[0])
    assert a.keys() == b.keys()
    assert all(a[k].metrics == b[k].metrics for k in a)

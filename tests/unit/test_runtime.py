"""Runtime logic on the toy KV backend: transitions, provenance, checkpoints, operators, receipts."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from traceless.errors import ReplayError
from traceless.forget import verify_signature
from traceless.models import ChatMessage, GenerationConfig
from traceless.runtime import (
    FORGET_OPERATORS,
    AgentRuntime,
    ForgetOperator,
    ForgetRequest,
    Observation,
    RuntimeConfig,
    ToolEnv,
    ToolSpec,
    ToyKVBackend,
    forget_state,
    injection_step,
)

BRAND = "Aerolux"
SPAN = f"I only ever fly with {BRAND}."


def reply_fn(msgs: list[ChatMessage], cfg: GenerationConfig, rng: np.random.Generator) -> str:
    text = " ".join(m.content for m in msgs)
    last = msgs[-1].content if msgs else ""
    noise = f" n{int(rng.integers(0, 1000))}" if cfg.temperature > 0 else ""
    if last.startswith("Summarize"):
        return ("user likes " + BRAND) if BRAND in text else "user plans a trip"
    if "book" in last.lower():
        airline = BRAND if BRAND in text else "SkyJet"
        return f"Booking now: book_flight({airline}){noise}"
    if "token" in last.lower() or "forget" in last.lower():
        return ("You told me " + BRAND) if BRAND in text else "I do not know"
    return f"noted step {len(msgs)}{noise}"


def flights() -> ToolEnv:
    def book(state: dict[str, list[str]], args: str) -> str:
        state.setdefault("bookings", []).append(args)
        return f"booked {args}"

    def weather(state: dict[str, list[str]], args: str) -> str:
        return "sunny"

    return ToolEnv.of([ToolSpec("book_flight", True, "book a flight", book),
                       ToolSpec("weather", False, "weather", weather)], {})


def episode(tau: int = 3, n: int = 6) -> list[Observation]:
    obs = []
    for t in range(1, n + 1):
        text = f"turn {t} about Paris."
        if t == tau:
            text += " " + SPAN
        if t == n:
            text = "Please book my flight to Paris."
        obs.append(Observation(obs_id=f"o{t}", text=text, session=0 if t <= n // 2 else 1, remember=t == tau))
    return obs


REQ = ForgetRequest(span=SPAN, secret=BRAND, description="my preferred airline", kind="preference")


def run(seed: int = 0, temperature: float = 0.0, checkpoints: str = "every_turn", tau: int = 3, n: int = 6,
        backend: ToyKVBackend | None = None) -> tuple[AgentRuntime, object]:
    be = backend or ToyKVBackend(reply_fn)
    cfg = RuntimeConfig(generation=GenerationConfig(max_new_tokens=16, temperature=temperature), seed=seed,
                        checkpoints=checkpoints)  # type: ignore[arg-type]
    rt = AgentRuntime(be, cfg)
    st = rt.run("ep", "You are an assistant.", episode(tau, n), flights())
    return rt, st


@contextlib.contextmanager
def temp_operator(op: ForgetOperator) -> Iterator[None]:
    """Register a test-only operator for the duration of a block."""
    FORGET_OPERATORS.register(op.name, help="test")(op)
    try:
        yield
    finally:
        del FORGET_OPERATORS._entries[op.name]


def test_run_records_steps_checkpoints_and_provenance() -> None:
    rt, st = run()
    assert st.step == 6 and len(st.trajectory.steps) == 6
    assert [c.step for c in st.trajectory.checkpoints] == list(range(7))
    assert all(c.nbytes() < 4400 for c in st.trajectory.checkpoints)
    assert injection_step(st.trajectory.observations, SPAN) == 3
    closure = st.graph.taint_closure({"obs:o3"})
    assert {"reply:3", "reply:4", "summary:3", "mem:3", "kv:obs:o3", "kv:reply:6"} <= closure
    assert "reply:2" not in closure and "mem:3" in st.artifacts
    # the final booking used the revoked preference and was committed once
    assert [c.args for c in st.env.committed] == [BRAND]


def test_session_start_checkpoints_are_sparse() -> None:
    _, st = run(checkpoints="session_start")
    assert [c.step for c in st.trajectory.checkpoints] == [0, 3]


@pytest.mark.parametrize("checkpoints", ["every_turn", "session_start"])
@pytest.mark.parametrize("tau", [1, 3, 5])
def test_b7_equals_b5_and_attains_bound(checkpoints: str, tau: int) -> None:
    rt, st = run(checkpoints=checkpoints, tau=tau)
    b5 = forget_state(rt, st, REQ, "B5")
    b5p = forget_state(rt, st, REQ, "B5p")
    b7 = forget_state(rt, st, REQ, "B7")
    assert b7.state.token_ids() == b5.state.token_ids() == b5p.state.token_ids()
    assert [s.reply_token_ids for s in b7.state.trajectory.steps] == [s.reply_token_ids for s in b5.state.trajectory.steps]
    assert b7.transitions == 6 - tau + 1
    assert b5.transitions == 6 and b5p.transitions == 6
    if tau > 1:
        assert b5p.cost.tokens < b5.cost.tokens and b7.cost.tokens < b5.cost.tokens
        if checkpoints == "every_turn":
            assert b7.cost.tokens < b5p.cost.tokens
        else:  # a coarse checkpoint re-prefills the clean steps since the session start
            assert b7.cost.prefill_tokens > forget_state(*run(tau=tau), REQ, "B7").cost.prefill_tokens
    assert b7.receipt.verification.passed and b7.receipt.verification.closure_clean
    assert all(r.target_copies_after == 0 for r in b7.receipt.tiers.values())
    # replay never repeats the committed side effect; the counterfactual booking stays a shadow call
    assert [c.args for c in b7.state.env.committed] == [BRAND]
    assert {c.status for c in b7.state.env.shadow_log} == {"shadow"}
    assert b7.state.shadow_state["bookings"] == ["SkyJet"]


def test_matched_seeds_temperature_equivalence() -> None:
    rt, st = run(seed=11, temperature=0.7)
    b5 = forget_state(rt, st, REQ, "B5")
    b7 = forget_state(rt, st, REQ, "B7")
    assert b5.state.token_ids() == b7.state.token_ids()
    rt2, st2 = run(seed=12, temperature=0.7)
    assert forget_state(rt2, st2, REQ, "B5").state.token_ids() != b5.state.token_ids()


def test_restore_crop_scrubs_old_storage() -> None:
    rt, st = run()
    old = [(k, v) for k, v in st.kv.layers]
    length = st.kv.length
    ck = rt.latest_checkpoint(st, 2)
    rt.restore(st, ck)
    assert st.kv.length == ck.kv_length < length
    for (k_old, v_old), (k, v) in zip(old, st.kv.layers, strict=True):
        assert k.shape[2] == ck.kv_length and v.shape[2] == ck.kv_length
        assert torch.count_nonzero(k_old) == 0 and torch.count_nonzero(v_old) == 0
        assert k.untyped_storage().data_ptr() != k_old.untyped_storage().data_ptr()


def test_baselines_behave_as_the_paper_says() -> None:
    rt, st = run()
    out = {name: forget_state(rt, st, REQ, name) for name in FORGET_OPERATORS.names()}
    final = {n: o.state.trajectory.steps[-1].reply for n, o in out.items() if o.state.trajectory.steps}
    # B1 removes the memory record only: the context still books the revoked airline
    assert "mem:3" not in out["B1"].state.artifacts and out["B1"].receipt.tiers["memory"].removed == ["mem:3"]
    assert out["B1"].state.token_ids() == st.token_ids()
    # B3 redacts the source, but derived summaries/replies keep the preference
    assert out["B3"].receipt.tiers["summary"].target_copies_after > 0
    # B6 redacts the span everywhere, yet the brand survives in derived text; B6b removes it too
    assert out["B6"].receipt.tiers["summary"].target_copies_after > 0
    assert all(r.target_copies_after == 0 for r in out["B6b"].receipt.tiers.values())
    # B4 drops every descendant: no copies, but the post-target replies are gone
    assert all(r.target_copies_after == 0 for r in out["B4"].receipt.tiers.values())
    assert not any(a.startswith("reply:") and int(a.split(":")[1]) >= 3 for a in out["B4"].state.artifacts)
    # B8 changes no state; B9 = B7 state + sink policy
    assert out["B8"].state.token_ids() == st.token_ids() and out["B8"].state.sink_block
    assert out["B9"].state.token_ids() == out["B7"].state.token_ids()
    assert BRAND not in final["B7"] and BRAND in final["B0"]
    # excision removes the span's cache entries only
    assert out["kv_excision"].state.kv.length < st.kv.length
    ex = out["kv_excision"].state
    seg = ex.artifacts["obs:o3"]
    kept = rt.backend.decode_tokens(ex.token_ids()[seg.kv_start:seg.kv_end])
    assert SPAN.split()[0] in rt.backend.decode_tokens(st.token_ids())
    assert " ".join(SPAN.split()) not in kept and out["kv_excision"].receipt.tiers["kv"].rewritten == ["kv:obs:o3"]
    # the memory recall at the next session start copied the span: excising the source span leaves it
    assert SPAN in rt.backend.decode_tokens(ex.token_ids()[ex.artifacts["recall:4"].kv_start:])
    assert out["kv_excision"].receipt.tiers["summary"].target_copies_after > 0


def test_ifc_blocks_tool_sink() -> None:
    rt, st = run(n=6)
    b8 = forget_state(rt, st, REQ, "B8")
    rt.step(b8.state, Observation(obs_id="x", text="Please book another flight."))
    assert b8.state.trajectory.steps[-1].tool_calls[0].status == "blocked"


def test_unmatched_target_replays_nothing() -> None:
    rt, st = run()
    req = ForgetRequest(span="never said this", secret="zzz", description="nothing")
    out = forget_state(rt, st, req, "B7")
    assert not out.receipt.matched and out.tau is None and out.cost.tokens == 0
    assert out.state.token_ids() == st.token_ids()
    assert "nothing was changed" in " ".join(out.receipt.notes)


def test_receipt_signed_without_secret() -> None:
    rt, st = run()
    out = forget_state(rt, st, REQ, "B7")
    assert verify_signature(out.receipt)
    raw = out.receipt.model_dump_json()
    assert BRAND not in raw and SPAN not in raw
    assert json.loads(raw)["mode"] == "runtime:B7"


def test_other_model_or_code_version_is_refused() -> None:
    rt, st = run()
    other = AgentRuntime(ToyKVBackend(reply_fn, name="other-model"))
    with pytest.raises(ReplayError, match="computed by model"):
        forget_state(other, st, REQ, "B7")
    ck = st.trajectory.checkpoints[2].model_copy(update={"code_version": "0.0.1+gdeadbeef"})
    with pytest.raises(ReplayError, match="recorded by traceless 0.0.1"):
        rt.restore(st, ck)
    foreign = st.trajectory.checkpoints[2].model_copy(update={"kv_digest": "0" * 64})
    with pytest.raises(ReplayError, match="another trajectory"):
        rt.restore(st, foreign)


def test_unknown_operator() -> None:
    from traceless.errors import UnknownNameError

    rt, st = run()
    with pytest.raises(UnknownNameError, match="B7"):
        forget_state(rt, st, REQ, "B77")


def test_recomputed_descendant_is_not_a_survivor_even_when_ids_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython reuses ``id()`` of freed objects, so a recomputed artifact can get the id of the one it
    replaced. Force that collision for every object: the receipt must still see the recomputation."""
    from traceless.runtime import _operators

    monkeypatch.setattr(_operators, "id", lambda obj: 0, raising=False)
    rt, st = run(tau=3)
    b7 = forget_state(rt, st, REQ, "B7")
    # replies after τ are recomputed with the same text as before ("noted step N"): only a real
    # identity (the artifact version) tells them apart from survivors
    assert st.artifacts["reply:4"].text == b7.state.artifacts["reply:4"].text
    assert b7.receipt.verification.surviving_descendants == []
    assert b7.receipt.verification.closure_clean and b7.receipt.verification.passed


def test_untouched_descendant_is_a_survivor() -> None:
    """The survivor check can fail: B0 keeps every descendant, so its closure is not clean."""
    from traceless.runtime import _operators

    rt, st = run(tau=3)
    op = _operators.FORGET_OPERATORS.get("B0")
    with temp_operator(_operators.ForgetOperator("B0r", "test", op.fn, op.claims, True)):
        out = forget_state(rt, st, REQ, "B0r")
    assert "reply:4" in out.receipt.verification.surviving_descendants
    assert not out.receipt.verification.closure_clean and not out.receipt.verification.passed


def memory_agent(msgs: list[ChatMessage], cfg: GenerationConfig, rng: np.random.Generator) -> str:
    """An agent that knows only what its memory recalls bring into the context."""
    recalled = " ".join(m.content for m in msgs if m.content.startswith("[memory]"))
    last = msgs[-1].content if msgs else ""
    if "airline" in last.lower():
        return f"You fly with {BRAND}" if BRAND in recalled else "I do not know"
    return "ok"


def test_memory_written_in_one_session_is_recalled_into_later_sessions() -> None:
    rt, st = run(tau=2, backend=ToyKVBackend(memory_agent))  # target in session 0 (steps 1-3)
    recall = st.artifacts["recall:4"]
    assert recall.sources == ["mem:2"] and SPAN in recall.text and "recall:4" in st.msg_art
    assert "recall:4" in st.graph.taint_closure({"obs:o2"})
    off = AgentRuntime(ToyKVBackend(memory_agent), RuntimeConfig(recall="off"))
    st_off = off.run("ep", "You are an assistant.", episode(2, 6), flights())
    assert not any(a.startswith("recall:") for a in st_off.artifacts)


@pytest.mark.parametrize(("tau", "b1_leaks"), [(5, False), (2, True)])
def test_b1_differs_from_b0_when_memory_propagates(tau: int, b1_leaks: bool) -> None:
    """B1 is a real test: deleting the record changes what a later session recalls. When the target
    came in the last session (τ=5), only the recall carries it and B1 stops the leak; when an earlier
    session's recall already copied it into the context (τ=2), deletion does not propagate."""
    rt, st = run(tau=tau, backend=ToyKVBackend(memory_agent))
    q = "Which airline do I prefer?"
    outs = {op: forget_state(rt, st, REQ, op) for op in ("B0", "B1", "B5")}
    said = {op: rt.ask(o.state, q, recall=True).text for op, o in outs.items()}
    assert BRAND in said["B0"] and BRAND not in said["B5"]
    assert (BRAND in said["B1"]) is b1_leaks
    assert outs["B1"].receipt.tiers["memory"].removed == [f"mem:{tau}"]


def test_bound_check_counts_what_the_backend_ran() -> None:
    rt, st = run(tau=3)
    b7 = forget_state(rt, st, REQ, "B7")
    # steps 3..6 replayed: 4 replies + the summaries of the two sessions that end at or after τ
    assert b7.decode_bound == 4 + 2 and b7.executed.decode_calls == 6 and b7.executed.native
    assert b7.bound_met is True
    assert forget_state(rt, st, REQ, "B5").bound_met is False  # a full reset runs more than the bound


def test_bound_check_fails_for_an_operator_that_undercounts() -> None:
    """An operator that recomputes everything but reports only T−τ+1 transitions passes a check on
    its own count; the backend's count exposes it."""
    from traceless.runtime import _operators

    def lying(ctx: _operators.OpContext) -> object:
        new = _operators.full_reset(ctx)
        new.cost.transitions = len(ctx.sanitized) - ctx.tau + 1
        return new

    rt, st = run(tau=4)
    with temp_operator(ForgetOperator("B7lie", "test", lying, ("kv",), True)):  # type: ignore[arg-type]
        out = forget_state(rt, st, REQ, "B7lie")
    assert out.transitions == 6 - 4 + 1  # the self-report matches the bound
    assert out.executed.decode_calls == 6 + 2 and out.bound_met is False


class RetryingBackend(ToyKVBackend):
    """A backend that silently decodes every reply twice (a discarded first attempt)."""

    def decode(self, state, config=None):  # type: ignore[no-untyped-def]
        super().decode(self.fork(state), config)
        return super().decode(state, config)


def test_bound_check_fails_when_the_backend_runs_more_than_the_bound() -> None:
    rt, st = run(tau=3, backend=RetryingBackend(reply_fn))
    b7 = forget_state(rt, st, REQ, "B7")
    assert b7.transitions == 4  # the operator's view is unchanged
    assert b7.executed.decode_calls == 12 and b7.bound_met is False


def test_attribution_oracle_lowers_decode_cost_not_transitions() -> None:
    from traceless.runtime import independent_steps

    rt, st = run(tau=3)
    b5 = forget_state(rt, st, REQ, "B5")
    b7 = forget_state(rt, st, REQ, "B7")
    oracle = independent_steps(st.trajectory, b5.state.trajectory, 3)
    assert oracle == [4, 5]  # "noted step N" replies do not depend on the airline; 3 and 6 do
    zero = forget_state(rt, st, REQ, "B7o")
    full = forget_state(rt, st, REQ, "B7o", independent=oracle)
    assert zero.state.token_ids() == full.state.token_ids() == b5.state.token_ids()
    assert zero.cost.tokens == b7.cost.tokens  # B7o coincides with B7 at zero independence
    assert full.transitions == zero.transitions == 4
    assert full.executed.decode_calls == zero.executed.decode_calls - 2 and full.bound_met
    assert full.cost.decode_tokens < zero.cost.decode_tokens


def test_a_wrong_attribution_oracle_breaks_exactness() -> None:
    rt, st = run(tau=3)
    b5 = forget_state(rt, st, REQ, "B5")
    wrong = forget_state(rt, st, REQ, "B7o", independent=[6])  # step 6 booked the revoked airline
    assert wrong.state.token_ids() != b5.state.token_ids()
    assert BRAND in wrong.state.trajectory.steps[-1].reply

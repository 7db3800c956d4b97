"""Execution-state unlearning (paper 002): the agent runtime as a deterministic transition
system with provenance, sparse checkpoints and KV-cache cropping, and forget operators B0–B9.

Typical use::

    rt = AgentRuntime(backend, RuntimeConfig(seed=7))
    st = rt.run("ep1", system, observations, env)
    out = forget_state(rt, st, ForgetRequest(span=..., secret=..., description=...), "B7")
    out.receipt, out.cost, out.state
"""

from traceless.runtime._meter import Executed, MeteredBackend
from traceless.runtime._operators import (
    FORGET_OPERATORS,
    ForgetOperator,
    ForgetOutcome,
    OpContext,
    clone_state,
    forget_instruction_text,
    forget_state,
    independent_steps,
    sanitize_observations,
    world_at,
)
from traceless.runtime._provenance import ProvenanceGraph, contains_target, decode_bound, injection_step
from traceless.runtime._runtime import (
    SUMMARY_PROMPT,
    AgentRuntime,
    RuntimeConfig,
    RuntimeState,
    render_observation,
)
from traceless.runtime._tools import ToolEnv, ToolSpec, call_id, parse_tool_calls
from traceless.runtime._toy import ToyKVBackend, ToyKVState
from traceless.runtime._types import (
    ARTIFACT_TIERS,
    Checkpoint,
    Cost,
    ForgetRequest,
    Observation,
    RArtifact,
    StepRecord,
    ToolCall,
    Trajectory,
    step_seed,
)

__all__ = [
    "ARTIFACT_TIERS",
    "AgentRuntime",
    "Checkpoint",
    "Cost",
    "Executed",
    "MeteredBackend",
    "FORGET_OPERATORS",
    "ForgetOperator",
    "ForgetOutcome",
    "ForgetRequest",
    "Observation",
    "OpContext",
    "ProvenanceGraph",
    "RArtifact",
    "RuntimeConfig",
    "RuntimeState",
    "SUMMARY_PROMPT",
    "StepRecord",
    "ToolCall",
    "ToolEnv",
    "ToolSpec",
    "ToyKVBackend",
    "ToyKVState",
    "Trajectory",
    "call_id",
    "clone_state",
    "contains_target",
    "decode_bound",
    "forget_instruction_text",
    "forget_state",
    "independent_steps",
    "injection_step",
    "parse_tool_calls",
    "render_observation",
    "sanitize_observations",
    "step_seed",
    "world_at",
]

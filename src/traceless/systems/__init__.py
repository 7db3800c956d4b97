"""Memory systems the audit can measure: the ``MemorySystem`` plug-in interface, its
registry ``MEMORY_SYSTEMS`` and the built-in adapters (``traceless``, ``mem0``,
``langgraph``, ``agno``, ``openai-agents``, ``llamaindex``, ``crewai``, ``adk``). Adapters of
other packages register through the entry-point group ``traceless.memory_systems``; see
docs/memory-systems.md.

What an adapter imports is this module's public names, in-tree or third-party alike:
``MemorySystem`` and ``@memory_system``, ``SystemConfig`` / ``SystemRuntime`` /
``ContextItem`` / ``DeletionTarget`` / ``AgentAnswer``, the scan and erasure types (``ScanReport``, ``ScanHit``,
``ErasurePlan``, ``PlannedAction``, ``StoreOutcome``, ...), ``MissingPackageError``, and for a
live instance kept in one SQLite file ``SqliteInstance`` with the helpers of
``traceless.systems.sqlite``. The built-in adapters are default plug-ins (``DEFAULT_SYSTEMS``):
the registry imports them on first use, just before the entry points, so importing this
package imports no adapter (and none of mem0, LangGraph, ...; those are imported when a
system is opened). The memory views an audit probes (``VIEWS``: what the agent sees of a
memory, ``view_config``, ``probe_view``) and the scan/erase verbs are defined here too; every
name below the adapter surface is imported on first use (``traceless._lazy``).
"""

from typing import TYPE_CHECKING

from traceless._lazy import lazy_exports as _lazy_exports
from traceless.systems._base import (
    DEFAULT_SYSTEMS,
    ENTRY_POINT_GROUP,
    MEMORY_SYSTEMS,
    SERVING_CACHE,
    AgentAnswer,
    ContextItem,
    DeletionTarget,
    FileVectors,
    MemorySystem,
    MissingPackageError,
    PluginWarning,
    SystemConfig,
    SystemRuntime,
    SystemSpec,
    SystemStatus,
    load_entry_points,
    load_system_config,
    memory_system,
    open_system,
    resolve_system,
    system_class,
    system_status,
)
from traceless.systems._erase import (
    CLAIM_LEVELS,
    ClaimLevel,
    ErasurePlan,
    FileHit,
    PlannedAction,
    ScanHit,
    ScanReport,
    StoreOutcome,
)
from traceless.systems._exit import finalization_unsafe, unsafe_at_finalization
from traceless.systems._scope import NO_OWNER
from traceless.systems._sqlite_live import SqliteInstance
from traceless.systems.contract import Capability, LiveInstance, Op, OthersPolicy, Record, Remove, Rewrite

if TYPE_CHECKING:
    from traceless.systems._adk import AdkConfig, AdkSystem
    from traceless.systems._agno import AgnoConfig, AgnoSystem
    from traceless.systems._bystanders import BystanderCheck, bystander_cell, bystander_check, erasure_claims
    from traceless.systems._crewai import CrewAIConfig, CrewAISystem
    from traceless.systems._erase_run import erase_system, plan_system_erasure, scan_system
    from traceless.systems._langgraph import LangGraphConfig, LangGraphSystem
    from traceless.systems._literals import Match
    from traceless.systems._llamaindex import LlamaIndexConfig, LlamaIndexSystem
    from traceless.systems._mem0 import Mem0Config, Mem0System
    from traceless.systems._mem0_chroma import chroma_file_vectors, chroma_log_vectors
    from traceless.systems._native import NativeConfig, NativeSystem
    from traceless.systems._openai_agents import OpenAIAgentsConfig, OpenAIAgentsSystem
    from traceless.systems._recheck import RecheckResult, check_recheck_target, recheck_system
    from traceless.systems._views import VIEWS, probe_view, view_config

__all__ = [
    "AdkConfig",
    "AdkSystem",
    "AgnoConfig",
    "AgnoSystem",
    "AgentAnswer",
    "BystanderCheck",
    "bystander_cell",
    "bystander_check",
    "erasure_claims",
    "CLAIM_LEVELS",
    "Capability",
    "LiveInstance",
    "Match",
    "Op",
    "OthersPolicy",
    "Record",
    "Remove",
    "Rewrite",
    "ClaimLevel",
    "CrewAIConfig",
    "CrewAISystem",
    "ErasurePlan",
    "NO_OWNER",
    "FileHit",
    "PlannedAction",
    "ScanHit",
    "ScanReport",
    "StoreOutcome",
    "erase_system",
    "finalization_unsafe",
    "unsafe_at_finalization",
    "plan_system_erasure",
    "scan_system",
    "RecheckResult",
    "chroma_file_vectors",
    "chroma_log_vectors",
    "check_recheck_target",
    "recheck_system",
    "DEFAULT_SYSTEMS",
    "ENTRY_POINT_GROUP",
    "MEMORY_SYSTEMS",
    "ContextItem",
    "DeletionTarget",
    "FileVectors",
    "LangGraphConfig",
    "LangGraphSystem",
    "LlamaIndexConfig",
    "LlamaIndexSystem",
    "Mem0Config",
    "Mem0System",
    "MemorySystem",
    "MissingPackageError",
    "SERVING_CACHE",
    "PluginWarning",
    "NativeConfig",
    "NativeSystem",
    "OpenAIAgentsConfig",
    "OpenAIAgentsSystem",
    "SqliteInstance",
    "SystemConfig",
    "SystemRuntime",
    "SystemSpec",
    "SystemStatus",
    "load_entry_points",
    "load_system_config",
    "memory_system",
    "open_system",
    "resolve_system",
    "system_class",
    "system_status",
    "VIEWS",
    "probe_view",
    "view_config",
]

EXPORTS: dict[str, tuple[str, ...]] = {
    "._adk": ("AdkConfig", "AdkSystem"),
    "._agno": ("AgnoConfig", "AgnoSystem"),
    "._bystanders": ("BystanderCheck", "bystander_cell", "bystander_check", "erasure_claims"),
    "._crewai": ("CrewAIConfig", "CrewAISystem"),
    "._erase_run": ("erase_system", "plan_system_erasure", "scan_system"),
    "._literals": ("Match",),
    "._langgraph": ("LangGraphConfig", "LangGraphSystem"),
    "._llamaindex": ("LlamaIndexConfig", "LlamaIndexSystem"),
    "._mem0": ("Mem0Config", "Mem0System"),
    "._mem0_chroma": ("chroma_file_vectors", "chroma_log_vectors"),
    "._native": ("NativeConfig", "NativeSystem"),
    "._openai_agents": ("OpenAIAgentsConfig", "OpenAIAgentsSystem"),
    "._recheck": ("RecheckResult", "check_recheck_target", "recheck_system"),
    "._views": ("VIEWS", "probe_view", "view_config"),
}
"""Which submodule defines each name imported on first use (the rest are imported above)."""

__getattr__, __dir__ = _lazy_exports(__name__, EXPORTS)

"""Memory systems the audit can measure: the ``MemorySystem`` plug-in interface, its
registry ``MEMORY_SYSTEMS`` and the built-in adapters (``traceless``, ``mem0``,
``langgraph``, ``agno``, ``openai-agents``, ``llamaindex``, ``crewai``, ``adk``). Adapters of other packages register through the entry-point group
``traceless.memory_systems``; see docs/memory-systems.md.

The third-party adapters import their packages only when opened, so listing the
systems works without them. The memory views an audit probes (``VIEWS``: what the agent
sees of a memory, ``view_config``, ``probe_view``) are defined here too.
"""

from traceless.systems._adk import AdkConfig, AdkSystem
from traceless.systems._agno import AgnoConfig, AgnoSystem
from traceless.systems._base import (
    ENTRY_POINT_GROUP,
    MEMORY_SYSTEMS,
    ContextItem,
    DeletionTarget,
    MemorySystem,
    MissingPackageError,
    PluginWarning,
    SystemConfig,
    SystemRuntime,
    SystemStatus,
    load_entry_points,
    load_system_config,
    memory_system,
    open_system,
    system_class,
    system_status,
)
from traceless.systems._bystanders import BystanderCheck, bystander_cell, bystander_check, erasure_claims
from traceless.systems._crewai import CrewAIConfig, CrewAISystem
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
from traceless.systems._erase_run import erase_system, plan_system_erasure, scan_system
from traceless.systems._langgraph import LangGraphConfig, LangGraphSystem
from traceless.systems._llamaindex import LlamaIndexConfig, LlamaIndexSystem
from traceless.systems._mem0 import Mem0Config, Mem0System
from traceless.systems._native import NativeConfig, NativeSystem
from traceless.systems._openai_agents import OpenAIAgentsConfig, OpenAIAgentsSystem
from traceless.systems._views import VIEWS, probe_view, view_config

__all__ = [
    "AdkConfig",
    "AdkSystem",
    "AgnoConfig",
    "AgnoSystem",
    "BystanderCheck",
    "bystander_cell",
    "bystander_check",
    "erasure_claims",
    "CLAIM_LEVELS",
    "ClaimLevel",
    "CrewAIConfig",
    "CrewAISystem",
    "ErasurePlan",
    "FileHit",
    "PlannedAction",
    "ScanHit",
    "ScanReport",
    "StoreOutcome",
    "erase_system",
    "plan_system_erasure",
    "scan_system",
    "ENTRY_POINT_GROUP",
    "MEMORY_SYSTEMS",
    "ContextItem",
    "DeletionTarget",
    "LangGraphConfig",
    "LangGraphSystem",
    "LlamaIndexConfig",
    "LlamaIndexSystem",
    "Mem0Config",
    "Mem0System",
    "MemorySystem",
    "MissingPackageError",
    "PluginWarning",
    "NativeConfig",
    "NativeSystem",
    "OpenAIAgentsConfig",
    "OpenAIAgentsSystem",
    "SystemConfig",
    "SystemRuntime",
    "SystemStatus",
    "load_entry_points",
    "load_system_config",
    "memory_system",
    "open_system",
    "system_class",
    "system_status",
    "VIEWS",
    "probe_view",
    "view_config",
]

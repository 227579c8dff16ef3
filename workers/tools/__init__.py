"""The tool layer of the agent runtime: declarations, registry, profiles, surfaces, the guard, the tools
and the batch executor. See README.md in this folder for the boundary and the invariants.
"""

from __future__ import annotations

# Importing the tool families fills the static registry; sealing validates it and makes it read-only.
from . import (  # noqa: F401
    blueprint_read,
    board_read,
    browser_tools,
    code_intel,
    cognitive,
    delegation,
    file_read,
    file_write,
    flow,
    git_checkpoint,
    search,
    shell,
    skill_use,
    subagent_tools,
)
from .authorization import (
    ApprovalStore,
    AuthDecision,
    Authorizer,
    AuthRequest,
    YoloLevel,
)
from .batch import (
    DEFAULT_MAX_PARALLEL,
    MAX_PARALLEL_CAP,
    ToolBatch,
    normalize_max_parallel,
    run_tool_batch,
)
from .context import (
    Asker,
    AskReply,
    AskRequest,
    BlueprintPort,
    Board,
    CheckpointPort,
    DelegationRecord,
    Delegator,
    EventEmitter,
    Heartbeat,
    SkillShelfPort,
    TextLLM,
    ToolContext,
)
from .delegation import custom_delegate_spec
from .errors import SurfaceError, ToolDeclarationError, ToolError
from .guard import SAFE_DEVICE_PATHS, SAFE_SYSTEM_TREES, WorkspaceGuard
from .invoke import ToolCall, invoke_tool
from .processes import ProcessRegistry
from .profiles import AGENTS, PROFILES, Profile
from .registry import REGISTRY, Registry
from .result import ToolResult, extract_result_paths, truncate_for_model
from .spec import (
    AuthPolicy,
    Effect,
    Executor,
    Frequency,
    Invocation,
    ResultPaths,
    ToolSpec,
    Truncation,
)
from .surface import LoadOutcome, Surface, build_surface, palette
from .validation import Problem, Rule, check_extra_specs, seal, validate

seal(REGISTRY)

__all__ = [
    "AGENTS",
    "DEFAULT_MAX_PARALLEL",
    "MAX_PARALLEL_CAP",
    "PROFILES",
    "REGISTRY",
    "SAFE_DEVICE_PATHS",
    "SAFE_SYSTEM_TREES",
    "ApprovalStore",
    "AskReply",
    "AskRequest",
    "Asker",
    "AuthDecision",
    "AuthPolicy",
    "AuthRequest",
    "Authorizer",
    "BlueprintPort",
    "Board",
    "CheckpointPort",
    "DelegationRecord",
    "Delegator",
    "Effect",
    "EventEmitter",
    "Executor",
    "Frequency",
    "Heartbeat",
    "Invocation",
    "LoadOutcome",
    "Problem",
    "ProcessRegistry",
    "Profile",
    "Registry",
    "ResultPaths",
    "Rule",
    "SkillShelfPort",
    "Surface",
    "SurfaceError",
    "TextLLM",
    "ToolBatch",
    "ToolCall",
    "ToolContext",
    "ToolDeclarationError",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Truncation",
    "WorkspaceGuard",
    "YoloLevel",
    "build_surface",
    "check_extra_specs",
    "custom_delegate_spec",
    "extract_result_paths",
    "invoke_tool",
    "normalize_max_parallel",
    "palette",
    "run_tool_batch",
    "seal",
    "truncate_for_model",
    "validate",
]

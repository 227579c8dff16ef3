"""yagent.workers.workflows — deterministic workflows: role nodes driven by a pure router over facts on disk.

Importing this package registers the `workflow` engine kind and the `node:` role kinds with `yagent.workers.kinds`.
"""

from .definition import FactError, Instruction, NoStep, OnNone, RoleSpec, WorkflowDefinition
from .engine import NODE_PREFIX, WORKFLOWS, node_kind

__all__ = ["NODE_PREFIX", "WORKFLOWS", "FactError", "Instruction", "NoStep", "OnNone", "RoleSpec",
           "WorkflowDefinition", "node_kind"]

"""Workflows as clients and workers both name them: the built-in ones, the submit option that starts one, and
where a workflow keeps its facts in a project (files people can read and edit; the engine reads them before
every decision)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILTIN_WORKFLOWS", "WORKFLOW_AGENT", "WORKFLOW_MODEL_ROLES", "WORKFLOW_OPTION", "workflow_dir",
           "workflow_title"]

BUILTIN_WORKFLOWS = ("fiction",)  # `yagent workflow run NAME`
# The names the built-in workflows' role nodes take their model under (`[agents.llm.<role>] use_provider`).
WORKFLOW_MODEL_ROLES = ("planner", "architect_long", "architect_short", "writer", "editor")
WORKFLOW_AGENT = "workflow"  # the agent kind of a workflow task's root run: the engine
WORKFLOW_OPTION = "workflow"  # the submit option naming the workflow to run


def workflow_dir(project_root: str | Path, name: str) -> Path:
    """The directory of `name`'s facts in a project."""
    return Path(project_root) / ".yagent" / "workflows" / name


def workflow_title(name: str) -> str:
    """The text a workflow's turns are submitted with (and so its task's title): how a run finds its task again."""
    return f"workflow {name}"

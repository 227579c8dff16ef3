"""`[git_checkpoint]`: git checkpoints of the project around every Coding sub-task, read by the config's one parser.

    [git_checkpoint]
    enabled = true                  # false: no checkpoints, no git_checkpoint_* tools, nothing for diff / undo
    retention = "30d"               # a checkpoint older than this loses its ref (git may then collect it); "0" = kept
    squash_on_exit = false          # at a turn's end, its sub-tasks' changes as one commit on an agent branch
    agent_branch_prefix = "yagent/" # that branch is refs/heads/<prefix><task>; never the branch you are on
    generate_commit_message = true  # the squash commit says the turn's request and the files (false: one fixed line)
    auto_merge_on_exit = false      # then fast-forward your branch to it (only when it is safe: see the README)
    cleanup_agent_branch = false    # and delete the agent branch once your branch has that commit

The seed's keys that would change your repository behind your back are accepted and answered with what yagent
does instead (`WARNED_KEYS`): checkpoints never stash, never tag. Booleans are judged by the key's existence (a
missing key is its default, `false` turns it off). The daemon acts on the table (`daemon/checkpoints.py`); a run
learns only whether its project has checkpoints (`RunSettings.git_checkpoints`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = ["DEFAULT_BRANCH_PREFIX", "DEFAULT_CHECKPOINT_RETENTION", "GIT_CHECKPOINT_KEYS", "WARNED_KEYS",
           "CheckpointSettings", "branch_prefix_problem", "parse_checkpoints"]

DEFAULT_CHECKPOINT_RETENTION = 30 * 86400.0
DEFAULT_BRANCH_PREFIX = "yagent/"
_SWITCHES = ("enabled", "squash_on_exit", "auto_merge_on_exit", "cleanup_agent_branch", "generate_commit_message")
# The seed's keys that would disturb the user's state: read, and answered with what is done instead.
WARNED_KEYS: Mapping[str, str] = {
    "stash_dirty_worktree": "yagent never stashes: a checkpoint records uncommitted and untracked work without "
                            "touching your worktree, index or stash; delete the key",
    "checkpoint_tag_prefix": "checkpoints are refs under refs/yagent/checkpoints/, never tags (so `git push --tags` "
                             "cannot carry them); the prefix is not used; delete the key",
    "cleanup_checkpoint_tags": "yagent makes no tags; old checkpoint refs go after [git_checkpoint] retention; "
                               "delete the key",
}
GIT_CHECKPOINT_KEYS = (*_SWITCHES, "agent_branch_prefix", "retention", *WARNED_KEYS)
_MAX_PREFIX = 100
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


@record
class CheckpointSettings(Record):
    """The resolved `[git_checkpoint]` table."""

    enabled: bool = True
    retention: float = DEFAULT_CHECKPOINT_RETENTION  # seconds; 0 = checkpoint refs are kept until removed by hand
    squash_on_exit: bool = False
    agent_branch_prefix: str = DEFAULT_BRANCH_PREFIX
    generate_commit_message: bool = True
    auto_merge_on_exit: bool = False
    cleanup_agent_branch: bool = False


def branch_prefix_problem(prefix: str) -> str:
    """Why `prefix` + a task id would not be a branch name git takes ("" when it would): git's own rules
    (`git check-ref-format`), checked here so that no such name ever reaches a git command."""
    if not prefix or len(prefix) > _MAX_PREFIX:
        return f"must be 1 to {_MAX_PREFIX} characters"
    if _BAD_REF_CHARS.search(prefix):
        return "must not hold spaces, control characters or any of ~ ^ : ? * [ \\"
    if ".." in prefix or "@{" in prefix or "//" in prefix or prefix.startswith(("/", "-", ".")) or prefix == "@":
        return "must not hold '..', '@{' or '//', nor start with '/', '-' or '.'"
    if any(part.startswith(".") or part.endswith(".lock") for part in prefix.split("/")[:-1]):
        return "must not have a part that starts with '.' or ends with '.lock'"
    return ""


def parse_checkpoints(table: Mapping[str, Any], parse_duration: Callable[[Any, str], float],
                      warnings: list[str]) -> CheckpointSettings:
    """The `[git_checkpoint]` table; ValueError saying what is wrong; the warned keys add to `warnings`."""
    section = table.get("git_checkpoint", {})
    if not isinstance(section, Mapping):
        raise ValueError("[git_checkpoint] must be a table")
    values: dict[str, Any] = {}
    for key in _SWITCHES:
        if key in section:
            if not isinstance(section[key], bool):
                raise ValueError(f"[git_checkpoint] {key} must be true or false, got {shown_value(section[key])}")
            values[key] = section[key]
    if "retention" in section:
        values["retention"] = parse_duration(section["retention"], "[git_checkpoint] retention")
    if "agent_branch_prefix" in section:
        prefix = section["agent_branch_prefix"]
        problem = branch_prefix_problem(prefix) if isinstance(prefix, str) else "must be text"
        if problem:
            raise ValueError(f"[git_checkpoint] agent_branch_prefix = {shown_value(prefix)} {problem} (the agent "
                             f'branch is <prefix><task>, e.g. "{DEFAULT_BRANCH_PREFIX}")')
        values["agent_branch_prefix"] = prefix
    for key, instead in WARNED_KEYS.items():
        if key in section:
            warnings.append(f"[git_checkpoint] {key} is not acted on: {instead}")
    return CheckpointSettings(**values)

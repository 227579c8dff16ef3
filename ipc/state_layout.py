"""Where a run's state lives under `$YAGENT_HOME`: the directories the daemon creates before a launch and
the worker's sandbox lets it write.

A Landlock rule grants rights to a whole tree that exists when the rule is made, so each piece of state a
worker writes is a directory of its own: one per task (its conversation and custom agents), one per run
(scratch), and one shared by every run (circuit breakers). The daemon creates them and never reads what is
inside (the formats belong to the workers). One more, the project approvals, workers only read: the daemon
writes it (`daemon/answered_approvals.py`), so that no run can approve anything for another.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AGENTS_FILE",
    "ARTIFACTS_DIR",
    "GRANTS_FILE",
    "MEMORY_FILE",
    "NOTES_DIR",
    "ROLLOUT_DIR",
    "THINKLINK_DIR",
    "approvals_dir",
    "approvals_file",
    "artifacts_dir",
    "blueprint_dir",
    "breaker_dir",
    "codeintel_dir",
    "notes_dir",
    "rollout_dir",
    "rollout_name",
    "scratch_dir",
    "task_dir",
    "tasks_dir",
    "thinklink_dir",
]

MEMORY_FILE = "memory.jsonl"  # the task's conversation
AGENTS_FILE = "agents.json"  # custom agents the Meta agent designed for the task
GRANTS_FILE = "grants.json"  # session approvals as runs kept them before the daemon did: read no more
ROLLOUT_DIR = "rollout"  # one JSONL file per run of the task: what a resume replays
NOTES_DIR = "notes"  # the task's hand-off board: notes/{agent}/{stem}.md (board scope = the task)
ARTIFACTS_DIR = "artifacts"  # deliverables too long for a parent's context: artifacts/{id}
THINKLINK_DIR = "thinklink"  # one append-only JSONL log per run: user inputs and thought/plan blocks


def tasks_dir(home: Path) -> Path:
    return home / "tasks"


def task_dir(home: Path, task: str) -> Path:
    return tasks_dir(home) / task


def notes_dir(home: Path, task: str) -> Path:
    """The task's board; inside the task's directory because that is all a worker of the task may write."""
    return task_dir(home, task) / NOTES_DIR


def artifacts_dir(home: Path, task: str) -> Path:
    return task_dir(home, task) / ARTIFACTS_DIR


def scratch_dir(home: Path, run: str) -> Path:
    return home / "scratch" / run


def approvals_dir(home: Path) -> Path:
    """Project-scope approvals of every project (one file): written by the daemon, read by workers."""
    return home / "approvals"


def approvals_file(home: Path) -> Path:
    return approvals_dir(home) / "settings.json"


def breaker_dir(home: Path) -> Path:
    """The circuit breakers' shared state, one file per provider."""
    return home / "breaker"


def rollout_dir(home: Path, task: str) -> Path:
    """Inside the task's directory: the only state a worker of the task may write."""
    return task_dir(home, task) / ROLLOUT_DIR


def thinklink_dir(home: Path, task: str) -> Path:
    """Inside the task's directory, like the rollouts: the thinklink log of each run, `{run}.jsonl`."""
    return task_dir(home, task) / THINKLINK_DIR


def blueprint_dir(home: Path, project: str) -> Path:
    """The persisted blueprint of one project (`project` is the registry's project id): `blueprint.md`,
    `revisions/`. Every run of the project reads it; a Repo run's worker alone writes it."""
    return home / "data" / "blueprint" / project


def codeintel_dir(home: Path, project: str) -> Path:
    """The code server's index of one project (`project` is the registry's project id): it writes nothing else."""
    return home / "data" / "codeintel" / project


def rollout_name(stamp: str, run: str, agent: str | None = None) -> str:
    """`{ts}_{run}.jsonl` for a root run, `{ts}_{run}_{agent}.jsonl` for a child (the suffix names the delegate).

    `:` of a custom agent kind (`custom:reviewer`) is not a safe file-name character everywhere; it becomes `-`.
    """
    suffix = f"_{agent.replace(':', '-').replace('/', '-')}" if agent else ""
    return f"{stamp}_{run}{suffix}.jsonl"

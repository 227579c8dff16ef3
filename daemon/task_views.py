"""What clients are shown of tasks, turns and runs: registry rows turned into wire records.

The registry stores; this module decides what a `yagent ps` line, a task's detail and a run's tree look
like on the wire, adding what only the live daemon knows (a run waiting for a model slot, the pending
questions, the newest seq in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from yagent.ipc.messages import Question, RunSummary, TaskSummary, TurnSummary

from .registry import RunRow, TaskRow, TurnRow

__all__ = ["run_summary", "task_summary", "turn_summary"]


def run_summary(row: RunRow, waiting: str = "") -> RunSummary:
    return RunSummary(run=row.id, agent=row.agent, status=row.status, parent=row.parent_run,
                      stop_reason=row.stop_reason, pid=row.pid, created_at=row.created_at,
                      started_at=row.started_at, ended_at=row.ended_at, waiting=waiting)


def turn_summary(row: TurnRow) -> TurnSummary:
    return TurnSummary(turn=row.turn, text=row.text, state=row.state, root_run=row.root_run,
                       created_at=row.created_at, ended_at=row.ended_at, output=row.output)


def task_summary(task: TaskRow, runs: list[RunRow], *, questions: list[Question],
                 waiting: Mapping[str, str], last_seq: Callable[[], int | None]) -> TaskSummary:
    """`waiting`: what a live run waits for, by run id; `last_seq`: the newest seq the hub holds in
    memory, or None (listing thousands of old tasks must not read their event logs)."""
    seq = last_seq()
    return TaskSummary(task=task.id, project=task.project_path, title=task.title, state=task.state,
                       created_at=task.created_at, updated_at=task.updated_at,
                       runs=[run_summary(r, waiting.get(r.id, "")) for r in runs], questions=questions,
                       last_seq=max(seq, task.last_seq) if seq is not None else task.last_seq)

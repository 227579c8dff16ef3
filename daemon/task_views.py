"""What clients are shown of tasks, turns and runs: registry rows turned into wire records.

The registry stores; this module decides what a `yagent ps` line, a task's detail and a run's tree look
like on the wire, adding what only the live daemon knows (a run waiting for a model slot, what it has used
so far and its process tree's CPU and memory, the pending questions, the newest seq in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yagent.ipc.messages import Question, RunSummary, TaskSummary, TurnSummary

from .registry import RunRow, TaskRow, TurnRow
from .run_accounting import ProcessSample, RunUsage

__all__ = ["LiveFigures", "run_summary", "task_summary", "turn_summary"]


@dataclass(slots=True)
class LiveFigures:
    """What the daemon knows of a live run beyond its registry row."""

    usage: RunUsage
    waiting: str = ""
    sample: ProcessSample | None = None
    cpu_percent: float | None = None
    unconfined: str = ""  # why the kernel does not confine the run ("" when it does)


def run_summary(row: RunRow, live: LiveFigures | None = None) -> RunSummary:
    summary = RunSummary(run=row.id, agent=row.agent, status=row.status, parent=row.parent_run,
                         stop_reason=row.stop_reason, pid=row.pid, created_at=row.created_at,
                         started_at=row.started_at, ended_at=row.ended_at)
    u = live.usage if live is not None else row.usage  # live figures until the run's end is recorded
    summary.requests, summary.input_tokens, summary.cached_input_tokens = (
        u.requests, u.input_tokens, u.cached_input_tokens)
    summary.output_tokens, summary.cost_usd, summary.cost_known = u.output_tokens, u.cost_usd, u.cost_known
    summary.slot_wait_seconds = u.slot_wait_seconds
    summary.unconfined = row.unconfined
    if live is not None:
        summary.waiting = live.waiting
        summary.unconfined = live.unconfined
        if live.sample is not None:
            summary.cpu_percent, summary.rss_bytes, summary.uss_bytes = (
                live.cpu_percent, live.sample.rss_bytes, live.sample.uss_bytes)
    return summary


def turn_summary(row: TurnRow) -> TurnSummary:
    return TurnSummary(turn=row.turn, text=row.text, state=row.state, root_run=row.root_run,
                       created_at=row.created_at, ended_at=row.ended_at, output=row.output)


def task_summary(task: TaskRow, runs: list[RunRow], *, questions: list[Question], live: Mapping[str, LiveFigures],
                 last_seq: Callable[[], int | None], cost_limit: float = 0.0) -> TaskSummary:
    """`live`: the figures of the task's live runs, by run id; `last_seq`: the newest seq the hub holds in
    memory, or None (listing thousands of old tasks must not read their event logs)."""
    seq = last_seq()
    summaries = [run_summary(r, live.get(r.id)) for r in runs]
    return TaskSummary(task=task.id, project=task.project_path, title=task.title, state=task.state,
                       created_at=task.created_at, updated_at=task.updated_at, runs=summaries, questions=questions,
                       last_seq=max(seq, task.last_seq) if seq is not None else task.last_seq,
                       requests=sum(r.requests for r in summaries), input_tokens=sum(r.input_tokens for r in summaries),
                       output_tokens=sum(r.output_tokens for r in summaries),
                       cost_usd=sum(r.cost_usd for r in summaries), cost_known=all(r.cost_known for r in summaries),
                       cost_limit=cost_limit)

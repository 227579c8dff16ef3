"""Resume inspection cost: what `yagent resume` pays per stopped task, measured in one run.

Baseline: the inspection's reading alone, in this process (`inspect_stopped_turn` over a Director turn stopped
with N interrupted delegations, each with a real child rollout). Against it: the whole round trip the daemon
makes (`resume_inspections.inspect_stopped_turns`: a forkserver start, the process confining itself, the report
back through its pipe), confined (Landlock) and unconfined, and four tasks inspected together.
Target: a confined round trip p50 under 100 ms, so a listing of 20 stopped tasks answers in well under a second.
Usage: python bench/resume_inspection.py [RUNS] [DELEGATIONS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from yagent.daemon.launcher import MultiprocessingLauncher
from yagent.daemon.main import PRELOAD
from yagent.daemon.registry import TaskRow, TurnRow
from yagent.daemon.resume_inspections import Inspection, inspect_stopped_turns
from yagent.ipc.config import Settings
from yagent.ipc.confinement import landlock_abi
from yagent.ipc.messages import ResumeInspectionReport, ResumeInspectionSpec
from yagent.ipc.state_layout import rollout_dir
from yagent.ipc.vocabulary import StopReason
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import ConversationMemory, memory_path
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.git_identity import GitIdentity
from yagent.workers.memory.rollout_checkpoint import CheckpointFacts, write_checkpoint
from yagent.workers.memory.rollout_writer import RolloutWriter
from yagent.workers.resume_inspection import inspect_stopped_turn


def _task(home: Path, project: Path, task: str, delegations: int) -> None:
    calls = tuple(ToolCall(f"c{i}", "delegate_repo", '{"task": "look"}') for i in range(delegations))
    memory = ConversationMemory(path=memory_path(home, task))
    memory.append(Message.user("look at everything"), Message.assistant("delegating", tool_calls=calls))
    memory.save()
    for i in range(delegations):
        writer = RolloutWriter(rollout_dir(home, task) / f"20260101-0000{i:02d}_run{i}_repo.jsonl")
        writer.enqueue(records.session_meta(run=f"run{i}", task=task, agent="repo", turn=1, parent_run="rootrun",
                                            delegation_id=f"c{i}", depth=1, project_root=str(project),
                                            git=GitIdentity()))
        for step in range(20):
            call = ToolCall(f"r{step}", "read_file", '{"path": "app.py"}')
            writer.enqueue(records.response_item(Message.assistant("reading", tool_calls=(call,)), step))
            writer.enqueue(records.response_item(Message.tool(f"r{step}", "print('hello')\n" * 200), step))
        write_checkpoint(writer, CheckpointFacts(step=20, model="m", tier="fast", git=GitIdentity(),
                                                 delegation_id=f"c{i}", stop_reason=StopReason.INTERRUPTED))
        writer.enqueue(records.stopped(StopReason.INTERRUPTED, 20))
        writer.close(10)


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    delegations = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    root = Path(tempfile.mkdtemp(prefix="yg-bench-"))
    home, project, runtime = root / "home", root / "project", root / "run"
    for d in (project, runtime):
        d.mkdir(parents=True)
    tasks = [f"t{i}" for i in range(4)]
    for task in tasks:
        _task(home, project, task, delegations)
    targets = [Inspection(TaskRow(id=t, project_id="p", project_path=str(project), title=t, state="interrupted",
                                  created_at=0, updated_at=0, last_seq=0),
                          TurnRow(task_id=t, turn=1, text=t, state="interrupted", root_run="rootrun", output="",
                                  created_at=0, ended_at=0, agent="director")) for t in tasks]
    spec = ResumeInspectionSpec(task="t0", home=str(home), project_root=str(project), stopped_run="rootrun",
                                agent="director", yolo="none")
    baseline = []
    for _ in range(runs):
        t0 = time.perf_counter()
        report = inspect_stopped_turn(spec)
        baseline.append(time.perf_counter() - t0)
    assert len(report.children) == delegations and all(c.step for c in report.children), report

    launcher = MultiprocessingLauncher(preload=PRELOAD)
    launcher.start()
    abi = landlock_abi()

    async def round_trips(abi: int, batch: list[Inspection]) -> list[float]:
        gate = asyncio.Semaphore(4)
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            got = await inspect_stopped_turns(launcher, Settings(), home=home, runtime_dir=runtime, abi=abi,
                                              targets=batch, gate=gate, deadline=30)
            samples.append(time.perf_counter() - t0)
            assert all(isinstance(r, ResumeInspectionReport) and not r.problem for r in got.values()), got
        return samples

    confined = asyncio.run(round_trips(abi, targets[:1])) if abi else []
    unconfined = asyncio.run(round_trips(0, targets[:1]))
    four = asyncio.run(round_trips(abi, targets))
    launcher.stop()
    base = _p50(baseline)
    print(f"reading alone, in process ({delegations} delegations): p50 {base:.2f} ms (baseline)")
    if confined:
        print(f"round trip, confined (Landlock ABI {abi}): p50 {_p50(confined):.1f} ms "
              f"({_p50(confined) / base:.1f}x the baseline)")
    print(f"round trip, unconfined: p50 {_p50(unconfined):.1f} ms ({_p50(unconfined) / base:.1f}x the baseline)")
    print(f"four tasks together{' (confined)' if abi else ''}: p50 {_p50(four):.1f} ms "
          f"({_p50(four) / base:.1f}x the baseline)")


if __name__ == "__main__":
    main()

"""What continuing a sub-agent costs, and what the fiction router costs on a long book.

1. A follow-up's start in its worker — its configuration signature (over the Repo agent's real surface), reading
   its newest run's rollout back with the replay reader, checking the signature recorded there, and building the
   conversation — against a fresh delegation given the same history in memory (the baseline, measured in the same
   run). The target: the follow-up's extra cost is reading the rollout plus at most 20 ms.
2. The fiction router on a book of 500 chapters (5 volumes of 10 arcs of 10 chapters, 437 written): loading the
   facts (impure: the files) and routing (pure), against the same on a book of 10 chapters.

Usage: python bench/subagent_followup.py [RUNS] [MESSAGES]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from yagent.ipc.messages import FOLLOWUP_OPTION, RunSpec
from yagent.ipc.state_layout import rollout_dir
from yagent.workers.agents.configuration_signature import (
    SubagentConfiguration,
    configuration_parts,
    configuration_signature,
    tool_entries,
)
from yagent.workers.agents.followup import FollowupStart, continue_subagent
from yagent.workers.kinds import RunContext
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory.git_identity import GitIdentity
from yagent.workers.memory.replay import load_for_replay
from yagent.workers.memory.rollout_records import response_item, session_meta, turn_context
from yagent.workers.memory.rollout_writer import RolloutWriter
from yagent.workers.tools import build_surface
from yagent.workers.workflows.fiction_facts import load_state, prepare
from yagent.workers.workflows.fiction_router import route


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _history(messages: int) -> list[Message]:
    history = [Message.user("Map the cache layer: where it lives, who fills it, who clears it.")]
    for i in range(messages // 2):
        call = ToolCall(id=f"c{i}", name="read_file", arguments=f'{{"path": "src/m{i}.py"}}')
        history.append(Message.assistant(f"<thought>\ngoal: map\nreason: step {i}\n</thought>\nReading m{i}.",
                                         tool_calls=(call,)))
        history.append(Message.tool(f"c{i}", "".join(f"{n:4d}  line {n} of module {i}\n" for n in range(80)),
                                    name="read_file"))
    return history


def _configuration(prompt: str) -> SubagentConfiguration:
    surface = build_surface("repo", delegated=True)
    return SubagentConfiguration(
        prompt=prompt, provider="bench", model="bench-model", reasoning_effort="",
        tools=tool_entries([s.definition() for s in surface.specs()], [s.name for s in surface.deferred()]),
        profile="repo", switches={"lang": "English", "yolo": "none"})


def followup(runs: int, messages: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="ygfu-", dir="/tmp"))
    home, task = root / "home", "tbench00001"
    system = Message.system("You are the yagent Repo agent. " + "Read the code and report. " * 200)
    config = _configuration(system.content)
    signature, parts = configuration_signature(config), configuration_parts(config)
    history = _history(messages)
    writer = RolloutWriter(rollout_dir(home, task) / "20260101T000000_rprev0000001_repo.jsonl")
    writer.enqueue(session_meta(run="rprev0000001", task=task, agent="repo", turn=1, parent_run="rroot",
                                delegation_id="c0", depth=1, project_root=str(root), git=GitIdentity()))
    context = turn_context(model="bench-model", tier="", cwd=str(root), yolo="none")
    context["payload"].update(signature=signature, configuration=parts)
    writer.enqueue(context)
    for message in [system, *history]:
        writer.enqueue(response_item(message, 1))
    writer.close(5.0)
    size = writer.path.stat().st_size
    spec = RunSpec(run="rnext", task=task, turn=2, project="p", project_root=str(root), agent="repo",
                   input="And who clears it?", home=str(home),
                   options={FOLLOWUP_OPTION: {"subagent": "abench", "run": "rprev0000001", "fresh_if_changed": False}})
    ctx = RunContext(spec, channel=None)  # type: ignore[arg-type]

    def fresh() -> object:  # a new delegation handed the same history: no disk, no check
        sig = configuration_signature(_configuration(system.content))
        return sig, [system, *history, Message.user(spec.input)]

    def resumed() -> object:
        sig = configuration_signature(_configuration(system.content))
        start = continue_subagent(ctx, sig, parts, system, spec.input)
        assert isinstance(start, FollowupStart) and len(start.messages) == len(history) + 2
        return start

    base = _median_ms(fresh, runs)
    follow = _median_ms(resumed, runs)
    read = _median_ms(lambda: load_for_replay(writer.path), runs)
    overhead = follow - base - read
    print(f"follow-up start, {len(history)} messages, rollout {size / 1024:.0f} KiB:")
    print(f"  fresh delegation, same history in memory (baseline)  p50={base:7.2f} ms")
    print(f"  follow-up (signature, rollout read, check, build)     p50={follow:7.2f} ms  ratio {follow / base:5.1f}")
    print(f"  of which reading the rollout back                    p50={read:7.2f} ms")
    print(f"  resume overhead beyond the read                           {overhead:7.2f} ms  (target ≤ 20 ms: "
          f"{'met' if overhead <= 20 else 'MISSED'})")


def _book(root: Path, volumes: int, arcs: int, chapters: int, written: int) -> Path:
    directory = root / "project" / ".yagent" / "workflows" / "fiction"
    prepare(directory)
    (directory / "planning.toml").write_text('tier = "long"\n')
    for name in ("premise.md", "characters.md", "world.md"):
        (directory / "foundation" / name).write_text(f"# {name}\n" + "Some facts.\n" * 50)
    plan, first = [], 1
    for v in range(1, volumes + 1):
        plan.append(f"[[volume]]\nnumber = {v}\n")
        for a in range(1, arcs + 1):
            plan.append(f"[[volume.arc]]\nnumber = {a}\nfirst = {first}\nlast = {first + chapters - 1}\n")
            if first + chapters - 1 <= written:
                for kind in ("reviews", "summaries"):
                    (directory / kind / f"arc-{v}-{a}.md").write_text("done\n")
            first += chapters
    (directory / "foundation" / "arcs.toml").write_text("\n".join(plan))
    done = ", ".join(str(n) for n in range(1, written + 1))
    (directory / "progress.toml").write_text(f'phase = "writing"\nflow = "writing"\ncompleted = [{done}]\n')
    return directory


def router(runs: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="ygwf-", dir="/tmp"))
    small = _book(root / "small", 1, 1, 10, 7)
    large = _book(root / "large", 5, 10, 10, 437)
    results = {}
    for label, directory in (("10 chapters (baseline)", small), ("500 chapters", large)):
        state = load_state(directory)
        load = _median_ms(lambda d=directory: load_state(d), runs)
        decide = _median_ms(lambda s=state: route(s), runs * 20)
        results[label] = (load, decide)
        print(f"fiction router, {label:<24} load p50={load:7.3f} ms  route p50={decide * 1000:7.2f} µs  "
              f"→ {route(state).agent if route(state) else None}")
    (bl, br), (ll, lr) = results.values()
    print(f"  500 chapters vs 10: load ratio {ll / bl:5.1f}, route ratio {lr / br:5.1f}")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    messages = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    followup(runs, messages)
    router(runs)


if __name__ == "__main__":
    main()

"""`kill -9` of a process in the middle of a real agent run leaves a rollout a resume can read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.agent_harness import MARKERS
from tests.daemon_harness import wait_until
from tests.fake_provider import FakeProvider, Step, ToolCallSpec
from yagent.workers.memory.replay import ReplayVerdict, assess_replay, load_for_replay
from yagent.workers.memory.rollout_reader import read_rollout
from yagent.workers.memory.rollout_records import RolloutRecord

# The run in its own process: the real loop, engine, tools and recorder against the fake provider.
RUNNER = r"""
import asyncio, json, sys
from pathlib import Path
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.vocabulary import StopReason
from yagent.workers.agents.loop import LoopConfig, LoopPolicy, run_agent_loop
from yagent.workers.llm import Message, build_engine
from yagent.workers.memory.rollout_recorder import open_recorder
from yagent.workers.tools import ToolContext, build_surface

home, root, table, marker = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
recorder, _ = open_recorder(home=home, task="t1", run="run-child", agent="devops", turn=1, parent_run="run-parent",
                            delegation_id="call_k", depth=1, project_root=root, yolo="none", model=lambda: "m",
                            tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.INTERRUPTED)
messages = [Message.system(marker + " (test)"), Message.user("do the thing")]
recorder.begin({"type": "turn_context", "ts": 0, "payload": {}}, messages)
config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": table}}}, "llm": {"max_retries": 0}}

async def boundary():
    pass

cfg = LoopConfig(agent="devops", engine=build_engine(parse_llm_config(config, {}), agent="devops"),
                 surface=build_surface("devops"), tool_ctx=ToolContext(project_root=root, run_id="r"),
                 messages=messages, max_steps=500, emit=lambda t, d: None, step_boundary=boundary,
                 policy=LoopPolicy(), recorder=recorder)
asyncio.run(run_agent_loop(cfg))
"""


def _items(path: Path) -> int:
    try:
        return sum(1 for rec in read_rollout(path).records if rec["type"] == RolloutRecord.RESPONSE_ITEM)
    except (OSError, ValueError):
        return 0


def test_kill_9_mid_run_leaves_a_readable_rollout_without_a_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    home = tmp_path / "home"
    with FakeProvider() as fake:
        # Many steps, each with a long reasoning and a tool call, so the kill lands while records stream out.
        fake.script("devops", MARKERS["devops"], [
            Step(reasoning="x" * 5000, tool_calls=[ToolCallSpec("list_dir", {"path": "."})]) for _ in range(400)])
        env = dict(os.environ)
        env.pop("YAGENT_RESUME", None)
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(home), str(root),
                                 json.dumps(fake.provider_table()), MARKERS["devops"]],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            directory = home / "tasks" / "t1" / "rollout"
            path = wait_until(lambda: next(iter(directory.glob("*_devops.jsonl")), None), 60, "the rollout file")
            wait_until(lambda: _items(path) >= 30 or proc.poll() is not None, 60, "thirty messages in the rollout")
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    replay = load_for_replay(path)  # never raises: at worst a torn last line, reported
    assert len(replay.messages) >= 30 and replay.checkpoint is None and replay.stop_reason is None
    assert replay.meta["delegation_id"] == "call_k"
    assert all(m.role != "tool" or m.tool_call_id for m in replay.messages)
    verdict = assess_replay(home / "tasks" / "t1", "call_k", project_root=root, max_steps=500)
    assert verdict.verdict == ReplayVerdict.NO_CHECKPOINT and not verdict.replayable

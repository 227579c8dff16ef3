"""A test-only agent kind that does, from inside a real confined worker, what a model talked into it would.

Its input is a JSON list of operations, each `[op, arg]`:

    ["write", path]    open(path, "w") and write one line        ["read", path]     read the file
    ["append", path]   open(path, "a")                           ["listdir", path]  list the directory
    ["mkdir", path]    os.mkdir                                  ["bash", command]  the real run_bash tool
    ["signal", pid]    os.kill(pid, 0)                           ["gc", ""]         objects frozen / tracked (JSON)

`<TASKDIR>` and `<SCRATCH>` in an argument stand for the run's own task state and scratch directories.

and it emits one `probe` event per operation: `{"i": index, "ok": bool, "errno": int, "out": text}` (`out`
and the exit code for `bash`). Loaded with `[daemon] agent_modules = ["tests.agents.scripted",
"tests.agents.sandbox_probe"]`, it also takes the place of the real `coding`, `repo`, `devops` and
`director` kinds, so a worker confined by those profiles runs it: the test is what the kernel allows a
worker of that kind, whatever its model or tools would try.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.state_layout import scratch_dir, task_dir
from yagent.ipc.vocabulary import RunStatus, StopReason, YoloLevel
from yagent.workers import kinds
from yagent.workers.kinds import RunContext, agent_kind
from yagent.workers.tools.context import ToolContext
from yagent.workers.tools.registry import REGISTRY
from yagent.workers.tools.spec import Invocation

PROBE_EVENT = "probe"
STOOD_IN_FOR = ("coding", "repo", "devops", "director")


@agent_kind("probe")
async def probe(ctx: RunContext) -> RunOutcome:
    ops = json.loads(ctx.spec.input)
    tools = ToolContext(project_root=ctx.project_root, run_id=ctx.spec.run, yolo=YoloLevel.FULL,
                        scratch_dir=scratch_dir(ctx.home, ctx.spec.run))
    own = {"<TASKDIR>": str(task_dir(ctx.home, ctx.spec.task)), "<SCRATCH>": str(tools.scratch_dir)}
    for i, (op, arg) in enumerate(ops):
        for key, value in own.items():
            arg = arg.replace(key, value) if isinstance(arg, str) else arg
        ctx.emit(PROBE_EVENT, {"i": i, **await _do(op, arg, tools)})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=f"{len(ops)} probes")


async def _do(op: str, arg: Any, tools: ToolContext) -> dict[str, Any]:
    try:
        if op == "bash":
            return await _bash(str(arg), tools)
        if op == "write":
            Path(arg).write_text("probe was here\n")
        elif op == "append":
            with open(arg, "a") as fh:
                fh.write("probe was here\n")
        elif op == "read":
            return {"ok": True, "errno": 0, "out": Path(arg).read_text()[:200]}
        elif op == "listdir":
            return {"ok": True, "errno": 0, "out": " ".join(sorted(os.listdir(arg))[:20])}
        elif op == "mkdir":
            os.mkdir(arg)
        elif op == "signal":
            os.kill(int(arg), 0)
        elif op == "gc":
            return {"ok": True, "errno": 0,
                    "out": json.dumps({"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())})}
        else:
            return {"ok": False, "errno": -1, "out": f"unknown op {op!r}"}
    except OSError as exc:
        return {"ok": False, "errno": exc.errno or 0, "out": str(exc)}
    return {"ok": True, "errno": 0, "out": ""}


async def _bash(command: str, tools: ToolContext) -> dict[str, Any]:
    spec = REGISTRY.get("run_bash")
    assert spec is not None and spec.executor is not None
    inv = Invocation(spec=spec, args={"command": command, "timeout": 30}, call_id="probe", ctx=tools,
                     paths={"cwd": tools.project_root})
    result = await spec.executor(inv)
    data = result.data or {}
    return {"ok": data.get("exit_code") == 0, "errno": 0, "exit": data.get("exit_code"), "out": result.content[-2000:]}


for _name in STOOD_IN_FOR:
    kinds._KINDS[_name] = probe  # a worker of that kind, confined by its profile, runs the probe instead

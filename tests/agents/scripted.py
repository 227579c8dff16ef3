"""A test-only agent kind that drives run lifecycles on command.

Its input is a JSON object `{"steps": [...], "output": "..."}`; each step is one command:

    {"emit": N, "type": "ai_chunk", "size": K}   emit N events (data {"i": i, "text": K chars})
    {"step": N}                                   pass N step boundaries (the pause gate), one event each
    {"sleep": S}                                  go silent for S seconds (a stuck run, as far as the watchdog knows)
    {"busy": S}                                   work for S seconds, heartbeating (progress without events)
    {"hang": S}                                   block the worker's event loop for S seconds (deaf to cancel)
    {"lease": S}                                  hold one in-flight LLM lease for S seconds
    {"lease_wait": S}                             ask for a lease but give up after S seconds; event "lease_gave_up"
    {"delegate": [{"agent": ..., "task": ...}, ...]}   delegate, all at once; outcomes go into the output
    {"ask": {"kind": ..., "prompt": ..., "options": [...], "default": ..., "details": {...}}}
                                                  ask the user; the answer goes into the output
    {"spawn": "shell command"}                    start a child process in its own session; event "spawned" {pid}
                                                  (with "keep": true the agent does not kill it when it ends)
    {"crash": "kill" | "exit" | "raise"}          die without a result
    {"mark": "name"}                              emit event "mark" {"name": ...}
    {"options": true}                             emit event "options" with the run's submit options
    {"event": {"type": T, "data": {...}}}         emit one event of any type with exactly this data
    {"chunks": ["a", "b"], "delay": S}            stream ai_chunk events {"text": ...} S seconds apart
    {"wrap_up": {"seconds": S, "file": P}}        wait to be stopped; then take S seconds (awaiting, as a memory
                                                  write does) and write file P — a second cancellation loses P
    {"mcp": {"server": S, "tool": T, "arguments": {...}, "times": N}}
                                                  wait for server S, call its tool N times through the daemon; the
                                                  seconds of each call and the last result go into the output

Loaded into workers through `[daemon] agent_modules = ["tests.agents.scripted"]`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import EventType, QuestionKind, RunStatus, StopReason
from yagent.workers.kinds import RunContext, agent_kind


@agent_kind("scripted")
async def scripted(ctx: RunContext) -> RunOutcome:
    try:
        script = json.loads(ctx.spec.input)
    except json.JSONDecodeError:
        script = {"steps": [], "output": f"echo: {ctx.spec.input}"}
    notes: list[Any] = []
    children: list[subprocess.Popen[bytes]] = []
    try:
        for step in script.get("steps", []):
            await _run_step(ctx, step, notes, children)
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
    output = script.get("output", "done")
    if notes:
        output = json.dumps({"output": output, "notes": notes})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=output)


async def _run_step(ctx: RunContext, step: dict[str, Any], notes: list[Any],
                    children: list[subprocess.Popen[bytes]]) -> None:
    if "emit" in step:
        text = "x" * int(step.get("size", 8))
        for i in range(int(step["emit"])):
            ctx.emit(step.get("type", EventType.AI_CHUNK), {"i": i, "text": text})
            if i % 256 == 255:
                await asyncio.sleep(0)  # let the channel flush, as a real agent would between chunks
    elif "step" in step:
        for i in range(int(step["step"])):
            await ctx.step_boundary()
            ctx.emit("step", {"i": i})
            await asyncio.sleep(0.01)
    elif "sleep" in step:
        await asyncio.sleep(float(step["sleep"]))
    elif "hang" in step:
        ctx.channel.flush()
        await asyncio.sleep(0.05)
        time.sleep(float(step["hang"]))
    elif "busy" in step:
        deadline = time.monotonic() + float(step["busy"])
        while time.monotonic() < deadline:
            ctx.heartbeat()
            await asyncio.sleep(0.05)
    elif "lease" in step:
        async with ctx.channel.hold():
            ctx.emit("lease_held", {})
            await asyncio.sleep(float(step["lease"]))
    elif "lease_wait" in step:
        try:
            async with asyncio.timeout(float(step["lease_wait"])):
                async with ctx.channel.hold():
                    ctx.emit("lease_held", {})
        except TimeoutError:
            ctx.emit("lease_gave_up", {})
    elif "delegate" in step:
        outcomes = await asyncio.gather(*(
            ctx.channel.run_child(
                d["agent"], d["task"] if isinstance(d["task"], str) else json.dumps(d["task"]),
                d.get("call_id", f"call_{i}"), "")
            for i, d in enumerate(step["delegate"])
        ))
        notes.append([{"agent": o.agent, "status": o.status, "stop_reason": o.stop_reason, "output": o.output,
                       "error": o.error} for o in outcomes])
    elif "ask" in step:
        q = step["ask"]
        answer = await ctx.ask_user(QuestionKind(q.get("kind", "input")), q.get("prompt", "?"),
                                    options=q.get("options"), default=q.get("default"), details=q.get("details"))
        notes.append({"answer": answer})
    elif "spawn" in step:
        child = subprocess.Popen(["/bin/sh", "-c", step["spawn"]], start_new_session=True)
        if not step.get("keep"):
            children.append(child)
        ctx.emit("spawned", {"pid": child.pid})
    elif "crash" in step:
        ctx.channel.flush()
        await asyncio.sleep(0.05)  # let the flushed events leave before dying
        how = step["crash"]
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif how == "exit":
            os._exit(13)
        raise RuntimeError("scripted crash")
    elif "event" in step:
        ctx.emit(step["event"]["type"], step["event"].get("data", {}))
    elif "chunks" in step:
        for text in step["chunks"]:
            ctx.emit(EventType.AI_CHUNK, {"text": text})
            await asyncio.sleep(float(step.get("delay", 0)))
    elif "mcp" in step:
        spec = step["mcp"]
        await ctx.channel.list_mcp_tools([spec["server"]])
        latencies, text = [], ""
        for _ in range(int(spec.get("times", 1))):
            began = time.perf_counter()
            text, _is_error = await ctx.channel.call_mcp(spec["server"], spec["tool"], spec.get("arguments", {}),
                                                         call_id="scripted")
            latencies.append(time.perf_counter() - began)
        notes.append({"mcp": {"latencies": latencies, "last": text}})
    elif "wrap_up" in step:
        spec = step["wrap_up"]
        ctx.emit("mark", {"name": "wrapping"})
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(float(spec.get("seconds", 0.5)))
            Path(spec["file"]).write_text("written on the way out")
            raise
    elif "options" in step:
        ctx.emit("options", dict(ctx.spec.options))
    elif "mark" in step:
        ctx.emit("mark", {"name": step["mark"]})

"""A test-only agent kind that plays a worker talked into asking the daemon for approved operations.

Its input is a JSON list of steps, each `[op, tool, args]`:

    ["ask", tool, args]          put an authorisation prompt for `args["path"]` to the user; remembers its id
    ["carry", tool, args]        ask the daemon to carry out `tool(args)` under the last prompt's id
    ["forge", tool, args]        the same under an id no prompt had
    ["write", "", {"path": p}]   write `p` itself (its own rules)

and emits one `probe` event per step: `{"i": index, "ok": bool, "out": text}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import AUTHORIZE_ANSWERS, QuestionKind, RunStatus, StopReason
from yagent.workers.kinds import RunContext, agent_kind

PROBE_EVENT = "probe"
FORGED_ID = 987654


@agent_kind("approval_probe")
async def approval_probe(ctx: RunContext) -> RunOutcome:
    last = 0
    for i, (op, tool, args) in enumerate(json.loads(ctx.spec.input)):
        result: dict[str, Any]
        if op == "ask":
            last, answer = await ctx.channel.ask_user_numbered(
                QuestionKind.AUTHORIZE, f"probe wants {tool} {args['path']}", options=list(AUTHORIZE_ANSWERS),
                default="once", details={"tool": tool, "summary": f"{tool} {args['path']}", "reasons": [],
                                         "outside_paths": [args["path"]], "dangerous": "",
                                         "project_root": str(ctx.project_root)})
            result = {"ok": True, "out": str(answer.get("value"))}
        elif op in ("carry", "forge"):
            try:
                done = await ctx.channel.carry_out_approved(last if op == "carry" else FORGED_ID, tool, args, "p")
                result = {"ok": not done.is_error, "out": done.content}
            except RemoteError as exc:
                result = {"ok": False, "out": f"{exc.code}: {exc}"}
        else:
            try:
                Path(args["path"]).write_text("the worker itself\n")
                result = {"ok": True, "out": ""}
            except OSError as exc:
                result = {"ok": False, "out": str(exc)}
        ctx.emit(PROBE_EVENT, {"i": i, **result})
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="probed")

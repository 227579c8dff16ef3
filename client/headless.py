"""Headless runs: `yagent run [--json] TEXT` and `yagent -p TEXT`.

One turn is submitted and followed to its end; events are printed as JSON lines (stable field names,
then a final `result` line with the whole answer) or as plain text, and the exit code says how the
turn ended (`exit_codes.for_outcome`). A question the run asks is printed with how to answer it from
any terminal, and the run waits for that answer. With `--yolo`, authorisation prompts for work inside
the project are approved here without asking (with `--full-yolo`, every authorisation prompt).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from yagent.ipc import DaemonClient, EventStream, IpcError, RemoteError
from yagent.ipc.messages import Ack, Answer, Event, Replay, ReplayReply, Submit, Submitted
from yagent.ipc.vocabulary import EventType, YoloLevel

from . import exit_codes
from .event_text import JsonLinesPrinter, TextPrinter, answer_hint

__all__ = ["auto_approves", "run_headless"]


def auto_approves(yolo: str, question: dict[str, Any]) -> bool:
    """Whether the yolo level answers this question without a person: authorisation prompts only,
    and with plain `--yolo` only those that stay inside the project (no `outside_paths`)."""
    if question.get("kind") != "authorize":
        return False
    if yolo == YoloLevel.FULL.value:
        return True
    details = question.get("details") if isinstance(question.get("details"), dict) else {}
    return yolo == YoloLevel.YOLO.value and not details.get("outside_paths")


async def _turn_start_seq(client: DaemonClient, task: str, turn: int) -> int:
    """The seq just before this turn's `turn_started` event (0 for a task's first turn)."""
    after = 0
    while True:
        page = await client.request(Replay(id=0, task=task, after_seq=after), ReplayReply)
        for item in page.events:
            ev = Event.from_published(task, item)
            if ev.type == EventType.TURN_STARTED and ev.data.get("turn") == turn:
                return ev.seq - 1
            after = ev.seq
        if not page.more or not page.events:
            return after


async def _follow_turn(client: DaemonClient, task: str, turn: int, *, as_json: bool, verbose: bool, yolo: str,
                       out: TextIO, err: TextIO) -> int:
    printer = JsonLinesPrinter(out) if as_json else TextPrinter(out, verbose=verbose)
    # Start at this turn: whatever the task emitted in earlier turns is history.
    async with EventStream(client, task, after_seq=await _turn_start_seq(client, task, turn)) as stream:
        async for ev in stream.events():
            if ev.type == EventType.TURN_STARTED and ev.data.get("turn") != turn:
                continue
            if ev.type == EventType.USER_HELP_NEEDED and auto_approves(yolo, ev.data):
                printer.handle(ev)
                rid = str(ev.data.get("request_id", ""))
                try:
                    await client.request(Answer(id=0, task=task, request_id=rid, answer={"value": "once"}), Ack)
                    print(f"yagent: approved without asking (--{'full-' if yolo == 'full' else ''}yolo): "
                          f"{ev.data.get('prompt', '')}", file=err)
                except RemoteError as exc:
                    print(f"yagent: could not approve {rid}: {exc}", file=err)
                continue
            printer.handle(ev)
            if ev.type == EventType.USER_HELP_NEEDED and as_json:
                # stdout stays machine-readable; the person watching learns where to answer.
                print(f"yagent: {ev.agent} asks: {ev.data.get('prompt', '')} — "
                      f"{answer_hint(task, str(ev.data.get('request_id', '')))}", file=err)
            if ev.type == EventType.TURN_FINISHED and ev.data.get("turn") == turn:
                return exit_codes.for_outcome(str(ev.data.get("status")))
    return exit_codes.FAILED


async def _run(project: Path, text: str, *, task: str | None, agent: str, yolo: str, detach: bool,
               as_json: bool, verbose: bool, out: TextIO, err: TextIO) -> int:
    async with DaemonClient() as client:
        sub = await client.request(Submit(id=0, project=str(project), text=text, task=task, agent=agent, yolo=yolo),
                                   Submitted)
        if detach:
            if as_json:
                print(json.dumps({"task": sub.task, "turn": sub.turn, "run": sub.run, "project": sub.project}),
                      file=out)
            else:
                print(f"task {sub.task} (turn {sub.turn}) submitted for {sub.project}", file=out)
                print(f"follow it with `yagent logs -f {sub.task}`, or attach with `yagent attach {sub.task}`",
                      file=out)
            return exit_codes.OK
        if not as_json:
            print(f"task {sub.task} · turn {sub.turn} · `yagent attach {sub.task}` watches it too", file=err)
        return await _follow_turn(client, sub.task, sub.turn, as_json=as_json, verbose=verbose, yolo=yolo,
                                  out=out, err=err)


def run_headless(project: Path, text: str, *, task: str | None = None, agent: str = "director",
                 yolo: str = "none", detach: bool = False, as_json: bool = False, verbose: bool = False,
                 out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        return asyncio.run(_run(project, text, task=task, agent=agent, yolo=yolo, detach=detach, as_json=as_json,
                                verbose=verbose, out=out, err=err))
    except RemoteError as exc:
        print(f"yagent: {exc}", file=err)
        return exit_codes.FAILED
    except IpcError as exc:
        print(f"yagent: lost the connection to yagentd: {exc}", file=err)
        return exit_codes.NOT_RUNNING
    except KeyboardInterrupt:
        print("yagent: interrupted; the task keeps running in the daemon (`yagent ps`)", file=err)
        return 130

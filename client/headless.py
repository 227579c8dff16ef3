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
from typing import TextIO

from yagent.ipc import DaemonClient, EventStream, IpcError, RemoteError, RuntimeDirError
from yagent.ipc.daemon_events import TurnFinished, TurnStarted
from yagent.ipc.messages import (
    Ack,
    Answer,
    Event,
    ListTasks,
    Question,
    Replay,
    ReplayReply,
    Submit,
    Submitted,
    TaskList,
)
from yagent.ipc.vocabulary import EventType, QuestionKind, RunStatus, YoloLevel

from . import exit_codes
from .event_text import JsonLinesPrinter, TextPrinter, answer_hint
from .liveness import FollowStopped, LivenessUnknown, run_while_daemon_lives
from .stamped import stamped_data

__all__ = ["auto_approves", "run_headless"]


def auto_approves(yolo: str, question: Question) -> bool:
    """Whether the yolo level answers this question without a person: authorisation prompts only,
    and with plain `--yolo` only those that stay inside the project (no `outside_paths`)."""
    if question.kind != QuestionKind.AUTHORIZE:
        return False
    if yolo == YoloLevel.FULL:
        return True
    return yolo == YoloLevel.YOLO and not question.details.get("outside_paths")


async def _turn_start_seq(client: DaemonClient, task: str, turn: int) -> int:
    """The seq just before this turn's `turn_started` event (0 for a task's first turn)."""
    after = 0
    while True:
        page = await client.request(Replay(id=0, task=task, after_seq=after), ReplayReply)
        for item in page.events:
            ev = Event.from_published(task, item)
            if ev.type == EventType.TURN_STARTED and stamped_data(ev, TurnStarted).turn == turn:
                return ev.seq - 1
            after = ev.seq
        if not page.more or not page.events:
            return after


def _same_terminal(out: TextIO, err: TextIO) -> bool:
    try:
        return out.isatty() and err.isatty()
    except (AttributeError, ValueError):
        return False


async def _follow_turn(client: DaemonClient, task: str, turn: int, *, printer: JsonLinesPrinter | TextPrinter,
                       as_json: bool, yolo: str, out: TextIO, err: TextIO) -> int:
    # Start at this turn: whatever the task emitted in earlier turns is history.
    async with EventStream(client, task, after_seq=await _turn_start_seq(client, task, turn)) as stream:
        async for ev in stream.events():
            if ev.type == EventType.TURN_STARTED and stamped_data(ev, TurnStarted).turn != turn:
                continue
            question = Question.read(ev.data) if ev.type == EventType.USER_HELP_NEEDED else None
            if question is not None and auto_approves(yolo, question):
                if as_json:
                    printer.handle(ev)  # the JSON stream stays complete; text would say "answer it" for nothing
                rid = question.request_id
                try:
                    await client.request(Answer(id=0, task=task, request_id=rid, answer={"value": "once"},
                                                          by="--yolo, without asking"), Ack)
                    print(f"yagent: approved without asking (--{'full-' if yolo == YoloLevel.FULL else ''}yolo): "
                          f"{question.prompt}", file=err)
                except RemoteError as exc:
                    print(f"yagent: could not approve {rid}: {exc}", file=err)
                continue
            printer.handle(ev)
            if question is not None and (as_json or not _same_terminal(out, err)):
                # stdout may be a pipe or a file; the person watching learns on stderr where to answer.
                print(f"yagent: {ev.agent} asks: {question.prompt} — "
                      f"{answer_hint(task, question.request_id, question.options)}", file=err, flush=True)
            if ev.type == EventType.TURN_FINISHED:
                finished = stamped_data(ev, TurnFinished)
                if finished.turn == turn:
                    return exit_codes.for_outcome(finished.status)
    return exit_codes.FAILED


class _Progress:
    """What the run knows so far, for the message when it is interrupted."""

    task: str | None = None


async def _run(project: Path, text: str, *, task: str | None, agent: str, yolo: str, detach: bool,
               as_json: bool, printer: JsonLinesPrinter | TextPrinter, progress: _Progress,
               out: TextIO, err: TextIO, latest: bool = False, env: dict[str, str] | None = None) -> int:
    async with DaemonClient() as client:
        if task is None and latest:  # `-c`: the project's latest session, or a new one when it has none
            tasks = await client.request(ListTasks(id=0, project=str(project), limit=1), TaskList)
            task = tasks.tasks[0].task if tasks.tasks else None
        sub = await client.request(Submit(id=0, project=str(project), text=text, task=task, agent=agent, yolo=yolo,
                                          env=env or {}), Submitted)
        progress.task = sub.task
        if sub.notice:  # a provider picked from the environment: said once, on stderr (stdout is the answer)
            print(f"yagent: {sub.notice}", file=err)
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
        follow = _follow_turn(client, sub.task, sub.turn, printer=printer, as_json=as_json, yolo=yolo,
                              out=out, err=err)
        return await run_while_daemon_lives(client, sub.task, follow)


def run_headless(project: Path, text: str, *, task: str | None = None, agent: str = "director",
                 yolo: str = YoloLevel.NONE, detach: bool = False, as_json: bool = False, verbose: bool = False,
                 out: TextIO | None = None, err: TextIO | None = None, latest: bool = False,
                 env: dict[str, str] | None = None) -> int:
    """Submit one turn and follow it to its end; the exit code says how it ended (`exit_codes`). With `latest`
    and no `task`, the turn goes to the project's latest task. `env`: the key variables sent with it
    (`config_choice.keys_to_send`)."""
    out = out or sys.stdout
    err = err or sys.stderr
    printer = JsonLinesPrinter(out) if as_json else TextPrinter(out, verbose=verbose)
    progress = _Progress()
    try:
        return asyncio.run(_run(project, text, task=task, agent=agent, yolo=yolo, detach=detach, as_json=as_json,
                                printer=printer, progress=progress, out=out, err=err, latest=latest, env=env))
    except RemoteError as exc:
        printer.end_line()
        print(f"yagent: {exc}", file=err)
        return exit_codes.for_refusal(exc.code)
    except RuntimeDirError as exc:  # nothing was submitted: the directory must be fixed first
        print(f"yagent: {exc}", file=err)
        return exit_codes.for_ipc_error(exc)
    except LivenessUnknown as exc:  # the daemon may well be running: the task goes on without us
        printer.end_line()
        _last_result(printer, progress, "detached", str(exc))
        print(f"yagent: {exc}", file=err)
        return exit_codes.FAILED
    except IpcError as exc:  # a stopped follow says all there is to say; other errors need the context
        reason = str(exc) if isinstance(exc, FollowStopped) else f"lost the connection to yagentd: {exc}"
        printer.end_line()
        _last_result(printer, progress, RunStatus.INTERRUPTED, reason)
        print(f"yagent: {reason}", file=err)
        return exit_codes.NOT_RUNNING
    except KeyboardInterrupt:
        printer.end_line()
        _last_result(printer, progress, "detached", "interrupted; the task keeps running in yagentd")
        if progress.task is None:
            print("yagent: interrupted before yagentd confirmed the task; `yagent ps` shows whether it started",
                  file=err)
        else:
            print(f"yagent: interrupted; task {progress.task} keeps running in yagentd — "
                  f"`yagent attach {progress.task}` follows it, `yagent cancel {progress.task}` stops it", file=err)
        return exit_codes.SIGINT


def _last_result(printer: JsonLinesPrinter | TextPrinter, progress: _Progress, status: str, error: str) -> None:
    """A script reading the last JSON line learns how the follow ended, also when no turn end arrived."""
    if isinstance(printer, JsonLinesPrinter) and progress.task is not None:
        printer.result(progress.task, status=status, error=error)
        printer.out.flush()

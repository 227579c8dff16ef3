"""`yagent ps|logs|pause|continue|cancel|answer`: talking to the daemon about tasks (`run` is in headless.py)."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from yagent.ipc import DaemonClient, EventStream
from yagent.ipc.messages import (
    Ack,
    Answer,
    InterruptedChild,
    ListResumeCandidates,
    ListTasks,
    Question,
    ResumeCandidate,
    ResumeCandidateList,
    TaskControl,
    TaskDetail,
    TaskInfo,
    TaskList,
    TaskSummary,
)
from yagent.ipc.vocabulary import (
    AUTHORIZE_ANSWERS,
    ControlAction,
    QuestionKind,
    ReplayVerdict,
    StopReason,
    TaskState,
)

from . import exit_codes
from .answerer import answerer
from .command_run import run_command as _call
from .command_run import say as _err
from .confinement_text import unconfined_text
from .event_text import JsonLinesPrinter, TextPrinter
from .humanize import age
from .liveness import run_while_daemon_lives
from .usage_text import run_figures, task_cost

__all__ = ["answer", "control", "logs", "ps"]


# -- ps ----------------------------------------------------------------------------------------------

def _runs_tree(summary: TaskSummary) -> list[str]:
    children: dict[str | None, list[Any]] = {}
    for r in summary.runs:
        children.setdefault(r.parent, []).append(r)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for r in children.get(parent, []):
            # "cancelled (cancelled)" says nothing twice; "failed (idle_timeout)" says why.
            reason = f" ({r.stop_reason})" if r.stop_reason and r.stop_reason != r.status else ""
            if r.waiting:
                reason += f", waiting for {r.waiting}"
            if r.unconfined:
                reason += f", NOT CONFINED ({unconfined_text(r.unconfined)})"
            figures = run_figures(r)
            lines.append(f"{'  ' * depth}└ {r.agent} {r.run} {r.status}{reason}" + (f" · {figures}" if figures else ""))
            walk(r.run, depth + 1)

    walk(None, 0)
    return lines


async def _ps(project: str | None, as_json: bool, limit: int) -> int:
    async with DaemonClient() as client:
        reply = await client.request(ListTasks(id=0, project=project, limit=limit), TaskList)
    if as_json:
        print(json.dumps([t.to_wire() for t in reply.tasks]))
        return exit_codes.OK
    if not reply.tasks:
        print("no tasks yet — start one with `yagent run \"…\"`")
        return exit_codes.OK
    now = time.time()
    print(f"{'TASK':<11} {'STATE':<12} {'AGE':>6}  PROJECT")
    for t in reply.tasks:
        print(f"{t.task:<11} {t.state:<12} {age(now - t.created_at):>6}  {t.project}")
        cost = task_cost(t)
        print(f"{'':<11} {t.title}" + (f"  ({cost})" if cost else ""))
        for line in _runs_tree(t):
            print(f"{'':<13}{line}")
        for q in t.questions:
            print(f"{'':<13}? waiting for you: {q.prompt} — `yagent attach {t.task}`")
        if t.state == TaskState.BACKGROUND:
            print(f"{'':<13}⧗ its last turn kept sub-agents working in the background; the next turn gets their "
                  f"results (`yagent cancel {t.task}` stops them)")
    return exit_codes.OK


def ps(project: str | None = None, as_json: bool = False, limit: int = 50) -> int:
    return _call(_ps(project, as_json, limit))


# -- resume ------------------------------------------------------------------------------------------

# Seconds `yagent resume` waits: yagentd inspects the stopped tasks, a few at a time, each within seconds.
RESUME_LIST_TIMEOUT = 60.0


def resume_reason(summary: TaskSummary, resumable: bool = True) -> str:
    """Why `yagent continue` resumes a task the daemon listed as a candidate, and from what — or why not."""
    if not resumable:
        roots = [r for r in summary.runs if r.parent is None]
        how = f"its last turn ended with {roots[-1].stop_reason}" if roots and roots[-1].stop_reason else \
            "its last turn did not finish"
        return f"{summary.state}: {how}, which `continue` does not pick up; send it a new message to go on"
    if summary.state == TaskState.PAUSED:
        return "paused: it waits at a step boundary with its context; `continue` goes on in place"
    crashed = [r for r in summary.runs if r.parent is None and r.stop_reason == StopReason.PANIC]
    why = {TaskState.INTERRUPTED: "yagentd stopped while it ran", TaskState.CANCELLED: "it was cancelled"}.get(
        summary.state, f"its {crashed[0].agent if crashed else 'root'} worker died")
    return f"{summary.state}: {why}; the Director goes on from its memory"


def child_line(child: InterruptedChild) -> str:
    """What `continue` does with one interrupted delegation, as its inspection found."""
    head = f"{child.agent} (call {child.call_id})"
    if child.verdict == ReplayVerdict.REPLAYABLE:
        return f"{head}: replayable from step {child.step}"
    if child.verdict == ReplayVerdict.STARTS_OVER:
        return f"{head}: runs again from the start — {child.reason}"
    return f"{head}: not replayed — {child.reason}; gets a degraded report"


def _candidate_lines(candidate: ResumeCandidate) -> list[str]:
    lines = [f"  {'  ' * (c.depth - 1)}{child_line(c)}" for c in candidate.children]
    if candidate.problem:
        lines.append(f"  {candidate.problem}")
    if candidate.uninspected:
        lines.append(f"  could not be inspected: {candidate.uninspected}")
    if candidate.unconfined:
        lines.append(f"  (inspected NOT CONFINED: {unconfined_text(candidate.unconfined)})")
    return lines


async def _resume_list(as_json: bool, limit: int) -> int:
    async with DaemonClient() as client:
        reply = await client.request(ListResumeCandidates(id=0, limit=limit), ResumeCandidateList,
                                     timeout=RESUME_LIST_TIMEOUT)
    if as_json:
        print(json.dumps([{"task": c.task.task, "project": c.task.project, "title": c.task.title,
                           "state": c.task.state, "resumable": c.resumable,
                           "reason": resume_reason(c.task, c.resumable),
                           "children": [child.to_wire() for child in c.children], "problem": c.problem,
                           "uninspected": c.uninspected, "unconfined": c.unconfined}
                          for c in reply.candidates]))
        return exit_codes.OK
    if not reply.candidates:
        print("nothing to resume: no task of any project stopped midway or failed")
        return exit_codes.OK
    now = time.time()
    for c in reply.candidates:
        t = c.task
        print(f"{t.task:<11} {age(now - t.updated_at):>6}  {t.project}")
        print(f"{'':<11} {t.title}")
        if c.resumable:
            print(f"{'':<11} {resume_reason(t)} — `yagent continue {t.task}`")
        else:
            print(f"{'':<11} {resume_reason(t, False)}")
        for line in _candidate_lines(c):
            print(f"{'':<11} {line}")
    return exit_codes.OK


def resume_list(as_json: bool = False, limit: int = 50) -> int:
    return _call(_resume_list(as_json, limit))


# -- logs --------------------------------------------------------------------------------------------

async def _logs(task: str, follow: bool, as_json: bool, since: int) -> int:
    async with DaemonClient() as client:
        detail = await client.request(TaskInfo(id=0, task=task), TaskDetail)
        task_id = detail.task.task
        # A record for a person: each step's text whole, tool calls and turns a line each (`--json`: every event).
        printer = JsonLinesPrinter() if as_json else TextPrinter(verbose=True, blocks=True)
        async with EventStream(client, task_id, after_seq=since) as stream:
            reported = 0

            def report_dropped() -> None:
                nonlocal reported
                if stream.dropped > reported:
                    print(f"yagent: {stream.dropped - reported} events of task {task_id} are no longer kept by "
                          "yagentd and cannot be shown", file=sys.stderr)
                    reported = stream.dropped

            if not follow:
                for ev in await stream.backlog():
                    printer.handle(ev)
                report_dropped()
                return exit_codes.OK

            async def follow() -> None:
                async for ev in stream.events():
                    report_dropped()
                    printer.handle(ev)

            await run_while_daemon_lives(client, task_id, follow())
    return exit_codes.OK


def logs(task: str, *, follow: bool = False, as_json: bool = False, since: int = 0) -> int:
    return _call(_logs(task, follow, as_json, since))


# -- control -----------------------------------------------------------------------------------------

async def _control(task: str, action: str, as_json: bool, env: dict[str, str]) -> int:
    async with DaemonClient() as client:
        ack = await client.request(TaskControl(id=0, task=task, action=action, env=env), Ack)
    if as_json:
        print(json.dumps({"task": ack.task, "action": action, "state": ack.state}))
    else:
        verb = {ControlAction.PAUSE: "paused", ControlAction.CONTINUE: "continued",
                ControlAction.CANCEL: "cancelling"}[action]
        if action == ControlAction.CONTINUE and ack.detail.startswith("resumed"):
            print(f"task {ack.task}: {ack.detail}; follow it with `yagent logs -f {ack.task}`")
        else:
            print(f"task {ack.task} {verb}")
    return exit_codes.OK


def control(task: str, action: str, as_json: bool = False, env: dict[str, str] | None = None) -> int:
    """`env`: the key variables a `continue` that resumes a turn gives that turn (`config_choice.keys_to_send`)."""
    return _call(_control(task, action, as_json, env or {}))


_REQUEST_ID = re.compile(r"^r[0-9a-f]{6,}\.\d+$")  # a run id, a dot, the question's number in that run


def accepted_answers(question: Question) -> list[str] | None:
    """The values a question takes (None: any text). Anything else would be read as a refusal or a no."""
    if question.kind == QuestionKind.AUTHORIZE:
        return list(question.options) or list(AUTHORIZE_ANSWERS)
    if question.kind == QuestionKind.CONFIRM:
        return list(question.options) or ["yes", "no"]
    if question.kind == QuestionKind.SELECT and question.options:
        return list(question.options)
    return None


def _matching_answer(question: Question, value: str) -> str | None:
    accepted = accepted_answers(question)
    if accepted is None:
        return value
    wanted = value.strip().casefold()
    for option in accepted:
        if option.casefold() == wanted or (question.kind == QuestionKind.CONFIRM and option.casefold() in ("yes", "no")
                                           and wanted == option.casefold()[0]):
            return option
    return None


def split_answer_args(args: list[str], pending: list[str]) -> tuple[str | None, str]:
    """`yagent answer TASK [REQUEST_ID] VALUE…`: the first word is a request id only when it looks like one;
    otherwise every word is the answer (`yagent answer T use the staging db`)."""
    if len(args) > 1 and (args[0] in pending or _REQUEST_ID.match(args[0])):
        return args[0], " ".join(args[1:])
    return None, " ".join(args)


async def _answer(task: str, args: list[str], as_json: bool) -> int:
    async with DaemonClient() as client:
        detail = await client.request(TaskInfo(id=0, task=task), TaskDetail)
        questions = {q.request_id: q for q in detail.task.questions}
        request_id, value = split_answer_args(args, list(questions))
        if request_id is None:
            if not questions:
                _err(f"task {detail.task.task} has no question waiting for an answer (state: {detail.task.state})")
                return exit_codes.FAILED
            if len(questions) > 1:
                _err(f"task {detail.task.task} has {len(questions)} pending questions; name one: "
                     f"`yagent answer {detail.task.task} REQUEST_ID VALUE` with one of " + ", ".join(questions))
                return exit_codes.USAGE
            request_id = next(iter(questions))
        question = questions.get(request_id)
        if question is not None:
            matched = _matching_answer(question, value)
            if matched is None:
                accepted = accepted_answers(question) or []
                _err(f"{value!r} is not an answer to {question.kind} question {request_id} "
                     f"({question.prompt!r}); answer one of: {', '.join(accepted)}")
                return exit_codes.USAGE
            value = matched
        ack = await client.request(Answer(id=0, task=task, request_id=request_id, answer={"value": value},
                                            by=answerer("yagent answer")), Ack)
    print(json.dumps({"task": ack.task, "answered": request_id, "value": value}) if as_json
          else f"answered {request_id}: {value}")
    return exit_codes.OK


def answer(task: str, args: list[str], as_json: bool = False) -> int:
    """Answer a pending question of `task`; `args` is `[REQUEST_ID] VALUE…` as typed."""
    return _call(_answer(task, args, as_json))

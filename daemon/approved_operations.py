"""Approved operations: a tool call the user allowed at a prompt, carried out outside a confined run's rules.

A confined worker cannot do what the kernel refuses it, and must never widen its own rules. So it asks the
daemon (`ApprovedOperation`), naming the authorisation question the user answered; the daemon checks that it
saw that very question of that run answered with an allowing answer, for that tool, and that the answer was
not used before (each answer carries out one operation), then starts a process for that one call
(`Launcher.launch_operation`), confined to the run's command rules plus exactly the paths the prompt named —
for `run_bash` also the user's home, said so in `yagent ps` while it runs — and hands its result back.

The paths come from the prompt the daemon forwarded to the user, never from the request, so a worker can get
written only what a person saw and allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

import msgpack
import psutil

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.errors import MessageTooLarge
from yagent.ipc.messages import ApprovedOperation, ApprovedOperationResult, ErrorReply, Question
from yagent.ipc.records import Message, cut_to_frame, encode
from yagent.ipc.vocabulary import AUTHORIZE_ANSWERS, ErrorCode, QuestionKind, Unconfined

from .run_clock import RunClock
from .run_services import RunServices


class OperationRun(Protocol):
    """What an approved operation needs of its run (`run_supervisor.RunSupervisor`): no import of it, not even
    for type hints, so the run's module imports this one and never the other way round."""

    id: str
    services: RunServices
    approvals: ApprovalLedger
    confinement: ConfinementSpec | None
    clock: RunClock | None
    exited: asyncio.Event

    @property
    def ended(self) -> bool: ...

    @property
    def unconfined(self) -> Unconfined | None: ...

    def send(self, msg: Message) -> None: ...

    def rearm(self) -> None: ...

__all__ = ["Approval", "ApprovalLedger", "OperationRun", "carry_out"]

log = logging.getLogger(__name__)

# Allowing answers; "deny" (the last) and anything else allow nothing.
_ALLOWING = frozenset(AUTHORIZE_ANSWERS[:-1])
# Answered prompts kept per run for an operation that has not come yet; the oldest go first.
MAX_KEPT = 64
# Seconds an operation's process may take to exit after it replied before it is killed.
LINGER = 10.0
# Characters of a result kept when it is too big for one frame (the tool already capped what the model reads).
MAX_CONTENT = 256 * 1024
# Bytes of an operation's result read from its pipe; a longer one is refused, not read (it is cut to a frame anyway).
MAX_RESULT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Approval:
    """What the user allowed at one prompt, as the daemon forwarded it."""

    tool: str
    summary: str  # the command, for a command tool
    outside_paths: tuple[str, ...]


class ApprovalLedger:
    """One run's answered authorisation prompts not used yet, and the approved operation running, if any."""

    def __init__(self) -> None:
        self._approved: OrderedDict[int, Approval] = OrderedDict()
        self.running = ""  # what `yagent ps` shows while the operation's process runs

    def note(self, ask_id: int, question: Question, answer: dict[str, Any]) -> None:
        """The user answered the run's question `ask_id` (its `AskUser` id): keep it if it allowed something."""
        if question.kind is not QuestionKind.AUTHORIZE or answer.get("cancelled"):
            return
        if str(answer.get("value", "")).strip().lower() not in _ALLOWING:
            return
        details = question.details
        tool, summary, paths = details.get("tool"), details.get("summary"), details.get("outside_paths")
        if not isinstance(tool, str) or not isinstance(summary, str) or not isinstance(paths, list):
            return
        if not paths or not all(isinstance(p, str) and os.path.isabs(p) and "\x00" not in p for p in paths):
            return  # nothing outside the project was approved: there is nothing to carry out beyond the rules
        self._approved[ask_id] = Approval(tool, summary, tuple(os.path.normpath(p) for p in paths))
        while len(self._approved) > MAX_KEPT:
            self._approved.popitem(last=False)

    def take(self, ask_id: int, tool: str) -> Approval | str:
        """The approval behind question `ask_id` for `tool`, used up; or why there is none."""
        approval = self._approved.pop(ask_id, None)  # a mismatched try uses it up too: no probing
        if approval is None:
            return (f"no answered authorisation prompt {ask_id} of this run allows it (never asked, denied, or "
                    "already used: each answer carries out one operation)")
        if approval.tool != tool:
            return f"prompt {ask_id} approved {approval.tool}, not {tool}"
        return approval


def carry_out(run: OperationRun, msg: ApprovedOperation) -> None:
    """Check `msg` against what the user answered, then run it in its own process; the reply comes later."""
    refusal = _refusal(run, msg)
    if refusal is None:
        taken = run.approvals.take(msg.ask, msg.tool)
        if isinstance(taken, str):
            refusal = taken
    if refusal is not None:
        log.warning("run %s: approved operation %s refused: %s", run.id, msg.tool, refusal)
        run.send(ErrorReply(id=msg.id, code=ErrorCode.NOT_APPROVED,
                            message=f"{msg.tool} was not carried out: {refusal}"))
        return
    assert run.confinement is not None and isinstance(taken, Approval)
    request = {"tool": msg.tool, "args": msg.args, "call_id": msg.call_id, "approved": list(taken.outside_paths),
               "summary": taken.summary}
    home = " (home writable)" if "command" in msg.args else ""  # the process grants it to commands only
    run.approvals.running = f"the approved {taken.tool} `{taken.summary}`{home}"  # set now: one at a time
    run.services.scope.spawn(f"approved-{run.id}-{msg.id}", _run(run, msg.id, taken, request, run.confinement))


def _refusal(run: OperationRun, msg: ApprovedOperation) -> str | None:
    if not isinstance(msg.args, dict) or not isinstance(msg.tool, str) or type(msg.ask) is not int:
        return "it needs a prompt id (integer), a tool name and a map of arguments"
    if run.confinement is None or run.unconfined is not None:
        return "this run is not confined, so it carries out approved operations itself"
    if run.approvals.running:
        return "another approved operation of this run is still running"
    if run.ended or run.services.is_shutting_down():
        return "the run is being stopped"
    return None


async def _run(run: OperationRun, reply_id: int, approval: Approval, request: dict[str, Any],
               confinement: ConfinementSpec) -> None:
    ledger = run.approvals
    clock = run.clock
    if clock is not None:  # waiting for the operation is not idleness, as waiting for a child is not
        clock.freeze("approved", run.services.clock())
    try:
        result = await _in_process(run, request, confinement)
    except Exception as exc:
        log.exception("run %s: approved operation %s failed", run.id, approval.tool)
        result = ApprovedOperationResult(id=0, is_error=True, content=(
            f"{approval.tool}: the approved operation could not be started ({type(exc).__name__}: {exc}); "
            "nothing was done"))
    finally:
        ledger.running = ""
        if clock is not None:
            clock.unfreeze("approved", run.services.clock())
            run.rearm()
    result.id = reply_id
    run.send(_within_frame(result))


def _within_frame(result: ApprovedOperationResult) -> ApprovedOperationResult:
    """`result`, cut to fit one frame: an unsendable reply would leave the worker waiting for good."""
    try:
        encode(result)
        return result
    except MessageTooLarge:
        return ApprovedOperationResult(id=result.id, is_error=result.is_error, data=cut_to_frame(result.data, 200),
                                       content=result.content[:MAX_CONTENT] + "\n[... cut: too long for one reply]")
    except TypeError as exc:  # data msgpack cannot carry
        return ApprovedOperationResult(id=result.id, is_error=result.is_error, content=result.content[:MAX_CONTENT],
                                       data={"dropped": f"result data the daemon cannot send ({exc})"})


async def _in_process(run: OperationRun, request: dict[str, Any], confinement: ConfinementSpec
                      ) -> ApprovedOperationResult:
    # The forkserver's answer is waited for off the event loop, as for a run's worker (`Launcher.begin_launch`).
    handle, reader = await asyncio.to_thread(run.services.launcher.launch_operation, run.id, request,
                                             confinement=confinement)
    receiving = asyncio.ensure_future(asyncio.to_thread(_receive, reader, handle.sentinel, handle.pid))
    ended = asyncio.ensure_future(run.exited.wait())
    try:
        await asyncio.wait([receiving, ended], return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not receiving.done():  # the run ended (or the daemon stops) first: the operation goes with it
            await asyncio.to_thread(_kill_tree, handle.pid)
        got = await asyncio.shield(receiving)  # EOF at once now that the process is gone
        reader.close()
        handle.close()
    if not isinstance(got, dict):
        return ApprovedOperationResult(id=0, is_error=True, content=(
            f"{request['tool']}: the approved operation's process ended without a result; it may have been "
            "stopped with its run. Look at the path before trying again"))
    data = got.get("data")
    return ApprovedOperationResult(id=0, content=str(got.get("content", "")), is_error=bool(got.get("is_error")),
                                   data=data if isinstance(data, dict) else {})


def _kill_tree(pid: int) -> None:
    """SIGKILL the operation's process and what it started (a command runs in a session of its own)."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _receive(reader: Connection, sentinel: int, pid: int) -> object:
    """The process's result (None if it died first or sent what is not one), then its exit: it is killed if it
    lingers after replying. Read as msgpack bytes, never unpickled: the process runs a command the model wrote."""
    try:
        got = msgpack.unpackb(reader.recv_bytes(MAX_RESULT_BYTES), raw=False, strict_map_key=True)
    except (EOFError, OSError, ValueError, msgpack.UnpackException):
        got = None
    if not wait([sentinel], timeout=LINGER):
        _kill_tree(pid)
    return got

"""`yagent diff [TASK]` and `yagent undo [TASK]`: what a task's agents changed in the project, and taking it back.

Without TASK, the current project's latest task. `diff` shows each Coding sub-task (between the checkpoints yagent
made before and after it) file by file with its lines added and removed, and the patches, coloured on a terminal
(`--stat`: no patches). `undo` takes back the last sub-task not undone yet (`--to N`: everything since checkpoint
N): it shows what will change first and asks (`--yes` does not), and refuses when you changed a file it would
touch since, naming it (`--force` goes on: your version stays in the checkpoint made just before). The same text
serves `/diff` and `/undo` in the full-screen client.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from yagent.ipc import DaemonClient
from yagent.ipc.messages import (
    FileChange,
    ListTasks,
    TaskDiff,
    TaskDiffReply,
    TaskList,
    TaskUndo,
    TaskUndoReply,
)
from yagent.ipc.vocabulary import ChangeKind

from . import exit_codes
from .command_run import run_command as _call
from .command_run import say as _err

__all__ = ["diff", "diff_lines", "undo", "undo_lines"]

_MARK = {ChangeKind.ADDED: "A", ChangeKind.MODIFIED: "M", ChangeKind.DELETED: "D", ChangeKind.TYPE: "T"}
_ANSI = {"add": "\x1b[32m", "del": "\x1b[31m", "hunk": "\x1b[36m", "head": "\x1b[1m", "dim": "\x1b[2m",
         "warn": "\x1b[33m", "off": "\x1b[0m"}


def _paint(text: str, tone: str, colour: bool) -> str:
    return f"{_ANSI[tone]}{text}{_ANSI['off']}" if colour and tone else text


def _file_line(change: FileChange, colour: bool) -> str:
    counts = "binary" if change.binary else f"{_paint(f'+{change.added}', 'add', colour)} " \
                                            f"{_paint(f'-{change.removed}', 'del', colour)}"
    return f"  {_MARK.get(change.change, '?')} {change.path}  {counts}"


def _patch_lines(patch: str, colour: bool) -> list[str]:
    lines = []
    for line in patch.rstrip("\n").split("\n"):
        tone = ""
        if line.startswith(("+++", "---", "diff --git", "index ")):
            tone = "head"
        elif line.startswith("+"):
            tone = "add"
        elif line.startswith("-"):
            tone = "del"
        elif line.startswith("@@"):
            tone = "hunk"
        lines.append("    " + _paint(line, tone, colour))
    return lines


def diff_lines(reply: TaskDiffReply, *, colour: bool = False, patches: bool = True) -> list[str]:
    """What `yagent diff` prints (and `/diff` shows)."""
    if not reply.subtasks:
        return [f"task {reply.task}: {reply.note or 'nothing changed'}"]
    out: list[str] = []
    for n, sub in enumerate(reply.subtasks, 1):
        span = f"checkpoints {sub.before} → {sub.after}" if sub.after else f"from checkpoint {sub.before}"
        out.append(_paint(f"sub-task {n}: {sub.agent} {sub.run} ({span}) — {sub.task}", "head", colour))
        if sub.note:
            out.append("  " + _paint(sub.note, "dim", colour))
        if not sub.files and sub.after:
            out.append("  (no file changed)")
        for change in sub.files:
            out.append(_file_line(change, colour))
            if patches and change.patch:
                out += _patch_lines(change.patch, colour)
    return out


def undo_lines(reply: TaskUndoReply, *, colour: bool = False) -> list[str]:
    """What `yagent undo` shows of an undo, before (preview) or after it was carried out."""
    verb = "undid" if reply.applied else "undo"
    out = [_paint(f"{verb} {reply.what} — files back as at checkpoint {reply.target}:", "head", colour)]
    out += [_file_line(f, colour).replace("+0 -0", "").rstrip() for f in reply.files] or ["  (no file differs)"]
    out += ["  " + _paint(f"left as it is: {why}", "dim", colour) for why in reply.left]
    if reply.changed_since and not reply.applied:
        names = ", ".join(reply.changed_since)
        out.append(_paint(f"you changed {names} since the agents did; undo would overwrite "
                          f"{'it' if len(reply.changed_since) == 1 else 'them'}. `--force` goes on (your version "
                          "stays in the checkpoint made just before the undo)", "warn", colour))
    if reply.applied:
        out.append(f"how things were just before is checkpoint {reply.safety}: `yagent undo --to {reply.safety}` "
                   "takes this undo back")
    return out


async def _task_or_latest(client: DaemonClient, task: str | None, project: Path) -> str | None:
    if task:
        return task
    listed = await client.request(ListTasks(id=0, project=str(project), limit=1), TaskList)
    assert isinstance(listed, TaskList)
    return listed.tasks[0].task if listed.tasks else None


def diff(task: str | None, project: Path, *, as_json: bool, patches: bool, out: TextIO | None = None) -> int:
    out = out or sys.stdout

    async def go() -> int:
        async with DaemonClient() as client:
            chosen = await _task_or_latest(client, task, project)
            if chosen is None:
                _err(f"{project} has no task yet: there is nothing to show")
                return exit_codes.FAILED
            reply = await client.request(TaskDiff(id=0, task=chosen, patches=patches), TaskDiffReply)
        assert isinstance(reply, TaskDiffReply)
        if as_json:
            print(json.dumps(reply.to_wire(), indent=2, default=str), file=out)
        else:
            print("\n".join(diff_lines(reply, colour=out.isatty(), patches=patches)), file=out)
        return exit_codes.OK

    return _call(go())


def _confirmed(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def undo(task: str | None, project: Path, *, to: int, force: bool, yes: bool, as_json: bool,
         out: TextIO | None = None) -> int:
    out = out or sys.stdout
    colour = out.isatty()

    async def go() -> int:
        async with DaemonClient() as client:
            chosen = await _task_or_latest(client, task, project)
            if chosen is None:
                _err(f"{project} has no task yet: there is nothing to undo")
                return exit_codes.FAILED
            preview = await client.request(TaskUndo(id=0, task=chosen, to=to, force=force), TaskUndoReply)
            assert isinstance(preview, TaskUndoReply)
            if not as_json:
                print("\n".join(undo_lines(preview, colour=colour)), file=out)
            if preview.changed_since and not force:
                if as_json:
                    print(json.dumps(preview.to_wire(), indent=2), file=out)
                return exit_codes.FAILED
            if not preview.files:
                if as_json:
                    print(json.dumps(preview.to_wire(), indent=2), file=out)
                return exit_codes.OK
            if not yes:
                if not (sys.stdin.isatty() and out.isatty()):
                    _err("nothing was changed: add --yes to undo without being asked")
                    return exit_codes.USAGE
                if not _confirmed("undo these changes? [y/N] "):
                    print("nothing was changed", file=out)
                    return exit_codes.OK
            started = time.monotonic()
            done = await client.request(TaskUndo(id=0, task=chosen, to=to, force=force, apply=True), TaskUndoReply)
        assert isinstance(done, TaskUndoReply)
        if as_json:
            print(json.dumps(done.to_wire(), indent=2), file=out)
        elif done.applied:
            print(_paint(f"done in {time.monotonic() - started:.1f}s: ", "head", colour)
                  + f"{len(done.files)} file{'s' if len(done.files) != 1 else ''} put back. "
                  + undo_lines(done)[-1], file=out)
        else:  # you changed a file between the preview and now
            print("\n".join(undo_lines(done, colour=colour)), file=out)
        return exit_codes.OK if done.applied else exit_codes.FAILED

    return _call(go())

"""The TUI's behaviour, independent of prompt_toolkit: attach, follow, send, answer, commands.

The controller owns every background task it starts (the event pump, the liveness watcher, request
tasks); a task that fails puts its error on screen instead of vanishing. The application (`app.py`)
only translates keys into calls here and draws what the controller holds.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yagent.ipc.daemon_events import TurnStarted
from yagent.ipc.errors import IpcError, RemoteError
from yagent.ipc.home import yagent_home
from yagent.ipc.messages import Event, TaskDetail
from yagent.ipc.skill_account import account_lines, load_skill_account
from yagent.ipc.vocabulary import ControlAction, ErrorCode, EventType, YoloLevel

from ..checkpoint_commands import diff_lines, undo_lines
from ..config_choice import keys_to_send
from ..humanize import age, format_tokens
from ..mcp_commands import status_text
from ..owned_tasks import OwnedTasks
from ..stamped import stamped_data
from .backend import Backend
from .commands import COMMANDS, parse_input
from .config_facts import ConfigFacts, read_config_facts
from .dialogs import Choice, Dialog, Dismiss, PickerDialog, QuestionDialog
from .pacing import PUMP_SLICE, InputFirst
from .render import LogRenderer
from .state import TaskView

__all__ = ["ExitInfo", "TuiController", "TuiOptions"]

_DIALOG_EVENTS = {EventType.USER_HELP_NEEDED.value, EventType.USER_HELP_RESPONSE.value,
                  EventType.RUN_FINISHED.value, EventType.TURN_FINISHED.value}
# A control's acknowledgement ("pausing at the next step…") says what is about to happen; once the task's
# state moves on it is stale, so these events take it off the screen (errors stay until the next action).
_STATE_EVENTS = {EventType.TASK_PAUSED.value, EventType.TASK_RESUMED.value, EventType.TURN_STARTED.value,
                 EventType.TURN_FINISHED.value}

# How many events the pump applies between two looks at the clock (a look costs about as much as an event).
_SLICE_CHECK = 8

KEY_HELP = (
    ("enter", "send the message"),
    ("alt+enter / esc enter", "new line in the message"),
    ("↑ / ↓", "message history (at the first / last line)"),
    ("tab", "complete a /command"),
    ("pgup / pgdn", "scroll the conversation; pgdn at the bottom follows it again"),
    ("ctrl+home / ctrl+end", "first line of the conversation / follow its tail (end too, at the end of the text)"),
    ("ctrl+o", "expand or collapse tool results and thinking"),
    ("ctrl+t", "thinklink plans of each agent"),
    ("f2", "reopen a question you put off"),
    ("ctrl+r", "reconnect to yagentd after the connection dropped"),
    ("ctrl+q", "detach: leave, the task keeps running (ctrl+c on an empty line too)"),
)
STATUS_LEGEND = (
    ("⧉ N −S (P%)", "context compactions in this task, the tokens they saved, and P = saved ÷ the largest context "
                    "compacted (capped at 100%: each step compacts on its own, so the savings add up past it)"),
    ("ctx U/T of W", "tokens the running agent's last request held / the threshold where its context is compacted, "
                     "of its context window W (the provider's context_window if set, else the model catalog's; the "
                     "agent is named when it is not the one you talk to); /context shows the parts"),
)
_PART_NAMES = (("system", "system prompt"), ("instructions", "project instructions"), ("history", "conversation"),
               ("tool_results", "tool results"), ("call_context", "per-call context (the board's index)"),
               ("tools", "tool definitions"))
_SOURCES = {"env": "YAGENT_COMPRESS_THRESHOLD", "config": "[enhanced_commander] context_compression_threshold",
            "catalog": "the model catalog (window × 0.75)", "default": "the default (the model is not in the catalog)"}


@dataclass(frozen=True, slots=True)
class TuiOptions:
    project: Path
    agent: str = "director"
    yolo: str = ""  # a YoloLevel; empty: `[tui] yolo` from the config file, else none
    config_path: Path | None = None
    home: Path | None = None


@dataclass(frozen=True, slots=True)
class ExitInfo:
    reason: str  # detached | lost
    task: str | None
    state: str


class TuiController:
    def __init__(self, backend: Backend, options: TuiOptions, *, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time,
                 start_daemon: Callable[[], Awaitable[None]] | None = None,
                 liveness_interval: float = 1.0) -> None:
        self.backend = backend
        self.options = options
        self.environ = os.environ if environ is None else environ
        self.clock = clock
        self.start_daemon = start_daemon
        self.liveness_interval = liveness_interval
        self.project = str(options.project)  # the attached task's project once attached
        self.view = TaskView(project=self.project)
        self.renderer = LogRenderer()
        self.dialog: Dialog | None = None
        self._picker_action: Callable[[Any], Coroutine[Any, Any, None]] | None = None
        self.deferred: set[str] = set()
        self.message: tuple[str, bool] | None = None  # (text, is_error), shown above the status line
        self.connection = "connecting"  # connecting | ok | lost
        self.lost_reason = ""
        self.mode = "main"  # main | plans | setup
        self.plan_filter: str | None = None
        self.tools_expanded = False
        self.scroll_top: int | None = None  # None: follow the tail
        self.model_override = ""
        self.listeners: list[Callable[[], None]] = []  # a change to draw at once
        self.stream_listeners: list[Callable[[], None]] = []  # a change the event stream made: drawn by the frame
        self.input_first = InputFirst()  # the event pump lets a pressed key be drawn before it applies more
        self.restore_input: Callable[[str], None] = lambda text: None
        self.exit_app: Callable[[ExitInfo], None] = lambda info: None
        self.open_setup: Callable[[], None] = lambda: None
        self.exit_info: ExitInfo | None = None
        self._tasks = OwnedTasks(lambda text: self.say(text, error=True))
        self._generation = 0
        self._pump: asyncio.Task[Any] | None = None
        self._notices: set[str] = set()
        facts = self.facts()
        self.yolo = options.yolo or facts.yolo or YoloLevel.NONE

    # -- plumbing ----------------------------------------------------------------------------------

    def changed(self) -> None:
        for listener in self.listeners:
            listener()

    def streamed(self) -> None:
        for listener in self.stream_listeners:
            listener()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self._tasks.spawn(name, coro)

    async def aclose(self) -> None:
        self._generation += 1
        await self._tasks.aclose()
        await self.backend.close()

    def say(self, text: str, *, error: bool = False) -> None:
        self.message = (text, error)
        self.changed()

    def facts(self) -> ConfigFacts:
        path = self.options.config_path
        if path is None:
            return ConfigFacts()
        return read_config_facts(path, self.environ, self.options.home or path.parent.parent, Path(self.project))

    # -- attaching ---------------------------------------------------------------------------------

    async def start(self, task: str | None = None, *, latest: bool = True) -> None:
        """Connect, attach to `task` (or the project's latest), and start watching the daemon."""
        await self.backend.connect()
        self.connection = "ok"
        if task is None and latest:
            tasks = await self.backend.list_tasks(self.project, limit=1)
            task = tasks[0].task if tasks else None
        if task is not None:
            await self.attach(task)
        else:
            self.view.note("new session: your first message starts a task in this project")
        for warning in self.facts().warnings:  # said once, at the start, as yagentd logs them
            self.view.note(f"config {self.options.config_path}: {warning}")
        self.spawn("liveness", self._watch_liveness())
        self.changed()

    async def attach(self, task: str) -> None:
        detail = await self.backend.task_info(task)
        self._stop_pump()
        self.project = detail.task.project
        self.view = TaskView(project=detail.task.project)
        self.view.adopt_summary(detail.task)
        self.renderer.reset()
        self.dialog = None
        self.deferred.clear()
        self.scroll_top = None
        self._sync_dialog()  # pending questions first, before the replay has drawn anything
        self._start_pump(detail.task.task, 0, detail)
        self.changed()

    def _stop_pump(self) -> None:
        self._generation += 1
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None

    def _start_pump(self, task: str, after_seq: int, detail: TaskDetail | None) -> None:
        self._generation += 1
        self._pump = self.spawn("event-pump", self._follow(task, after_seq, detail, self._generation))

    async def _follow(self, task: str, after_seq: int, detail: TaskDetail | None, generation: int) -> None:
        try:
            async with self.backend.stream(task, after_seq) as stream:
                backlog = await stream.backlog()
                if generation != self._generation:
                    return
                if detail is not None and after_seq == 0:
                    self._history_fallback(backlog, detail)
                loop = asyncio.get_running_loop()
                since = loop.time()
                for n, ev in enumerate(backlog, 1):
                    self.view.apply(ev)
                    if n % _SLICE_CHECK == 0 and loop.time() - since >= PUMP_SLICE:
                        await self.input_first.turn()  # a long replay must not hold back what is typed meanwhile
                        if generation != self._generation:
                            return
                        since = loop.time()
                self._sync_dialog()
                self.changed()
                n = 0
                since = loop.time()
                async for ev in stream.events():
                    if generation != self._generation:
                        return
                    self._on_event(ev)
                    n += 1
                    # A flood arrives without the stream ever waiting: yield by the clock, and keys go first.
                    if n % _SLICE_CHECK == 0 and loop.time() - since >= PUMP_SLICE:
                        await self.input_first.turn()
                        since = loop.time()
        except IpcError as exc:
            if generation == self._generation:
                self._lost(str(exc))
        except Exception as exc:  # a stream that broke in any other way must not look alive
            if generation == self._generation:
                self._lost(f"the event stream failed: {type(exc).__name__}: {exc}")

    def _on_event(self, ev: Event) -> None:
        self.view.apply(ev)
        if ev.type in _DIALOG_EVENTS:
            self._sync_dialog()
        if ev.type in _STATE_EVENTS and self.message is not None and not self.message[1]:
            self.message = None
        self.streamed()

    def _history_fallback(self, backlog: list[Event], detail: TaskDetail) -> None:
        """Turns older than anything the daemon still replays are shown from the task record."""
        if backlog and backlog[0].seq == 1:
            return
        covered = [stamped_data(e, TurnStarted).turn for e in backlog if e.type == EventType.TURN_STARTED.value]
        first = min(covered) if covered else None
        missing = [(t.text, t.output) for t in detail.turns if first is None or t.turn < first]
        if not covered and backlog:
            missing = missing[:-1]  # the running turn's start fell out of the ring; its events follow
        self.view.add_history(missing)

    async def _watch_liveness(self) -> None:
        while True:
            await asyncio.sleep(self.liveness_interval)
            if self.connection != "ok":
                continue
            try:
                alive = await self.backend.alive()
            except Exception as exc:  # a probe that cannot run says nothing good about the daemon
                alive = False
                self.lost_reason = str(exc)
            if not alive and self.connection == "ok":
                self._lost("yagentd is not accepting connections any more (stopped or crashed)")

    def _lost(self, reason: str) -> None:
        self._stop_pump()
        self.connection = "lost"
        self.lost_reason = reason
        if isinstance(self.dialog, QuestionDialog):
            self.dialog.sending = False
        self.changed()

    def reconnect(self) -> None:
        if self.connection == "connecting":
            return
        self.connection = "connecting"
        self.say("reconnecting to yagentd…")
        self.spawn("reconnect", self._reconnect())

    async def _reconnect(self) -> None:
        try:
            if self.start_daemon is not None:
                await self.start_daemon()
            await self.backend.connect()
            task = self.view.task
            if task is not None:
                detail = await self.backend.task_info(task)
                self.view.questions = {q.request_id: q for q in detail.task.questions}
                self.view.state = detail.task.state
                self._start_pump(task, self.view.last_seq, None)
            self.connection = "ok"
            self.lost_reason = ""
            self.say("reconnected")
            self._sync_dialog()
        except (IpcError, OSError) as exc:
            self._lost(f"reconnecting failed: {exc}")

    # -- questions ---------------------------------------------------------------------------------

    def _sync_dialog(self) -> None:
        """Close the question dialog once its question is gone; open the next pending one."""
        if isinstance(self.dialog, QuestionDialog) and self.dialog.question.request_id not in self.view.questions:
            self.dialog = None
        if self.dialog is not None:
            return
        pending = [q for q in self.view.pending_questions() if q.request_id not in self.deferred]
        if pending:
            total = len(self.view.questions)
            self.dialog = QuestionDialog(pending[0], position=total - len(pending) + 1, total=total)

    def reopen_questions(self) -> None:
        self.deferred.clear()
        self._sync_dialog()
        if self.dialog is None:
            self.say("no question is waiting")
        self.changed()

    def dialog_key(self, key: str, data: str = "") -> None:
        dialog = self.dialog
        if dialog is None:
            return
        result = dialog.key(key, data)
        if isinstance(result, Dismiss):
            if isinstance(dialog, QuestionDialog):
                self.deferred.add(dialog.question.request_id)
                self.say("the question keeps waiting: f2 brings it back")
            self.dialog = None
            self._picker_action = None
            self._sync_dialog()
        elif isinstance(result, Choice):
            if isinstance(dialog, QuestionDialog):
                dialog.sending = True
                dialog.error = ""
                self.spawn("answer", self._answer(dialog, str(result.value)))
            else:
                action, self._picker_action, self.dialog = self._picker_action, None, None
                if action is not None:
                    self.spawn("pick", action(result.value))
        self.changed()

    async def _answer(self, dialog: QuestionDialog, value: str) -> None:
        q = dialog.question
        self.view.answered_here.add(q.request_id)
        try:
            await self.backend.answer(self.view.task or q.task, q.request_id, value)
        except RemoteError as exc:
            if exc.code == ErrorCode.NO_QUESTION:
                # Answered from another client a moment ago, or its run ended: nothing to do here.
                self.view.questions.pop(q.request_id, None)
                self.say("that question was already answered elsewhere, or its run ended")
                self._sync_dialog()
            else:
                dialog.sending = False
                dialog.error = str(exc)
        except IpcError as exc:
            dialog.sending = False
            dialog.error = f"could not send the answer: {exc}"
        self.changed()

    # -- input -------------------------------------------------------------------------------------

    def submit_line(self, raw: str) -> bool:
        """Handle one submitted input line; True when the input box may be cleared."""
        parsed = parse_input(raw)
        self.message = None
        if parsed.kind == "empty":
            return False
        if parsed.kind == "unknown":
            known = " ".join(f"/{c.name}" for c in COMMANDS)
            # The way out first: one row cuts the list of commands short on a narrow terminal (/help has it all).
            self.say(f"unknown command /{parsed.name} — // sends text that starts with / — known: {known}",
                     error=True)
            return False
        if parsed.kind == "command":
            self.run_command(parsed.name, parsed.argument)
            return True
        if self.connection != "ok":
            self.say("not connected to yagentd: ctrl+r reconnects; your message stays in the input", error=True)
            return False
        self.scroll_top = None
        self.spawn("submit", self._submit(parsed.text))
        return True

    async def _submit(self, text: str) -> None:
        options: dict[str, Any] = {}
        if self.model_override:
            options["model_override"] = self.model_override
        try:
            sub = await self.backend.submit(self.project, text, task=self.view.task, agent=self.options.agent,
                                            yolo=self.yolo, options=options, env=self._keys())
        except RemoteError as exc:
            self.restore_input(text)
            if exc.code == ErrorCode.BUSY:
                self.say(f"not sent: the task is still working on turn {self.view.turn} — your message is back in "
                         "the input; send it when the turn ends, or /cancel the turn", error=True)
            else:
                self.say(f"not sent: {exc}", error=True)
            return
        except IpcError as exc:
            self.restore_input(text)
            self._lost(str(exc))
            return
        if sub.task != self.view.task:
            await self.attach(sub.task)
        if sub.notice and sub.notice not in self._notices:  # the provider picked from the environment: said once
            self._notices.add(sub.notice)
            self.view.note(sub.notice)
            self.changed()

    def _keys(self) -> dict[str, str]:
        """The key variables a turn sent from here carries (`config_choice.keys_to_send`)."""
        return keys_to_send(self.options.config_path, self.environ)

    # -- commands ----------------------------------------------------------------------------------

    def run_command(self, name: str, arg: str) -> None:
        if name in tuple(ControlAction):  # /pause, /continue and /cancel are named after their action
            action = ControlAction(name)
            self._need_task(lambda task: self.spawn(name, self._control(task, action)))
        elif name == "compact":
            self._need_task(lambda task: self.spawn(name, self._compact(task)))
        elif name == "context":
            self._show_context()
        elif name == "resume":
            self.spawn("resume", self._resume_picker())
        elif name == "new":
            self._stop_pump()
            self.view = TaskView(project=self.project)
            self.renderer.reset()
            self.dialog = None
            self.view.note("new session: your next message starts a new task in this project")
            self.say("new session")
        elif name == "model":
            self._model(arg)
        elif name == "blueprint":
            self.spawn(name, self._show_blueprint(arg))
        elif name == "diff":
            self._need_task(lambda task: self.spawn(name, self._show_diff(task)))
        elif name == "undo":
            self._need_task(lambda task: self.spawn(name, self._undo(task, arg)))
        elif name == "mcp":
            self.spawn("mcp", self._show_mcp())
        elif name == "skills":
            self._show_skills()
        elif name == "setup":
            if self.view.turn_running:
                self.say("the wizard takes the whole keyboard: wait for the turn to end or /cancel it, then /setup",
                         error=True)
            elif self.dialog is not None:
                self.say("close the open dialog first, then /setup", error=True)
            else:
                self.mode = "setup"
                self.open_setup()
        elif name == "detach":
            self.detach()
        elif name == "help":
            self._help()
        self.changed()

    def _need_task(self, then: Callable[[str], object]) -> None:
        if self.view.task is None:
            self.say("no task yet: send a message first", error=True)
        elif self.connection != "ok":
            self.say("not connected to yagentd: ctrl+r reconnects", error=True)
        else:
            then(self.view.task)

    async def _control(self, task: str, action: ControlAction) -> None:
        before = self._control_done(action)
        try:
            ack = await self.backend.control(task, action, self._keys() if action == ControlAction.CONTINUE else {})
        except RemoteError as exc:
            if exc.code == ErrorCode.NOT_RUNNING:
                self.say(f"nothing to {action}: the task has no turn in progress", error=True)
            else:
                self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        if action == ControlAction.CONTINUE and ack.detail.startswith("resumed"):
            self.say(f"{ack.detail}: picking up where it stopped")
            return
        if before or not self._control_done(action):  # else its event landed first: the log says it already
            self.say({ControlAction.PAUSE: "pausing at the next step…", ControlAction.CONTINUE: "continuing",
                      ControlAction.CANCEL: "cancelling the turn…"}[action])

    async def _compact(self, task: str) -> None:
        try:
            ack = await self.backend.compact(task)
        except RemoteError as exc:
            if exc.code == ErrorCode.NOT_RUNNING:
                self.say("nothing to compact: no turn is running (a turn compacts its context on its own when it "
                         "fills up)", error=True)
            else:
                self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        self.say(f"compaction asked: {ack.detail}")

    def _show_context(self) -> None:
        gauges = sorted(self.view.gauges.values(), key=lambda g: (g.run != self.view.root_run, g.agent))
        if not gauges:
            self.view.note("no model request yet in this task: /context shows what the last one held, part by part")
            return
        for g in gauges:
            measured = ("the provider's count of the last request plus an estimate of what came after" if g.measured
                        else "a local estimate (cl100k)")
            window = f", window {format_tokens(g.window)}" if g.window else ""
            lines = [f"context of {g.agent} at step {g.step}: {format_tokens(g.used)} of {format_tokens(g.threshold)} "
                     f"tokens before compaction ({g.percent}%) — {measured}",
                     f"  threshold from {_SOURCES.get(g.source, g.source or 'unknown')}{window}"]
            lines += [f"  {label:<38} {format_tokens(g.parts.get(key, 0)):>7}" for key, label in _PART_NAMES]
            lines.append(f"  {'total (local estimate)':<38} "
                         f"{format_tokens(sum(g.parts.get(key, 0) for key, _l in _PART_NAMES)):>7}")
            self.view.note("\n".join(lines))

    def _control_done(self, action: ControlAction) -> bool:
        return {ControlAction.PAUSE: self.view.paused, ControlAction.CONTINUE: not self.view.paused,
                ControlAction.CANCEL: not self.view.turn_running}[action]

    async def _resume_picker(self) -> None:
        try:
            tasks = await self.backend.list_tasks(self.project, limit=30)
        except IpcError as exc:
            self.say(f"cannot list tasks: {exc}", error=True)
            return
        others = [t for t in tasks if t.task != self.view.task]
        if not others:
            self.say("no earlier task in this project")
            return
        now = self.clock()
        items = [(t.task, f"{t.task}  {t.state:<11} {age(now - t.updated_at):>4}  {t.title}") for t in others]
        self._open_picker(PickerDialog("resume a task", "attach to the task you pick; your next message continues it",
                                       items), self._resume)

    async def _resume(self, task: str) -> None:
        try:
            await self.attach(task)
        except IpcError as exc:
            self.say(f"cannot attach to {task}: {exc}", error=True)
            return
        self.say(f"attached to {task}: your next message continues it")

    def _open_picker(self, dialog: PickerDialog, action: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
        if isinstance(self.dialog, QuestionDialog):
            self.say("answer the open question first (esc puts it off)", error=True)
            return
        self.dialog = dialog
        self._picker_action = action
        self.changed()

    def _model(self, arg: str) -> None:
        facts = self.facts()
        if facts.problem and not facts.providers:
            self.say(facts.problem, error=True)
            return
        if arg:
            self._set_model(arg, facts)
            return
        if not facts.providers:
            self.say("no providers are configured: /setup adds one", error=True)
            return
        default = facts.default_provider or "none chosen"
        items: list[tuple[Any, str]] = [("default", f"default ({default})")]
        items += [(p, p + ("  ← current" if p == self.model_override else "")) for p in facts.providers]
        current = facts.providers.index(self.model_override) + 1 if self.model_override in facts.providers else 0

        async def pick(value: str) -> None:
            self._set_model(value, facts)

        self._open_picker(PickerDialog("model for the next turns", "the provider agents use from your next message",
                                       items, selected=current), pick)

    def _set_model(self, name: str, facts: ConfigFacts) -> None:
        if name == "default":
            self.model_override = ""
            self.say(f"model: back to the configured default ({facts.default_provider or 'none chosen'})")
        elif name in facts.providers:
            self.model_override = name
            self.say(f"model: next turns use provider {name}")
        else:
            known = ", ".join(facts.providers) or "none"
            self.say(f"unknown provider {name!r}; configured: {known} — /setup adds providers", error=True)
        self.changed()

    async def _show_blueprint(self, module: str) -> None:
        try:
            shown = await self.backend.blueprint(str(self.project), module.strip())
        except RemoteError as exc:
            self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        if shown.problem:
            self.say(shown.problem, error=True)
        else:
            self.view.note(shown.text)
        self.changed()

    async def _show_diff(self, task: str) -> None:
        try:
            reply = await self.backend.task_diff(task)
        except RemoteError as exc:
            self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        self.view.note_diff("\n".join(diff_lines(reply)))
        self.changed()

    async def _undo(self, task: str, arg: str) -> None:
        words = arg.split()
        force = "--force" in words
        numbers = [w for w in words if w != "--force"]
        if len(numbers) > 1 or (numbers and not numbers[0].isdigit()):
            self.say("/undo takes a checkpoint number and --force, e.g. /undo 3 --force", error=True)
            return
        to = int(numbers[0]) if numbers else 0
        try:
            preview = await self.backend.task_undo(task, to=to, apply=False, force=force)
        except RemoteError as exc:
            self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        self.view.note_diff("\n".join(undo_lines(preview)))
        if preview.changed_since and not force:
            self.say(f"nothing was changed; /undo {to or ''} --force overwrites your edits".replace("  ", " "),
                     error=True)
        elif preview.files:
            items = [(True, f"undo: put {len(preview.files)} file{'s' if len(preview.files) != 1 else ''} back"),
                     (False, "keep everything as it is")]
            self._open_picker(PickerDialog("undo", preview.what, items, selected=1),
                              lambda yes: self._apply_undo(task, to, force) if yes else self._kept())
        self.changed()

    async def _kept(self) -> None:
        self.say("nothing was changed")

    async def _apply_undo(self, task: str, to: int, force: bool) -> None:
        try:
            done = await self.backend.task_undo(task, to=to, apply=True, force=force)
        except RemoteError as exc:
            self.say(str(exc), error=True)
            return
        except IpcError as exc:
            self._lost(str(exc))
            return
        self.view.note_diff("\n".join(undo_lines(done)))
        self.say(f"undone: {len(done.files)} files put back" if done.applied else "nothing was changed: a file "
                 "changed meanwhile", error=not done.applied)
        self.changed()

    async def _show_mcp(self) -> None:
        """The MCP servers as yagentd runs them (the lines `yagent mcp` prints); the configuration's list when
        yagentd cannot be asked."""
        try:
            reply = await self.backend.mcp_status(str(self.project))
        except IpcError as exc:
            facts = self.facts()
            listed = "; ".join(facts.mcp_servers) or "none"
            self.say(f"cannot ask yagentd about its MCP servers ({exc}); configured: {listed}", error=True)
            return
        for line in status_text(reply):
            self.view.note(line)
        self.changed()

    def _show_skills(self) -> None:
        self.spawn("skills", self._skills_account())

    async def _skills_account(self) -> None:
        """The skills account agents of this project start with (what `yagent skills` prints), read off the loop:
        the directories are anyone's, and reading them takes what it takes."""
        facts = self.facts()
        path = self.options.config_path
        home = self.options.home or (path.parent.parent if path is not None else yagent_home())
        account = await asyncio.to_thread(load_skill_account, yagent_home=home, project_root=self.project,
                                          settings=facts.skills)
        self.view.note("\n".join(account_lines(account)))
        if facts.problem:
            self.view.note(facts.problem, error=True)
        self.changed()

    def _help(self) -> None:
        lines = [f"/{c.name}{' ' + c.argument if c.argument else ''} — {c.summary}" for c in COMMANDS]
        self.view.note("commands:\n" + "\n".join(lines))
        self.view.note("keys:\n" + "\n".join(f"{k} — {what}" for k, what in KEY_HELP))
        self.view.note("status line:\n" + "\n".join(f"{k} — {what}" for k, what in STATUS_LEGEND))

    def detach(self) -> None:
        self.exit_info = ExitInfo("detached", self.view.task, self.view.display_state)
        self.exit_app(self.exit_info)

    # -- view toggles --------------------------------------------------------------------------------

    def toggle_tools(self) -> None:
        self.tools_expanded = not self.tools_expanded
        self.changed()

    def toggle_plans(self) -> None:
        self.mode = "main" if self.mode == "plans" else "plans"
        self.plan_filter = None
        self.changed()

    def next_plan_filter(self) -> None:
        agents = []
        for p in self.view.plans:
            if p.agent not in agents:
                agents.append(p.agent)
        cycle: list[str | None] = [None, *agents]
        try:
            i = cycle.index(self.plan_filter)
        except ValueError:
            i = 0
        self.plan_filter = cycle[(i + 1) % len(cycle)]
        self.changed()

    def setup_finished(self, note: str) -> None:
        self.mode = "main"
        if not self.options.yolo:  # a yolo level given on the command line outranks the saved preference
            self.yolo = self.facts().yolo or YoloLevel.NONE
        if note:
            self.view.note(note)
        self.changed()

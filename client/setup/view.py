"""The wizard on screen, in either host: standalone (`yagent setup`) or inside the TUI (`/setup`).

The wizard only says it is done; the host decides what done means. Standalone, `run_setup` exits
its application; embedded, `on_done` gives the keyboard back to the conversation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.output import Output

from ..lines_control import LinesControl
from ..owned_tasks import OwnedTasks
from ..theme import STYLE
from .config_file import ConfigFile
from .probe import ProbeResult, probe_provider
from .render import render_wizard
from .wizard import Wizard

__all__ = ["ProbeFn", "SetupView", "build_setup_bindings", "run_setup"]

ProbeFn = Callable[[Mapping[str, Any], Mapping[str, str]], Awaitable[ProbeResult]]
Spawn = Callable[[str, Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]

# Named keys the wizard understands; printable characters arrive as ("text", char).
WIZARD_KEYS = ("up", "down", "left", "right", "tab", "s-tab", "enter", "escape", "backspace", "delete", "home",
               "end", "c-u", "c-s", "c-p", "c-o", "f2")


async def _default_probe(table: Mapping[str, Any], environ: Mapping[str, str]) -> ProbeResult:
    return await probe_provider(table, environ=environ)


class SetupView:
    def __init__(self, wizard: Wizard, *, on_done: Callable[[str], None], probe: ProbeFn | None,
                 spawn: Spawn, invalidate: Callable[[], None]) -> None:
        self.wizard = wizard
        self.on_done = on_done
        self.probe = probe or _default_probe
        self.spawn = spawn
        self.invalidate = invalidate
        self.window = Window(LinesControl(lambda w, h: render_wizard(self.wizard, w, h), focusable=True))
        self.container = self.window

    @classmethod
    def open(cls, path: Path, *, on_done: Callable[[str], None], probe: ProbeFn | None,
             environ: Mapping[str, str], spawn: Spawn, invalidate: Callable[[], None]) -> SetupView:
        return cls(Wizard(ConfigFile.load(path), dict(environ)), on_done=on_done, probe=probe, spawn=spawn,
                   invalidate=invalidate)

    def key(self, name: str, data: str = "") -> None:
        w = self.wizard
        w.key(name, data)
        if w.probe_requested:
            w.probe_requested = False
            target = w.probe_target
            if target is not None:
                self.spawn("setup-probe", self._probe(target[1]))
        if w.done:
            self.on_done(w.note)
        self.invalidate()

    async def _probe(self, table: Mapping[str, Any]) -> None:
        try:
            result = await self.probe(table, self.wizard.environ)
        except Exception as exc:  # the probe must report, never take the wizard down
            result = ProbeResult(False, f"the test itself failed: {type(exc).__name__}: {exc}")
        if self.wizard.screen == "probe" and self.wizard.probe_running:
            self.wizard.probe_finished(result)
        self.invalidate()

    def show_error(self, text: str) -> None:
        """A background task of the wizard failed: say so on its screen, and never leave a test spinning."""
        w = self.wizard
        w.probe_running = False
        w.message, w.message_error = text, True
        self.invalidate()


def build_setup_bindings(view: Callable[[], SetupView | None], active: Filter) -> KeyBindings:
    kb = KeyBindings()

    def forward(name: str) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            v = view()
            if v is not None:
                v.key(name)

        return handler

    for name in WIZARD_KEYS:
        kb.add(name, filter=active)(forward(name))

    @kb.add(Keys.Any, filter=active)
    def _char(event: KeyPressEvent) -> None:
        v = view()
        if v is not None:
            v.key("text", event.data)

    @kb.add(Keys.BracketedPaste, filter=active)
    def _paste(event: KeyPressEvent) -> None:
        v = view()
        if v is not None:
            v.key("paste", event.data)

    @kb.add("c-c", filter=active)
    def _interrupt(event: KeyPressEvent) -> None:
        v = view()
        if v is not None:
            v.wizard.done, v.wizard.outcome = True, "discarded"
            v.wizard.note = "setup interrupted; nothing was written"
            v.on_done(v.wizard.note)

    return kb


async def run_setup(path: Path, *, input: Input | None = None, output: Output | None = None,
                    probe: ProbeFn | None = None, environ: Mapping[str, str] | None = None,
                    wizard: Wizard | None = None) -> Wizard:
    """The standalone wizard: returns when it is done (written, discarded or quit). A caller may hand
    in the `wizard` to run (and watch its state); by default one is made for `path`."""
    env = dict(os.environ if environ is None else environ)
    holder: dict[str, SetupView] = {}
    tasks = OwnedTasks(lambda text: holder["view"].show_error(text))
    app: Application[None] = Application(full_screen=True, style=STYLE, input=input, output=output,
                                         mouse_support=False)

    def done(note: str) -> None:
        if app.is_running and not app.future.done():  # type: ignore[union-attr]
            app.exit()

    if wizard is None:
        wizard = Wizard(ConfigFile.load(path), env)
    view = SetupView(wizard, on_done=done, probe=probe, spawn=tasks.spawn, invalidate=app.invalidate)
    holder["view"] = view
    app.layout = Layout(view.container, focused_element=view.window)
    app.key_bindings = build_setup_bindings(lambda: holder.get("view"), Condition(lambda: True))
    try:
        await app.run_async()
    finally:
        await tasks.aclose()
    return view.wizard

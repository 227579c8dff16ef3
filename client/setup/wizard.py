"""The setup wizard as a state machine: screens, a queue of edits, and nothing written before the summary.

    broken ──f──▶ form            (a file that is not TOML: keep it aside, start fresh)
    providers ─a/e─▶ form ─ctrl+p─▶ presets
                     form ─ctrl+s─▶ probe ─enter─▶ providers
    providers ─n─▶ default (2+ providers) ─▶ prefs ─▶ summary ─w─▶ done
    any ─q─▶ quit? (only when edits are queued) ─▶ done

`key(name, data)` is the only input; printable characters arrive as ("text", ch) and go to the focused
field on the form, or act as commands on screens without a field. `done` says the wizard is over;
leaving is the host's decision (a standalone program exits, the TUI gives the keyboard back).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tomlkit.toml_document import TOMLDocument

from yagent.ipc.provider_config import validate_provider_table
from yagent.ipc.vocabulary import YoloLevel

from ..line_field import LineField
from .config_file import (
    ConfigFile,
    DeleteProvider,
    DiffLine,
    DropBom,
    Op,
    PutProvider,
    SetDefault,
    SetValue,
    StartFresh,
    WriteResult,
    _plain,
    _table,
    backup_path,
    check,
    default_of,
    provider_references,
    providers_of,
    referenced_names,
    render,
    write,
)
from .presets import PRESETS, Preset
from .probe import ProbeResult

__all__ = ["PREFERENCES", "REQUIRED_FIELDS", "FormField", "Hint", "Preference", "ProviderForm", "Wizard"]

REQUIRED_FIELDS = ("name", "api_base_url", "key", "model")


@dataclass(frozen=True, slots=True)
class Hint:
    label: str  # what the key cap shows
    what: str
    key: str  # the key name `Wizard.key` receives ("text:x" for a printable character)


@dataclass(frozen=True, slots=True)
class Preference:
    label: str
    section: tuple[str, ...]
    key: str
    choices: tuple[str, ...]
    default: str
    help: str


PREFERENCES: tuple[Preference, ...] = (
    Preference("language", ("agent",), "lang", ("English", "Chinese"), "English",
               "the language agents answer in"),
    Preference("yolo level", ("tui",), "yolo", tuple(YoloLevel), YoloLevel.NONE,
               "none: ask before risky steps · yolo: no questions inside the project · full: never ask"),
    Preference("routing mode", ("routing",), "mode", ("auto", "fixed"), "auto",
               "auto: pick a model tier per task · fixed: always the configured provider"),
    Preference("LLM timeout", ("llm",), "timeout", ("60s", "120s", "300s", "600s", "1200s"), "600s",
               "how long one model request may take, retries included"),
)


@dataclass
class FormField:
    key: str
    label: str
    field: LineField
    optional: bool = False


class ProviderForm:
    """The provider form: four required fields, four optional ones shown on request."""

    def __init__(self, editing: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        v = dict(values or {})
        self.editing = editing
        self.key_mode = "env" if v.get("api_key_env") and not v.get("api_key") else "key"
        self.key_value = LineField(str(v.get("api_key") or ""), secret=True)
        self.key_env = LineField(str(v.get("api_key_env") or ""))
        self.fields = [
            FormField("name", "name", LineField(editing or "")),
            FormField("api_base_url", "base URL", LineField(str(v.get("api_base_url") or ""))),
            FormField("key", "api key", self.key_value),
            FormField("model", "model", LineField(str(v.get("model") or ""))),
            FormField("api_format", "api format", LineField(str(v.get("api_format") or "")), True),
            FormField("context_window", "context window", LineField(_num(v.get("context_window"))), True),
            FormField("temperature", "temperature", LineField(_num(v.get("temperature"))), True),
            FormField("max_tokens", "max tokens", LineField(_num(v.get("max_tokens"))), True),
        ]
        self.show_optional = any(f.field.text for f in self.fields if f.optional)
        self.focus = 0
        self.problems: list[str] = []

    def visible(self) -> list[FormField]:
        return [f for f in self.fields if self.show_optional or not f.optional]

    def get(self, key: str) -> FormField:
        return next(f for f in self.fields if f.key == key)

    @property
    def focused(self) -> FormField:
        visible = self.visible()
        self.focus = min(self.focus, len(visible) - 1)
        return visible[self.focus]

    def toggle_key_mode(self) -> None:
        self.key_mode = "env" if self.key_mode == "key" else "key"
        f = self.get("key")
        f.field = self.key_env if self.key_mode == "env" else self.key_value
        f.label = "key env var" if self.key_mode == "env" else "api key"

    def apply_preset(self, preset: Preset) -> list[str]:
        """Fill empty fields only; returns the keys that were filled."""
        filled = []
        values = preset.values()
        for key, value in values.items():
            if key in ("api_key", "api_key_env"):
                continue
            f = self.get(key)
            if not f.field.text:
                f.field.set(value)
                filled.append(key)
                if f.optional:
                    self.show_optional = True
        if not self.key_value.text and not self.key_env.text:
            if "api_key_env" in values:
                self.key_env.set(values["api_key_env"])
                if self.key_mode != "env":
                    self.toggle_key_mode()
                filled.append("api_key_env")
            elif "api_key" in values:
                self.key_value.set(values["api_key"])
                if self.key_mode != "key":
                    self.toggle_key_mode()
                filled.append("api_key")
        return filled

    def table(self) -> tuple[str, dict[str, Any], list[str]]:
        """(name, provider table, problems the validator or the number parsing found)."""
        problems: list[str] = []
        name = self.get("name").field.text.strip()
        table: dict[str, Any] = {}
        for key in ("api_base_url", "model", "api_format"):
            value = self.get(key).field.text.strip()
            if value:
                table[key] = value
        if self.key_mode == "env":
            if self.key_env.text.strip():
                table["api_key_env"] = self.key_env.text.strip()
        elif self.key_value.text.strip():
            table["api_key"] = self.key_value.text.strip()
        for key, kind in (("context_window", int), ("max_tokens", int), ("temperature", float)):
            text = self.get(key).field.text.strip()
            if not text:
                continue
            try:
                table[key] = kind(text)
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                problems.append(f"{self.get(key).label} must be {what}, not {text!r}")
        if not name:
            problems.append("name is missing: give the provider a short name such as \"deepseek\"")
        problems.extend(validate_provider_table(name or "new", table))
        return name, table, problems


def _num(value: Any) -> str:
    return "" if value in (None, "", 0) else str(value)


@dataclass
class Wizard:
    config: ConfigFile
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    ops: list[Op] = field(default_factory=list)
    screen: str = "providers"
    selected: int = 0
    message: str = ""
    message_error: bool = False
    _said: int = 0  # messages said so far: a screen change without a new one clears the old one
    form: ProviderForm | None = None
    preset_index: int = 0
    probe_running: bool = False
    probe_requested: bool = False
    probe_result: ProbeResult | None = None
    probe_target: tuple[str, dict[str, Any]] | None = None
    prefs_visited: bool = False
    pref_row: int = 0
    pref_values: dict[str, str] = field(default_factory=dict)
    quit_from: str = ""
    done: bool = False
    outcome: str = ""  # written | quit | discarded
    note: str = ""
    result: WriteResult | None = None

    def __post_init__(self) -> None:
        if self.config.broken:
            self.screen = "broken"
            return
        if self.config.bom:
            self.ops.append(DropBom())
        if not providers_of(self.projected()):
            self.open_form(None)

    # -- the ledger --------------------------------------------------------------------------------

    def projected(self) -> TOMLDocument:
        return self.config.project(self.ops)

    def providers(self) -> dict[str, dict[str, Any]]:
        return providers_of(self.projected())

    def default_provider(self) -> str:
        return default_of(self.projected())

    def stages(self) -> list[tuple[str, bool]]:
        """Progress from facts (the queue and the file), not from which screen we are on."""
        providers = self.providers()
        default = self.default_provider()
        return [("PROVIDER", bool(providers)),
                ("DEFAULT", default in providers or len(providers) == 1),
                ("CHOICES", self.prefs_visited),
                ("REVIEW", self.done and self.outcome == "written")]

    def diff(self) -> list[DiffLine]:
        before = self.config.project([])
        lines = []
        for op in self.ops:
            lines.append(op.describe(before))
            before = op.apply(before)
        return lines

    def warnings(self) -> list[str]:
        if not self.ops:
            return []
        return check(render(self.config, self.ops), self.config.path, self.environ)

    def _say(self, text: str, error: bool = False) -> None:
        self.message, self.message_error = text, error
        self._said += 1

    # -- keys --------------------------------------------------------------------------------------

    def key(self, name: str, data: str = "") -> None:
        if self.done:
            return
        if name == "text" and self.screen != "form":
            name = f"text:{data[:1]}"
        screen, said = self.screen, self._said
        handler = getattr(self, f"_key_{self.screen}")
        handler(name, data)
        if self.screen != screen and self._said == said:
            self.message, self.message_error = "", False  # a message belongs to the screen it was said on

    def hints(self) -> list[Hint]:
        return getattr(self, f"_hints_{self.screen}")()

    def _quit(self) -> None:
        if self.ops:
            self.quit_from, self.screen = self.screen, "quit"
        else:
            self.done, self.outcome, self.note = True, "quit", "setup closed; nothing was changed"

    # broken ---------------------------------------------------------------------------------------

    def _hints_broken(self) -> list[Hint]:
        return [Hint("f", "start a fresh file", "text:f"), Hint("q", "quit", "text:q")]

    def _key_broken(self, name: str, data: str) -> None:
        if name == "text:f":
            self.ops.append(StartFresh(backup_path(self.config.path)))
            self.open_form(None)
            self._say("starting a fresh file; the broken one is kept when you write")
        elif name in ("text:q", "escape"):
            self.done, self.outcome, self.note = True, "quit", "setup closed; nothing was changed"

    # providers ------------------------------------------------------------------------------------

    def _hints_providers(self) -> list[Hint]:
        names = list(self.providers())
        hints = []
        if len(names) > 1:
            hints.append(Hint("↑↓", "move", "down"))
        hints.append(Hint("a", "add", "text:a"))
        if names:
            hints += [Hint("e", "edit", "text:e"), Hint("d", "delete", "text:d"), Hint("n", "next", "text:n")]
        hints.append(Hint("q", "quit", "text:q"))
        return hints

    def _key_providers(self, name: str, data: str) -> None:
        names = list(self.providers())
        if name in ("up", "down") and names:
            self.selected = (self.selected + (1 if name == "down" else -1)) % len(names)
        elif name == "text:a":
            self.open_form(None)
        elif name in ("text:e", "enter") and names:
            chosen = names[min(self.selected, len(names) - 1)]
            self.open_form(chosen)
        elif name == "text:d" and names:
            self._delete(names[min(self.selected, len(names) - 1)])
        elif name == "text:n" and names:
            self.screen = "default" if len(names) > 1 else "prefs"
            if self.screen == "default":
                current = self.default_provider()
                self.selected = names.index(current) if current in names else 0
            else:
                self._enter_prefs()
        elif name in ("text:q", "escape"):
            self._quit()

    def _delete(self, name: str) -> None:
        raw = _plain(self.projected())
        if name in referenced_names(self.projected()):
            where = provider_references(raw).get(name, ["another setting"])
            self._say(f"{name} cannot be deleted: {', '.join(where)} still points at it — change that first",
                      error=True)
            return
        added_here = [op for op in self.ops if isinstance(op, PutProvider) and op.name == name and op.replaces is None]
        if added_here:
            self.ops = [op for op in self.ops if not (isinstance(op, PutProvider) and op.name == name)]
        else:
            self.ops.append(DeleteProvider(name))
        self.selected = max(0, self.selected - 1)
        self._say(f"{name} will be deleted when you write the file")

    # form -----------------------------------------------------------------------------------------

    def open_form(self, name: str | None) -> None:
        values = self.providers().get(name, {}) if name else {}
        self.form = ProviderForm(name, values)
        self.screen = "form"
        self._say("")

    def _hints_form(self) -> list[Hint]:
        assert self.form is not None
        more = "fewer" if self.form.show_optional else "more"
        return [Hint("tab", "next", "tab"), Hint("ctrl+s", "save+test", "c-s"), Hint("esc", "cancel", "escape"),
                Hint("ctrl+p", "presets", "c-p"), Hint("f2", "key/env var", "f2"), Hint("ctrl+o", more, "c-o")]

    def _key_form(self, name: str, data: str) -> None:
        form = self.form
        assert form is not None
        visible = form.visible()
        f = form.focused.field
        if name in ("tab", "down"):
            form.focus = (form.focus + 1) % len(visible)
        elif name in ("s-tab", "up"):
            form.focus = (form.focus - 1) % len(visible)
        elif name == "enter":
            if form.focus == len(visible) - 1:
                self._save_form()
            else:
                form.focus += 1
        elif name == "c-s":
            self._save_form()
        elif name == "c-p":
            self.screen, self.preset_index = "presets", 0
        elif name == "c-o":
            form.show_optional = not form.show_optional
            form.focus = min(form.focus, len(form.visible()) - 1)
        elif name == "f2":
            form.toggle_key_mode()
        elif name == "escape":
            self.form = None
            self.screen = "providers" if self.providers() or not self.config.broken else "broken"
            self._say("form closed; nothing queued")
        elif name in ("text", "paste"):
            f.insert(data)
        else:
            actions = {"backspace": f.backspace, "delete": f.delete, "left": f.left, "right": f.right,
                       "home": f.home, "end": f.end, "c-u": f.clear}
            if name in actions:
                actions[name]()

    def _save_form(self) -> None:
        form = self.form
        assert form is not None
        name, table, problems = form.table()
        existing = self.providers()
        if name and name in existing and name != form.editing:
            problems.insert(0, f"a provider named {name} exists already: pick another name, or edit that one")
        if form.editing and name != form.editing and form.editing in referenced_names(self.projected()):
            problems.insert(0, f"{form.editing} is in use, so it cannot be renamed: add a new provider instead")
        form.problems = problems
        if problems:
            self._say(problems[0], error=True)
            return
        self.probe_target = (name, table)
        self.screen = "probe"
        self._start_probe()

    def _start_probe(self) -> None:
        self.probe_result = None
        self.probe_running = True
        self.probe_requested = True
        self._say("")

    def probe_finished(self, result: ProbeResult) -> None:
        self.probe_running = False
        self.probe_result = result  # the probe screen shows it; the message line would say it a second time

    # presets --------------------------------------------------------------------------------------

    def _hints_presets(self) -> list[Hint]:
        return [Hint("↑↓", "move", "down"), Hint("enter", "fill empty fields", "enter"), Hint("esc", "back", "escape")]

    def _key_presets(self, name: str, data: str) -> None:
        if name in ("up", "down"):
            self.preset_index = (self.preset_index + (1 if name == "down" else -1)) % len(PRESETS)
        elif name == "enter":
            assert self.form is not None
            preset = PRESETS[self.preset_index]
            filled = self.form.apply_preset(preset)
            self.screen = "form"
            self._say(f"{preset.label}: filled {', '.join(filled)}" if filled else
                      f"{preset.label}: every field it knows was already filled; nothing changed")
        elif name == "escape":
            self.screen = "form"

    # probe ----------------------------------------------------------------------------------------

    def _hints_probe(self) -> list[Hint]:
        if self.probe_running:
            return [Hint("esc", "back to the form", "escape")]
        keep = "keep it" if self.probe_result is not None and self.probe_result.ok else "keep anyway"
        return [Hint("enter", keep, "enter"), Hint("r", "test again", "text:r"), Hint("e", "edit", "text:e")]

    def _key_probe(self, name: str, data: str) -> None:
        if name == "escape" or (name == "text:e" and not self.probe_running):
            self.probe_running = False
            self.screen = "form"
        elif self.probe_running:
            return
        elif name == "text:r":
            self._start_probe()
        elif name == "enter":
            self._queue_provider()

    def _queue_provider(self) -> None:
        assert self.form is not None and self.probe_target is not None
        name, table = self.probe_target
        fields = {k: table.get(k) for k in ("api_base_url", "api_key", "api_key_env", "model", "api_format",
                                            "context_window", "temperature", "max_tokens")}
        replaces = self.form.editing
        earlier = next((op for op in self.ops if isinstance(op, PutProvider) and op.replaces is None
                        and op.name == replaces), None) if replaces else None
        if earlier is not None:
            earlier.name, earlier.fields = name, fields  # still an addition: fold the edit into it
        else:
            self.ops.append(PutProvider(name, fields, replaces))
        self.form = None
        self.screen = "providers"
        names = list(self.providers())
        self.selected = names.index(name) if name in names else 0
        self._say(f"{name} queued; n goes on to the default provider and preferences")

    # default provider -----------------------------------------------------------------------------

    def _hints_default(self) -> list[Hint]:
        return [Hint("↑↓", "move", "down"), Hint("enter", "choose", "enter"), Hint("esc", "back", "escape")]

    def _key_default(self, name: str, data: str) -> None:
        names = list(self.providers())
        if name in ("up", "down") and names:
            self.selected = (self.selected + (1 if name == "down" else -1)) % len(names)
        elif name == "enter" and names:
            chosen = names[min(self.selected, len(names) - 1)]
            self.ops = [op for op in self.ops if not isinstance(op, SetDefault)]
            if chosen != default_of(self.config.project([])):
                self.ops.append(SetDefault(chosen))
            self._enter_prefs()
        elif name == "escape":
            self.screen = "providers"

    # preferences ----------------------------------------------------------------------------------

    def current_pref(self, pref: Preference) -> str:
        value = _table(self.config.project([]), *pref.section, pref.key)
        return str(_plain(value)) if value is not None else pref.default

    def pref_choices(self, pref: Preference) -> tuple[str, ...]:
        current = self.current_pref(pref)
        return pref.choices if current in pref.choices else (current, *pref.choices)

    def _enter_prefs(self) -> None:
        self.screen = "prefs"
        for pref in PREFERENCES:
            self.pref_values.setdefault(pref.key, self.current_pref(pref))

    def _hints_prefs(self) -> list[Hint]:
        return [Hint("↑↓", "setting", "down"), Hint("←→", "change", "right"), Hint("enter", "review", "enter"),
                Hint("esc", "back", "escape")]

    def _key_prefs(self, name: str, data: str) -> None:
        pref = PREFERENCES[self.pref_row]
        if name in ("up", "down"):
            self.pref_row = (self.pref_row + (1 if name == "down" else -1)) % len(PREFERENCES)
        elif name in ("left", "right", "text: "):
            choices = self.pref_choices(pref)
            value = self.pref_values.get(pref.key, self.current_pref(pref))
            i = choices.index(value) if value in choices else 0
            self.pref_values[pref.key] = choices[(i + (-1 if name == "left" else 1)) % len(choices)]
        elif name == "enter":
            self.ops = [op for op in self.ops if not isinstance(op, SetValue)]
            for p in PREFERENCES:
                value = self.pref_values.get(p.key, self.current_pref(p))
                if value != self.current_pref(p):
                    self.ops.append(SetValue(p.section, p.key, value))
            self.prefs_visited = True
            self.screen = "summary"
            self.selected = 0
        elif name == "escape":
            self.screen = "providers"

    # summary --------------------------------------------------------------------------------------

    def _hints_summary(self) -> list[Hint]:
        write_what = "write the file" if self.ops else "close (nothing to write)"
        return [Hint("w", write_what, "text:w"), Hint("b", "back", "text:b"), Hint("q", "quit without writing",
                                                                                   "text:q")]

    def _key_summary(self, name: str, data: str) -> None:
        if name == "text:w":  # not enter: a repeated enter from the previous screen must not write the file
            if not self.ops:
                self.done, self.outcome, self.note = True, "quit", "nothing to change; the file was left as it was"
                return
            result = write(self.config, self.ops, self.environ)
            self.result = result
            if not result.ok:
                self._say(result.message, error=True)
                return
            extra = f" (still to fix: {'; '.join(result.warnings)})" if result.warnings else ""
            self.done, self.outcome = True, "written"
            self.note = (f"{result.message}{extra}. Work already running keeps its settings; the next "
                         "message you send uses the new ones")
        elif name in ("text:b", "escape"):
            self.screen = "prefs"
        elif name == "text:q":
            self._quit()

    # quit confirmation ----------------------------------------------------------------------------

    def _hints_quit(self) -> list[Hint]:
        return [Hint("y", "discard and quit", "text:y"), Hint("n", "stay", "text:n")]

    def _key_quit(self, name: str, data: str) -> None:
        if name == "text:y":
            self.done, self.outcome = True, "discarded"
            self.note = f"setup closed; {len(self.ops)} queued change(s) discarded, nothing was written"
        elif name in ("text:n", "escape"):
            self.screen = self.quit_from or "providers"


def wizard_for(path: Path, environ: Mapping[str, str] | None = None) -> Wizard:
    return Wizard(ConfigFile.load(path), dict(os.environ if environ is None else environ))

"""The setup wizard: its form agrees with the validator, its key hints are real, its hosts exit right."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input

from tests.client.doubles import SizedOutput
from tests.client.tui_harness import until
from tests.daemon_harness import arun
from tests.fake_provider import FakeProvider, Step
from yagent.client.setup.config_file import ConfigFile
from yagent.client.setup.presets import PRESETS
from yagent.client.setup.probe import PROBE_SYSTEM_PROMPT, ProbeResult
from yagent.client.setup.render import render_wizard
from yagent.client.setup.view import run_setup
from yagent.client.setup.wizard import REQUIRED_FIELDS, ProviderForm, Wizard
from yagent.ipc.config import load_settings

TWO = """[global.llm]
use_provider = "deep"
[global.llm.providers.deep]
api_base_url = "https://api.deepseek.com/v1"
api_key = "sk-1"
model = "deepseek-chat"
[global.llm.providers.spare]
api_base_url = "http://localhost:8000/v1"
api_key = "none"
model = "qwen"
"""

FIELD_WORDS = {"name": "name", "api_base_url": "api_base_url", "key": "credentials", "model": "model"}


def test_required_fields_are_exactly_what_the_validator_demands() -> None:
    _name, _table, problems = ProviderForm().table()
    text = " | ".join(problems)
    for key in REQUIRED_FIELDS:
        assert FIELD_WORDS[key] in text, f"the validator does not ask for required field {key}"
    assert len(problems) == len(REQUIRED_FIELDS), problems
    form = ProviderForm()
    for key, value in (("name", "x"), ("api_base_url", "http://h/v1"), ("model", "m")):
        form.get(key).field.set(value)
    form.key_value.set("k")
    assert form.table()[2] == []  # the four required fields, and nothing else, make a valid provider


def test_presets_fill_only_empty_fields() -> None:
    form = ProviderForm()
    form.get("model").field.set("my-own-model")
    deepseek = next(p for p in PRESETS if p.name == "deepseek")
    filled = form.apply_preset(deepseek)
    assert form.get("model").field.text == "my-own-model"
    assert form.get("api_base_url").field.text == "https://api.deepseek.com/v1"
    assert form.key_mode == "env" and form.key_env.text == "DEEPSEEK_API_KEY"
    assert "model" not in filled and "api_base_url" in filled
    form.key_env.clear()
    form.key_value.set("typed-key")
    form.apply_preset(deepseek)
    assert form.key_env.text == "" and form.key_value.text == "typed-key"  # a key already typed wins


def test_bare_letters_go_into_the_focused_field(tmp_path: Path) -> None:
    w = Wizard(ConfigFile.load(tmp_path / "none.toml"), {})
    assert w.screen == "form"  # fresh install: straight to the form
    w.key("tab")
    for ch in "https://ops.example/v1":
        w.key("text", ch)
    assert w.form is not None and w.form.get("api_base_url").field.text == "https://ops.example/v1"
    assert w.screen == "form"  # typing "p" and "o" did not open presets or optional fields
    w.key("c-p")
    assert w.screen == "presets"


def _snapshot(w: Wizard) -> tuple:
    form = w.form
    form_state = None if form is None else (
        tuple(f.field.text for f in form.fields), form.focus, form.show_optional, form.key_mode,
        tuple(form.problems))
    return (w.screen, w.selected, w.preset_index, w.pref_row, tuple(sorted(w.pref_values.items())), form_state,
            tuple(repr(op) for op in w.ops), w.done, w.probe_requested, w.probe_running)


def _states(tmp_path: Path) -> dict[str, Wizard]:
    path = tmp_path / "config.toml"
    path.write_text(TWO)
    states = {}
    w = Wizard(ConfigFile.load(path), {})
    w.key("down")  # on "spare", which nothing references
    states["providers"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "a")
    states["form"] = w
    w = copy.deepcopy(states["form"])
    w.key("c-p")
    states["presets"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "e")
    w.key("c-s")
    states["probe-running"] = w
    w = copy.deepcopy(w)
    w.probe_finished(ProbeResult(True, "ok"))
    states["probe-done"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "n")
    states["default"] = w
    w = copy.deepcopy(w)
    w.key("enter")
    states["prefs"] = w
    w = copy.deepcopy(w)
    w.key("right")
    w.key("enter")
    states["summary"] = w
    w = copy.deepcopy(states["providers"])
    w.key("text", "d")
    w.key("text", "q")
    states["quit"] = w
    broken = tmp_path / "broken.toml"
    broken.write_text("[x")
    states["broken"] = Wizard(ConfigFile.load(broken), {})
    return states


def test_a_message_stays_on_the_screen_it_was_said_on(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "a")
    w.key("escape")  # closes the form, saying so on the providers screen
    assert w.screen == "providers" and w.message
    w.key("text", "n")
    assert w.screen in ("default", "prefs") and w.message == ""


def test_the_default_picker_lines_up_its_models(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "n")
    assert w.screen == "default"
    shown = ["".join(t for _s, t in line) for line in render_wizard(w, 80, 20)]
    columns = {line.index(model) for line in shown for model in ("deepseek-chat", "qwen") if model in line}
    assert len(columns) == 1, shown


def test_every_key_hint_changes_something(tmp_path: Path) -> None:
    states = _states(tmp_path)
    seen_screens = set()
    for name, w in states.items():
        seen_screens.add(w.screen)
        for hint in w.hints():
            trial = copy.deepcopy(w)
            before = _snapshot(trial)
            if hint.key.startswith("text:"):
                trial.key("text", hint.key[5:])
            else:
                trial.key(hint.key)
            assert _snapshot(trial) != before, f"{name}: hint {hint.label} ({hint.what}) did nothing"
    assert seen_screens == {"providers", "form", "presets", "probe", "default", "prefs", "summary", "quit", "broken"}


def test_the_standalone_wizard_exits_on_q(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)

    async def go() -> Wizard:
        with create_pipe_input() as pipe:
            pipe.send_text("q")
            return await run_setup(path, input=pipe, output=SizedOutput(80, 24), environ={})

    w = arun(go(), timeout=10)
    assert w.done and w.outcome == "quit"
    assert path.read_text() == TWO


def test_a_first_run_through_the_real_program_probes_and_writes(tmp_path: Path) -> None:
    path = tmp_path / "home" / "config" / "config.toml"

    async def go(fake: FakeProvider) -> Wizard:
        w = Wizard(ConfigFile.load(path), {})
        with create_pipe_input() as pipe:
            runner = asyncio.get_running_loop().create_task(
                run_setup(path, wizard=w, input=pipe, output=SizedOutput(100, 30)))
            assert w.screen == "form"  # a fresh install starts on the provider form
            for text in ("fake", fake.openai_base_url, "fake-key", "probe-model"):
                pipe.send_text(text + "\t")
            pipe.send_text("\x13")  # ctrl+s: save and test
            await until(lambda: w.probe_result is not None, "the probe result", timeout=10)
            assert w.probe_result.ok, w.probe_result
            for key, screen in (("\r", "providers"), ("n", "prefs"), ("\r", "summary")):
                pipe.send_text(key)
                await until(lambda screen=screen: w.screen == screen, f"the {screen} screen")
            assert not path.exists()  # nothing is written before the summary
            pipe.send_text("w")
            return await asyncio.wait_for(runner, 10)

    with FakeProvider() as fake:
        fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(text="p")])
        w = arun(go(fake), timeout=30)
        fake.assert_no_problems()
        assert fake.requests[0].body["messages"][0]["content"] == PROBE_SYSTEM_PROMPT
    assert w.done and w.outcome == "written", w.message
    table = load_settings(path, {}).table
    assert table["global"]["llm"]["providers"]["fake"] == {"api_base_url": fake.openai_base_url,
                                                            "api_key": "fake-key", "model": "probe-model"}


@pytest.mark.parametrize("width", [40, 80])
def test_the_wizard_program_draws_at_small_sizes(tmp_path: Path, width: int) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)

    async def go() -> Wizard:
        with create_pipe_input() as pipe:
            pipe.send_text("\x1b[Bq")  # down, then q
            return await run_setup(path, input=pipe, output=SizedOutput(width, 12), environ={})

    w = arun(go(), timeout=10)
    assert w.done and w.selected == 1


@pytest.mark.parametrize("ok", [True, False])
def test_the_connectivity_result_is_shown_once(tmp_path: Path, ok: bool) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "e")
    w.key("c-s")
    assert w.screen == "probe"
    w.probe_finished(ProbeResult(ok, "the endpoint answered in 0.2s" if ok else "connection refused"))
    screen = ["".join(text for _style, text in line) for line in render_wizard(w, 100, 30)]
    said = "the endpoint answered in 0.2s" if ok else "connection refused"
    assert sum(said in line for line in screen) == 1, screen


class _WizardWithABug(Wizard):
    def probe_finished(self, result: ProbeResult) -> None:
        raise RuntimeError("a bug in the wizard")


def test_a_background_task_of_the_standalone_wizard_that_fails_is_shown_on_its_screen(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TWO)
    unread: list[dict] = []

    async def probe(table, environ) -> ProbeResult:
        return ProbeResult(True, "ok")

    async def go() -> Wizard:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unread.append(context))
        w = _WizardWithABug(ConfigFile.load(path), {})
        with create_pipe_input() as pipe:
            runner = asyncio.get_running_loop().create_task(
                run_setup(path, wizard=w, probe=probe, input=pipe, output=SizedOutput(100, 30)))
            pipe.send_text("e")  # edit the selected provider
            await until(lambda: w.screen == "form", "the form")
            pipe.send_text("\x13")  # ctrl+s: save and test, in a background task
            await until(lambda: w.message_error and "a bug in the wizard" in w.message, "the task's error on screen")
            assert not w.probe_running  # the test screen does not spin for ever
            pipe.send_text("\x03")
            async with asyncio.timeout(10):
                return await runner

    w = arun(go(), timeout=20)
    assert w.message == "internal error in setup-probe: RuntimeError: a bug in the wizard"
    assert unread == []
    assert path.read_text() == TWO

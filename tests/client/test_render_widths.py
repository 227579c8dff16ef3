"""Every surface renders lines of exactly the terminal's width and never more rows than it has.

Widths 40..240 and heights 12..80, CJK text and unbreakable words included; widths are measured
with prompt_toolkit's own `get_cwidth`, the measure its screen uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.utils import get_cwidth

from tests.client.scenes import T0, rich_view
from yagent.client.setup.config_file import ConfigFile
from yagent.client.setup.probe import ProbeResult
from yagent.client.setup.render import render_wizard
from yagent.client.setup.wizard import Wizard
from yagent.client.tui.dialogs import PickerDialog, QuestionDialog
from yagent.client.tui.render import LogRenderer, render_plans, render_status, render_title, status_height
from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import QuestionKind

WIDTHS = (40, 41, 57, 80, 99, 120, 161, 200, 239, 240)
HEIGHTS = (12, 13, 18, 24, 40, 80)


def width_of(line) -> int:
    return sum(get_cwidth(t) for _s, t in line)


def assert_exact(lines, width: int, what: str) -> None:
    widths = [width_of(line) for line in lines]
    assert widths == [width] * len(lines), f"{what}: line widths {sorted(set(widths))} at width {width}"


@pytest.mark.parametrize("width", WIDTHS)
def test_log_title_and_status_are_exactly_as_wide_as_the_terminal(width: int) -> None:
    view = rich_view()
    renderer = LogRenderer()
    for expanded in (False, True):
        for height in HEIGHTS:
            lines, _total, _top = renderer.window(view, width, height, expanded)
            assert len(lines) <= height
            assert_exact(lines, width, f"log expanded={expanded} height={height}")
        everything = renderer.window(view, width, 10_000, expanded)[0]
        assert_exact(everything, width, "whole log")
    assert_exact([render_title(view, width, [("ctrl+q", "detach"), ("ctrl+o", "tools"), ("/help", "help")])],
                 width, "title")
    for rows in HEIGHTS:
        for below in (0, 12345):
            status = render_status(view, width, rows, T0 + 500, model_override="本地模型", lines_below=below)
            assert len(status) == status_height(view, rows)
            assert_exact(status, width, f"status rows={rows} lines_below={below}")


def test_status_line_carries_no_key_caps() -> None:
    view = rich_view()
    for width in WIDTHS:
        text = "".join(t for line in render_status(view, width, 40, T0, lines_below=7) for _s, t in line).lower()
        assert "ctrl" not in text and "esc" not in text and "f2" not in text


def test_status_grows_a_runs_tree_only_when_rows_allow() -> None:
    view = rich_view()
    assert status_height(view, 12) == 1
    tall = render_status(view, 100, 40, T0)
    assert len(tall) == 4
    assert "└ coding done" in "".join(t for _s, t in tall[2])


QUESTIONS = [
    Question(request_id="1", kind="confirm", prompt="继续吗? " + "really " * 30, agent="director"),
    Question(request_id="2", kind="select", prompt="pick one", options=[f"选项 {i} " + "y" * 60 for i in range(15)],
             agent="coding"),
    Question(request_id="3", kind="input", prompt="名字?", default="默认值" * 30, agent="chat"),
    Question(request_id="4", kind=QuestionKind.AUTHORIZE, prompt="run `rm -rf build`",
             details={"tool": "run_bash", "outside_paths": ["/etc/" + "p" * 300]}, agent="coding"),
]


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.kind)
def test_dialogs_fit_every_size(question: Question) -> None:
    for width in WIDTHS:
        for max_height in (3, 5, 7, 12, 30):
            dialog = QuestionDialog(question, 2, 3)
            lines = dialog.render(width, max_height)
            assert len(lines) <= max_height
            assert_exact(lines, width, f"{question.kind} dialog at {width}x{max_height}")
            text = "".join(t for _s, t in lines[-1])
            assert text.startswith("╰") and text.endswith("╯"), "the bottom border (with the key hints) is kept"


def test_picker_fits_every_size() -> None:
    items = [(f"t{i}", f"t{i} interrupted 3h 把 README 翻译成英文 " + "w" * 80) for i in range(30)]
    for width in WIDTHS:
        for max_height in (3, 6, 20):
            lines = PickerDialog("resume a task", "pick", items, selected=17).render(width, max_height)
            assert len(lines) <= max_height
            assert_exact(lines, width, "picker")
            assert any("t17" in "".join(t for _s, t in line) for line in lines), "the selection stays visible"


def test_plans_view_is_exactly_the_screen() -> None:
    view = rich_view()
    for width in WIDTHS:
        for height in HEIGHTS:
            for agent in (None, "coding", "nobody"):
                lines = render_plans(view.plans, width, height, agent)
                assert len(lines) == height
                assert_exact(lines, width, f"plans {agent}")


CONFIG = """# my settings
[global.llm]
use_provider = "deep"
[global.llm.providers.deep]
api_base_url = "https://api.deepseek.com/v1"
api_key_env = "YAGENT_TEST_UNSET_VAR"
model = "deepseek-chat"
[global.llm.providers.local]
api_base_url = "http://localhost:8000/v1/""" + "very-long-path-" * 10 + """"
api_key = "none"
model = "本地模型-qwen"
"""


def wizards(tmp_path: Path) -> dict[str, Wizard]:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    out: dict[str, Wizard] = {}
    w = Wizard(ConfigFile.load(path), {})
    out["providers"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "a")
    w.key("tab")
    w.key("text", "not a url " * 10)
    w.key("c-o")
    w.key("c-s")
    out["form-with-problems"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "a")
    w.key("c-p")
    out["presets"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.open_form(None)
    for _key, text in (("name", "n"), ("base", "http://x/v1"), ("key", "k"), ("model", "m")):
        w.key("text", text)
        w.key("tab")
    w.key("c-s")
    out["probe-running"] = w
    w2 = Wizard(ConfigFile.load(path), {})
    w2.__dict__.update({k: v for k, v in w.__dict__.items() if k != "config"})
    w2.probe_finished(ProbeResult(False, "the endpoint refused the key (HTTP 401): " + "长" * 60, 401, 12,
                                  detail="invalid key " + "k" * 200))
    out["probe-failed"] = w2
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "n")
    out["default"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "n")
    w.key("enter")
    w.key("right")
    out["prefs"] = w
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "d")  # refused: deep is the default
    w.key("down")
    w.key("text", "d")
    w.key("text", "n")
    for _ in range(3):
        w.key("down")
    w.key("right")
    w.key("enter")
    out["summary"] = w
    broken = tmp_path / "broken.toml"
    broken.write_text("[agent\nx = ")
    out["broken"] = Wizard(ConfigFile.load(broken), {})
    w = Wizard(ConfigFile.load(path), {})
    w.key("down")
    w.key("text", "d")
    w.key("text", "q")
    out["quit"] = w
    return out


def test_wizard_screens_fit_every_size(tmp_path: Path) -> None:
    screens = wizards(tmp_path)
    assert {w.screen for w in screens.values()} == {"providers", "form", "presets", "probe", "default", "prefs",
                                                     "summary", "broken", "quit"}
    for name, w in screens.items():
        for width in WIDTHS:
            for height in HEIGHTS:
                lines = render_wizard(w, width, height)
                assert len(lines) == height, f"{name} at {width}x{height}"
                assert_exact(lines, width, f"{name} at {width}x{height}")

"""The full-screen application driven through prompt_toolkit's pipe input, against an in-memory daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.client.doubles import FakeBackend
from tests.client.tui_harness import running_tui, screen_rows, until
from tests.daemon_harness import arun
from yagent.client.tui.commands import COMMANDS
from yagent.client.tui.dialogs import PickerDialog, QuestionDialog
from yagent.ipc.messages import TurnSummary
from yagent.ipc.vocabulary import EventType, QuestionKind

ALT_ENTER = "\x1b\r"
CTRL_O, CTRL_Q, CTRL_R, CTRL_T, F2, TAB = "\x0f", "\x11", "\x12", "\x14", "\x1bOQ", "\t"


def backend_with_task(state: str = "running") -> FakeBackend:
    b = FakeBackend()
    b.add_task("t1", state=state, title="first task")
    b.emit("t1", EventType.TURN_STARTED, {"turn": 1, "text": "hello", "agent": "director"}, run="r1")
    return b


def backend_with_long_reply(state: str = "running") -> FakeBackend:
    """A task whose reply is 60 lines, `line-00` … `line-59` (seq 2-61): more than one screen holds."""
    b = backend_with_task(state)
    for i in range(60):
        b.emit("t1", EventType.AI_CHUNK, {"text": f"line-{i:02d}\n"})
    return b


def entries(tui, kind: str) -> list[str]:
    return [e.text for e in tui.c.view.entries if e.kind == kind]


def test_enter_sends_and_alt_enter_inserts_a_newline() -> None:
    async def go() -> None:
        b = backend_with_task(state="done")
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("line one" + ALT_ENTER + "line two")
            await until(lambda: tui.buffer.text == "line one\nline two", "a two-line message in the editor")
            assert b.submitted == []
            pipe.send_text("\r")
            await until(lambda: b.submitted, "the submit")
            assert b.submitted[0]["text"] == "line one\nline two" and b.submitted[0]["task"] == "t1"
            assert tui.buffer.text == ""

    arun(go())


def test_history_recalls_earlier_messages() -> None:
    async def go() -> None:
        b = backend_with_task(state="done")
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("first message\r")
            await until(lambda: b.submitted, "the submit")
            # prompt_toolkit reloads the history in the background after each send; press up until it has.
            for _attempt in range(50):
                pipe.send_text("\x1b[A")  # up arrow on an empty editor
                try:
                    await until(lambda: tui.buffer.text == "first message", "the history entry", timeout=0.1)
                    break
                except AssertionError:
                    continue
            assert tui.buffer.text == "first message"

    arun(go())


def test_an_unknown_command_is_never_sent_as_text() -> None:
    async def go() -> None:
        b = backend_with_task(state="done")
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/pauze\r")
            await until(lambda: tui.c.message and "unknown command /pauze" in tui.c.message[0], "the error")
            assert tui.c.message[1] is True
            # The way out (`//`) is on the screen even at 60 columns, where the list of commands is cut short.
            message_row = next(row for row in screen_rows(tui, 60, 24) if "unknown command" in row)
            assert "// sends" in message_row
            assert b.submitted == [] and b.controls == []
            assert tui.buffer.text == "/pauze"  # kept, so it can be corrected
            tui.buffer.reset()
            pipe.send_text("//etc/hosts looks odd\r")
            await until(lambda: b.submitted, "the escaped text")
            assert b.submitted[0]["text"] == "/etc/hosts looks odd"

    arun(go())


def test_commands_complete_with_tab_and_run() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/pa")
            await until(lambda: tui.buffer.complete_state is not None, "completions for /pa")
            names = [c.text for c in tui.buffer.complete_state.completions]
            assert names == ["/pause"]
            pipe.send_text(TAB)
            await until(lambda: tui.buffer.text == "/pause", "the completed command")
            pipe.send_text("\r")
            await until(lambda: b.controls == [("t1", "pause")], "the pause request")
            assert b.submitted == []

    arun(go())


def test_pause_continue_cancel_reach_the_daemon() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (_tui, pipe):
            for name in ("pause", "continue", "cancel"):
                pipe.send_text(f"/{name}\r")
                await until(lambda name=name: ("t1", name) in b.controls, f"/{name}")
            assert [a for _t, a in b.controls] == ["pause", "continue", "cancel"]

    arun(go())


def test_a_control_acknowledgement_leaves_once_the_task_state_moves_on() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/pause\r")
            await until(lambda: tui.c.message and "pausing" in tui.c.message[0], "the acknowledgement")
            b.emit("t1", EventType.TASK_PAUSED, {})
            await until(lambda: tui.c.message is None, "the stale 'pausing' line gone once paused")
            pipe.send_text("/cancel\r")
            await until(lambda: tui.c.message and "cancelling" in tui.c.message[0], "the acknowledgement")
            b.emit("t1", EventType.TURN_FINISHED, {"turn": 1, "status": "cancelled", "state": "cancelled"})
            await until(lambda: tui.c.message is None, "the stale 'cancelling' line gone once cancelled")
            assert not any("cancelling" in row for row in screen_rows(tui, 80, 24))
            b.busy = True  # an error stays: it is about something the user must still do
            pipe.send_text("more\r")
            await until(lambda: tui.c.message and tui.c.message[1], "the busy error")
            b.emit("t1", EventType.TURN_STARTED, {"turn": 2, "text": "elsewhere", "agent": "director"}, run="r2")
            await until(lambda: tui.c.view.turn == 2, "the next turn")
            assert tui.c.message and "not sent" in tui.c.message[0]

    arun(go())


def test_busy_task_keeps_the_message_and_says_so() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.busy = True
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("do more\r")
            await until(lambda: tui.c.message and "not sent" in tui.c.message[0], "the busy notice")
            assert "/cancel" in tui.c.message[0]
            await until(lambda: tui.buffer.text == "do more", "the message back in the editor")

    arun(go())


def test_every_listed_command_is_handled_and_help_lists_them_all() -> None:
    async def go() -> None:
        b = backend_with_task(state="done")
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/help\r")
            await until(lambda: any("commands:" in t for t in entries(tui, "notice")), "the help text")
            text = next(t for t in entries(tui, "notice") if t.startswith("commands:"))
            for cmd in COMMANDS:
                assert f"/{cmd.name}" in text
            pipe.send_text("/mcp\r")
            await until(lambda: any("no MCP servers" in t for t in entries(tui, "notice")), "/mcp")
            pipe.send_text("/skills\r")
            await until(lambda: any("skills for the Director" in t for t in entries(tui, "notice")), "/skills")
            pipe.send_text("/blueprint\r")
            await until(lambda: any("3 modules, 9 source files" in t for t in entries(tui, "notice")), "/blueprint")

    arun(go())


def test_resume_picks_an_earlier_task_and_the_next_message_continues_it() -> None:
    async def go() -> None:
        b = backend_with_task(state="done")
        b.add_task("t0", state="interrupted", title="older task", updated=10.0)
        b.emit("t0", EventType.TURN_STARTED, {"turn": 1, "text": "old question", "agent": "director"})
        async with running_tui(b) as (tui, pipe):
            assert tui.c.view.task == "t1"  # the latest session of the project
            pipe.send_text("/resume\r")
            await until(lambda: isinstance(tui.c.dialog, PickerDialog), "the task picker")
            assert tui.c.dialog.values == ["t0"]
            pipe.send_text("\r")
            await until(lambda: tui.c.view.task == "t0" and entries(tui, "user") == ["old question"], "t0 attached")
            pipe.send_text("carry on\r")
            await until(lambda: b.submitted, "the submit")
            assert b.submitted[0]["task"] == "t0"

    arun(go())


def test_model_lists_configured_providers_and_overrides_the_next_turns(tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text('[global.llm]\nuse_provider = "a"\n'
                      '[global.llm.providers.a]\napi_base_url = "http://a/v1"\napi_key = "k"\nmodel = "ma"\n'
                      '[global.llm.providers.b]\napi_base_url = "http://b/v1"\napi_key = "k"\nmodel = "mb"\n')

    async def go() -> None:
        b = backend_with_task(state="done")
        async with running_tui(b, config_path=config) as (tui, pipe):
            pipe.send_text("/model\r")
            await until(lambda: isinstance(tui.c.dialog, PickerDialog), "the model picker")
            assert tui.c.dialog.values == ["default", "a", "b"]
            pipe.send_text("3")
            await until(lambda: tui.c.model_override == "b", "the override")
            pipe.send_text("next turn\r")
            await until(lambda: b.submitted, "the submit")
            assert b.submitted[0]["options"] == {"model_override": "b"}
            pipe.send_text("/model nope\r")
            await until(lambda: tui.c.message and "unknown provider 'nope'" in tui.c.message[0], "the error")
            pipe.send_text("/model default\r")
            await until(lambda: tui.c.model_override == "", "the override dropped")

    arun(go())


def test_yolo_level_comes_from_the_config_file_unless_given(tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text('[tui]\nyolo = "yolo"\n')

    async def go(yolo: str) -> str:
        b = backend_with_task(state="done")
        async with running_tui(b, config_path=config, yolo=yolo) as (_tui, pipe):
            pipe.send_text("x\r")
            await until(lambda: b.submitted, "the submit")
        return b.submitted[0]["yolo"]

    assert arun(go("")) == "yolo"
    assert arun(go("full")) == "full"


def test_config_warnings_show_at_attach_each_message_carries_the_key_variables_and_a_picked_provider_is_said_once(
        tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text('[global.llm.providers.p]\napi_base_url = "http://x/v1"\napi_key_env = "MY_KEY"\nmodel = "m"\n'
                      '[agent]\nlnag = "German"\n')
    environ = {"MY_KEY": "sk-tui", "OTHER_SECRET": "no", "YAGENT_MODEL": "m2"}

    async def go() -> tuple[list[str], list[dict]]:
        b = backend_with_task(state="done")
        b.notice = "no provider is configured, so yagent uses …"
        async with running_tui(b, config_path=config, environ=environ) as (tui, pipe):
            pipe.send_text("one\r")
            await until(lambda: len(b.submitted) == 1, "the first submit")
            pipe.send_text("two\r")
            await until(lambda: len(b.submitted) == 2, "the second submit")
            await until(lambda: any("no provider" in e.text for e in tui.c.view.entries), "the notice")
            return [e.text for e in tui.c.view.entries if e.kind == "notice"], b.submitted

    notes, submitted = arun(go())
    assert f"config {config}: [agent] lnag is not a setting yagent knows, so it does nothing; did you mean lang?" \
        in notes
    assert [n for n in notes if n.startswith("no provider")] == ["no provider is configured, so yagent uses …"]
    assert [s["env"] for s in submitted] == [{"MY_KEY": "sk-tui", "YAGENT_MODEL": "m2"}] * 2


def test_a_yolo_level_saved_by_setup_applies_to_the_next_message(tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text('[tui]\nyolo = "none"\n')

    async def go() -> list[str]:
        b = backend_with_task(state="done")
        async with running_tui(b, config_path=config) as (tui, pipe):
            pipe.send_text("first\r")
            await until(lambda: len(b.submitted) == 1, "the first submit")
            config.write_text('[tui]\nyolo = "yolo"\n')  # what the wizard writes on its summary screen
            tui.c.setup_finished("written")
            pipe.send_text("second\r")
            await until(lambda: len(b.submitted) == 2, "the second submit")
        return [s["yolo"] for s in b.submitted]

    assert arun(go()) == ["none", "yolo"]


@pytest.mark.parametrize(("kind", "keys", "value"), [
    ("confirm", "n", "no"),
    ("select", "2", "beta"),
    ("input", "my answer\r", "my answer"),
    (QuestionKind.AUTHORIZE, "s", "session"),
])
def test_question_dialogs_answer_by_kind(kind: str, keys: str, value: str) -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, pipe):
            b.ask("t1", "r1.1", kind, "what now?", options=["alpha", "beta"] if kind == "select" else None)
            await until(lambda: isinstance(tui.c.dialog, QuestionDialog), "the dialog")
            pipe.send_text(keys)
            await until(lambda: b.answers, "the answer")
            assert b.answers == [("t1", "r1.1", value)]
            await until(lambda: tui.c.dialog is None, "the dialog to close")
            assert tui.buffer.text == ""  # the dialog's keys never leaked into the editor

    arun(go())


def test_events_keep_flowing_and_turn_end_lands_while_a_dialog_is_open() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, _pipe):
            b.ask("t1", "r1.1", "confirm", "continue?")
            await until(lambda: tui.c.dialog is not None, "the dialog")
            b.emit("t1", EventType.AI_CHUNK, {"text": "still streaming"}, run="r2", agent="coding")
            b.emit("t1", EventType.TURN_FINISHED,
                   {"turn": 1, "state": "done", "status": "done", "output": "final words"}, run="r1")
            await until(lambda: tui.c.view.display_state == "done", "the turn to end under the dialog")
            assert "still streaming" in entries(tui, "text") and "final words" in entries(tui, "text")
            assert tui.c.dialog is None  # its question died with the turn

    arun(go())


def test_an_answer_from_another_client_closes_the_dialog() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, _pipe):
            b.ask("t1", "r1.1", "confirm", "continue?")
            await until(lambda: tui.c.dialog is not None, "the dialog")
            b.respond("t1", "r1.1", "yes", by="client")
            await until(lambda: tui.c.dialog is None, "the dialog to close")
            assert b.answers == []

    arun(go())


def test_pending_questions_are_shown_first_on_attach_and_can_be_put_off() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.ask("t1", "r1.1", "confirm", "first?")
        b.ask("t1", "r1.2", "input", "second?")
        async with running_tui(b) as (tui, pipe):
            assert isinstance(tui.c.dialog, QuestionDialog)  # open before anything else was drawn
            assert tui.c.dialog.question.request_id == "r1.1" and tui.c.dialog.total == 2
            pipe.send_text("\x1b")  # esc: later
            await until(lambda: tui.c.dialog is not None and tui.c.dialog.question.request_id == "r1.2",
                        "the second question", timeout=5)
            pipe.send_text("\x1b")
            await until(lambda: tui.c.dialog is None, "both put off")
            assert "f2" in "".join(screen_rows(tui, 100, 24)[0])
            pipe.send_text(F2)
            await until(lambda: tui.c.dialog is not None, "f2 to reopen")

    arun(go())


def test_dropped_daemon_is_reported_and_reconnect_resumes_without_duplicates() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.emit("t1", EventType.AI_CHUNK, {"text": "one "})
        async with running_tui(b) as (tui, pipe):
            await until(lambda: entries(tui, "text") == ["one "], "the backlog")
            b.alive_flag = False
            await until(lambda: tui.c.connection == "lost", "the lost connection")
            screen = screen_rows(tui, 80, 24)
            assert any("connection to yagentd lost" in row for row in screen)
            b.emit("t1", EventType.AI_CHUNK, {"text": "two"})  # happens while we are cut off
            pipe.send_text("hello\r")
            await until(lambda: tui.c.message and "not connected" in tui.c.message[0], "the refusal")
            b.alive_flag = True
            pipe.send_text(CTRL_R)
            await until(lambda: tui.c.connection == "ok" and entries(tui, "text") == ["one two"], "the catch-up")
            assert b.connects == 2

    arun(go())


def test_detach_leaves_the_task_running() -> None:
    async def go():
        b = backend_with_task()
        async with running_tui(b) as (tui, pipe):
            pipe.send_text(CTRL_Q)
            await until(lambda: tui.c.exit_info is not None, "the detach")
        return tui.c.exit_info, b.controls

    info, controls = arun(go())
    assert (info.reason, info.task, info.state) == ("detached", "t1", "running")
    assert controls == []


def test_tool_results_expand_and_plans_view_filters_by_agent() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.emit("t1", EventType.TOOL_CALL_START,
               {"call_id": "c1", "name": "read_file", "arguments": "{}", "brief": "a.py"})
        b.emit("t1", EventType.TOOL_CALL_RESULT,
               {"call_id": "c1", "name": "read_file", "content": "L1\nL2\nL3\nSECRET4", "is_error": False,
                "duration": 0.1})
        b.emit("t1", EventType.THINKLINK_ENTRY, {"agent": "director", "goal": "G-director", "step": "", "reason": "",
                                                 "plan": []})
        b.emit("t1", EventType.THINKLINK_ENTRY, {"agent": "coding", "goal": "G-coding", "step": "", "reason": "",
                                                 "plan": []}, run="c1", agent="coding")
        async with running_tui(b) as (tui, pipe):
            await until(lambda: len(tui.c.view.plans) == 2, "the backlog")
            assert not any("SECRET4" in row for row in screen_rows(tui, 80, 24))
            pipe.send_text(CTRL_O)
            await until(lambda: tui.c.tools_expanded, "expansion")
            assert any("SECRET4" in row for row in screen_rows(tui, 80, 24))
            pipe.send_text(CTRL_T)
            await until(lambda: tui.c.mode == "plans", "the plans view")
            rows = "\n".join(screen_rows(tui, 80, 24))
            assert "G-director" in rows and "G-coding" in rows
            pipe.send_text("ff")
            await until(lambda: tui.c.plan_filter == "coding", "the filter on coding")
            rows = "\n".join(screen_rows(tui, 80, 24))
            assert "G-coding" in rows and "G-director" not in rows
            pipe.send_text("q")
            await until(lambda: tui.c.mode == "main", "back to the conversation")
            assert tui.buffer.text == ""

    arun(go())


def test_screen_layout_holds_from_small_to_large_terminals() -> None:
    async def go() -> None:
        b = backend_with_task()
        for i in range(40):
            b.emit("t1", EventType.AI_CHUNK, {"text": f"行 {i} 的内容 " * 6 + "\n"})
        async with running_tui(b) as (tui, _pipe):
            await until(lambda: tui.c.view.last_seq == 41, "the backlog")
            b.ask("t1", "r1.1", "select", "哪一个?", options=[f"option {i}" for i in range(12)])
            await until(lambda: tui.c.dialog is not None, "the dialog")
            for columns, rows in ((40, 12), (80, 24), (240, 80), (57, 13)):
                screen = screen_rows(tui, columns, rows)
                assert len(screen) == rows
                assert screen[0].startswith(" yagent")
                status_row = next(i for i, row in enumerate(screen) if "waiting for you" in row)
                assert screen[status_row + 1].startswith("╭")  # the dialog sits right under the status
                assert screen[-1].startswith("╰") and screen[-1].rstrip().endswith("╯")

    arun(go())


def test_setup_is_refused_during_a_turn_and_returns_to_the_conversation(tmp_path: Path) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text('# keep me\n[global.llm.providers.a]\napi_base_url = "http://a/v1"\napi_key = "k"\n'
                      'model = "ma"\n')

    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b, config_path=config) as (tui, pipe):
            pipe.send_text("/setup\r")
            await until(lambda: tui.c.message and "wizard takes the whole keyboard" in tui.c.message[0], "refusal")
            b.emit("t1", EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done", "output": "ok"})
            await until(lambda: tui.c.view.display_state == "done", "the turn end")
            pipe.send_text("/setup\r")
            await until(lambda: tui.c.mode == "setup" and tui.setup_view is not None, "the wizard")
            assert any("providers in" in row for row in screen_rows(tui, 80, 24))
            b.emit("t1", EventType.TURN_STARTED, {"turn": 2, "text": "from another client", "agent": "director"})
            await until(lambda: "from another client" in entries(tui, "user"), "events flowing under the wizard")
            pipe.send_text("q")
            await until(lambda: tui.c.mode == "main", "the conversation back")
            assert config.read_text().startswith("# keep me")
            pipe.send_text("typed after\r")
            await until(lambda: b.submitted and b.submitted[-1]["text"] == "typed after", "the editor back")

    arun(go())


def test_a_failing_request_task_reports_on_screen_instead_of_vanishing() -> None:
    async def go() -> None:
        b = backend_with_task()

        async def explode(*a, **k):
            raise ValueError("boom")

        b.control = explode  # type: ignore[method-assign]
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/pause\r")
            await until(lambda: tui.c.message and "internal error in pause: ValueError: boom" in tui.c.message[0],
                        "the error on screen")

    arun(go())


def test_many_chunks_render_without_losing_order() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, _pipe):
            for i in range(2000):
                b.emit("t1", EventType.AI_CHUNK, {"text": f"{i} "})
                if i % 200 == 0:
                    await asyncio.sleep(0)
            await until(lambda: tui.c.view.last_seq == 2001, "all chunks", timeout=20)
            assert entries(tui, "text") == ["".join(f"{i} " for i in range(2000))]
            rows = screen_rows(tui, 80, 24)
            assert any("1999" in row for row in rows)

    arun(go())


def test_turns_the_daemon_no_longer_replays_come_from_the_task_record() -> None:
    async def go() -> None:
        b = FakeBackend()
        b.add_task("t1", state="done")
        b.turns["t1"] = [TurnSummary(turn=1, text="old question", state="done", output="old answer"),
                         TurnSummary(turn=2, text="new question", state="done", output="new answer")]
        for turn in (1, 2):
            b.emit("t1", EventType.TURN_STARTED, {"turn": turn, "text": f"{'old' if turn == 1 else 'new'} question"})
            b.emit("t1", EventType.AI_CHUNK, {"text": f"{'old' if turn == 1 else 'new'} answer"})
            b.emit("t1", EventType.TURN_FINISHED, {"turn": turn, "state": "done", "status": "done"})
        del b.events["t1"][:3]  # the daemon's ring dropped turn 1
        async with running_tui(b) as (tui, _pipe):
            await until(lambda: tui.c.view.last_seq == 6, "the backlog")
            assert entries(tui, "user") == ["old question", "new question"]
            assert entries(tui, "text") == ["old answer", "new answer"]
            assert any("from the task record" in t for t in entries(tui, "notice"))

    arun(go())


def test_page_up_scrolls_back_and_page_down_follows_the_stream_again() -> None:
    async def go() -> None:
        b = backend_with_long_reply()
        async with running_tui(b) as (tui, pipe):
            await until(lambda: tui.c.view.last_seq == 61, "the backlog")
            assert any("line-59" in row for row in screen_rows(tui, 80, 24))
            pipe.send_text("\x1b[5~")  # page up
            await until(lambda: tui.c.scroll_top is not None, "the scroll")
            rows = screen_rows(tui, 80, 24)
            assert not any("line-59" in row for row in rows) and any("line-4" in row for row in rows)
            status = next(row for row in screen_rows(tui, 80, 24) if row.startswith(" running "))
            assert "↓ 19 lines below" in status  # the status line says the view is not following
            b.emit("t1", EventType.AI_CHUNK, {"text": "line-60\n"})  # new output does not yank the view down
            await until(lambda: tui.c.view.last_seq == 62, "the new chunk")
            rows = screen_rows(tui, 80, 24)
            assert not any("line-60" in row for row in rows)
            assert any("↓ 20 lines below" in row for row in rows)
            pipe.send_text("\x1b[6~\x1b[6~\x1b[6~")  # page down past the end: follow again
            await until(lambda: tui.c.scroll_top is None, "following again")
            rows = screen_rows(tui, 80, 24)
            assert any("line-60" in row for row in rows) and not any("lines below" in row for row in rows)

    arun(go())


def test_ctrl_home_jumps_to_the_start_and_end_follows_the_stream_again() -> None:
    async def go() -> None:
        b = backend_with_long_reply()
        async with running_tui(b) as (tui, pipe):
            await until(lambda: tui.c.view.last_seq == 61, "the backlog")
            pipe.send_text("\x1b[1;5H")  # ctrl+home
            await until(lambda: tui.c.scroll_top == 0, "the first line")
            rows = screen_rows(tui, 80, 24)
            assert any("line-00" in row for row in rows) and not any("line-59" in row for row in rows)
            pipe.send_text("draft\x1b[D")  # some text, the cursor one to the left of its end
            await until(lambda: tui.buffer.cursor_position == 4, "the cursor inside the draft")
            pipe.send_text("\x1b[F")  # end: first the editor's meaning
            await until(lambda: tui.buffer.cursor_position == 5, "the cursor at the end of the draft")
            assert tui.c.scroll_top == 0
            pipe.send_text("\x1b[F")  # end again, at the end of the text: follow the stream
            await until(lambda: tui.c.scroll_top is None, "following again")
            assert any("line-59" in row for row in screen_rows(tui, 80, 24))
            pipe.send_text("\x1b[5~")
            await until(lambda: tui.c.scroll_top is not None, "scrolled back")
            pipe.send_text("\x1b[1;5F")  # ctrl+end follows whatever the editor holds
            await until(lambda: tui.c.scroll_top is None, "following after ctrl+end")
            assert tui.buffer.text == "draft"

    arun(go())


def test_the_mouse_wheel_scrolls_the_conversation_not_the_input_history() -> None:
    wheel_up, wheel_down = "\x1b[<64;10;5M", "\x1b[<65;10;5M"  # SGR mouse reports over the log
    async def go() -> None:
        b = backend_with_long_reply(state="done")
        async with running_tui(b) as (tui, pipe):
            await until(lambda: tui.c.view.last_seq == 61, "the backlog")
            await until(lambda: tui.application.output.mouse_reported, "the terminal reporting the mouse")
            pipe.send_text("earlier message\r")
            await until(lambda: b.submitted, "the submit")
            pipe.send_text("draft")
            await until(lambda: tui.buffer.text == "draft", "the draft")
            pipe.send_text(wheel_up * 2)
            await until(lambda: tui.c.scroll_top is not None, "the conversation scrolled back")
            bottom = len([line for e in tui.c.view.entries for line in tui.c.renderer.entry_lines(e, 80, False)])
            assert tui.c.scroll_top < bottom - 10
            assert tui.buffer.text == "draft"  # the wheel is not an arrow key
            pipe.send_text(wheel_down * 40)
            await until(lambda: tui.c.scroll_top is None, "following again at the bottom")

    arun(go())


def test_scrolling_the_plans_stops_at_the_oldest_and_comes_back_at_once() -> None:
    async def go() -> None:
        b = backend_with_task()
        for i in range(30):
            b.emit("t1", EventType.THINKLINK_ENTRY,
                   {"agent": "director", "goal": f"G-{i:02d}", "step": "", "reason": "",
                    "plan": [{"status": "todo", "text": f"task of plan {i}"}]})
        async with running_tui(b) as (tui, pipe):
            await until(lambda: len(tui.c.view.plans) == 30, "the plans")
            pipe.send_text(CTRL_T)
            await until(lambda: tui.c.mode == "plans", "the plans view")
            assert any("G-29" in row for row in screen_rows(tui, 80, 24))
            pipe.send_text("\x1b[5~" * 40)  # far more pages up than there are
            await until(lambda: any("G-00" in row for row in screen_rows(tui, 80, 24)), "the oldest plan")
            pipe.send_text("\x1b[6~")  # one page down leaves the oldest at once
            await until(lambda: not any("G-00" in row for row in screen_rows(tui, 80, 24)), "one page newer")

    arun(go())


def _status(step: int, used: int, *, run: str = "r1", agent: str = "director", parts: dict | None = None) -> dict:
    return {"step": step, "used": used, "threshold": 96_000, "source": "catalog", "window": 128_000,
            "measured": True, "parts": parts or {"system": 3_100, "instructions": 900, "history": 8_000,
                                                 "tool_results": 27_000, "call_context": 400, "tools": 2_600}}


def test_the_context_gauge_and_compaction_indicator_come_from_events_and_are_explained() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.emit("t1", EventType.CONTEXT_STATUS, _status(3, 42_000))
        b.emit("t1", EventType.CONTEXT_EMERGENCY_COMPRESSED,
               {"tier": "emergency", "original_tokens": 80_000, "compressed_tokens": 20_000, "saved_tokens": 60_000})
        b.emit("t1", EventType.RUN_STARTED, {"agent": "coding", "parent": "r1", "input": "fix it"}, run="c1",
               agent="coding")
        b.emit("t1", EventType.CONTEXT_STATUS, _status(1, 5_000, run="c1", agent="coding"), run="c1", agent="coding")
        async with running_tui(b) as (tui, pipe):
            await until(lambda: "c1" in tui.c.view.gauges, "the backlog")
            status = next(row for row in screen_rows(tui, 160, 30) if "│" in row)
            assert "⧉ 1 −60.0k (75%)" in status and "ctx coding 5.0k/96.0k of 128.0k" in status  # the running child's
            b.emit("t1", EventType.RUN_FINISHED, {"status": "done", "parent": "r1"}, run="c1", agent="coding")
            await until(lambda: "ctx 42.0k/96.0k" in "\n".join(screen_rows(tui, 160, 30)), "back to the root's")
            pipe.send_text("/context\r")
            await until(lambda: any(t.startswith("context of director") for t in entries(tui, "notice")), "/context")
            shown = next(t for t in entries(tui, "notice") if t.startswith("context of director"))
            assert "42.0k of 96.0k tokens before compaction (44%)" in shown and "model catalog" in shown
            assert "tool results" in shown and "27.0k" in shown and "total (local estimate)" in shown
            pipe.send_text("/help\r")
            await until(lambda: any(t.startswith("status line:") for t in entries(tui, "notice")), "the legend")
            legend = next(t for t in entries(tui, "notice") if t.startswith("status line:"))
            assert "⧉ N −S (P%)" in legend and "ctx U/T of W" in legend

    arun(go())


def test_compact_asks_the_running_turn_and_an_idle_task_is_told_there_is_nothing_to_compact() -> None:
    async def go() -> None:
        b = backend_with_task()
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/compact\r")
            await until(lambda: b.compactions == ["t1"], "the request")
            await until(lambda: tui.c.message and "compaction asked" in tui.c.message[0], "the acknowledgement")
            b.tasks["t1"].state = "done"
            pipe.send_text("/compact\r")
            await until(lambda: tui.c.message and "nothing to compact" in tui.c.message[0], "the refusal")
            assert tui.c.message[1] and b.compactions == ["t1"]

    arun(go())


def test_a_thought_block_out_of_shape_shows_in_the_plans_view() -> None:
    async def go() -> None:
        b = backend_with_task()
        b.emit("t1", EventType.THINKLINK_ENTRY, {"agent": "director", "goal": "G", "step": "", "reason": "",
                                                 "plan": [], "problems": ["reason is empty"], "parse_failures": 1})
        async with running_tui(b) as (tui, pipe):
            await until(lambda: len(tui.c.view.plans) == 1, "the backlog")
            pipe.send_text(CTRL_T)
            await until(lambda: tui.c.mode == "plans", "the plans view")
            assert any("out of shape: reason is empty" in row for row in screen_rows(tui, 100, 24))

    arun(go())


def test_diff_shows_the_changes_coloured_and_undo_asks_first_and_says_what_the_user_changed() -> None:
    from yagent.ipc.messages import FileChange, SubtaskChanges, TaskDiffReply, TaskUndoReply
    from yagent.ipc.vocabulary import ChangeKind

    async def go() -> None:
        b = backend_with_task(state="done")
        patch = "diff --git a/a.txt b/a.txt\n@@ -1 +1 @@\n-old line\n+new line\n"
        b.diff_reply = TaskDiffReply(id=0, task="t1", subtasks=[SubtaskChanges(
            run="r2", agent="coding", task="change a.txt", before=1, after=2,
            files=[FileChange(path="a.txt", change=ChangeKind.MODIFIED, added=1, removed=1, patch=patch)])])
        preview = TaskUndoReply(id=0, task="t1", target=1, what="the changes of coding sub-task r2",
                                files=[FileChange(path="a.txt", change=ChangeKind.MODIFIED)])
        b.undo_replies = [TaskUndoReply(id=0, task="t1", target=1, what="the changes of coding sub-task r2",
                                        files=preview.files, changed_since=["a.txt"]), preview,
                          TaskUndoReply(id=0, task="t1", target=1, what="x", files=preview.files, applied=True,
                                        safety=3)]
        async with running_tui(b) as (tui, pipe):
            pipe.send_text("/diff\r")
            await until(lambda: any("+new line" in t for t in entries(tui, "diff")), "the diff")
            rows = "\n".join(screen_rows(tui, 100, 40))
            assert "sub-task 1: coding r2 (checkpoints 1 → 2)" in rows and "M a.txt  +1 -1" in rows
            shown = next(e for e in tui.c.view.entries if e.kind == "diff")
            styles = {text.strip(): style for line in tui.c.renderer.entry_lines(shown, 100, False)
                      for style, text in line if text.strip()}
            assert styles["+new line"] == "class:diff.add" and styles["-old line"] == "class:diff.del"
            assert styles["@@ -1 +1 @@"] == "class:diff.hunk"
            pipe.send_text("/undo\r")
            await until(lambda: tui.c.message and "--force overwrites your edits" in tui.c.message[0], "the refusal")
            assert any("you changed a.txt since the agents did" in t for t in entries(tui, "diff"))
            assert isinstance(tui.c.dialog, type(None)) and b.undos[-1]["apply"] is False
            pipe.send_text("/undo --force\r")
            await until(lambda: isinstance(tui.c.dialog, PickerDialog), "the confirmation")
            pipe.send_text("\x1b[A\r")  # up to "undo", enter
            await until(lambda: len(b.undos) == 3, "the undo carried out")
            assert b.undos[-1] == {"task": "t1", "to": 0, "apply": True, "force": True}
            await until(lambda: tui.c.message and "undone: 1 files put back" in tui.c.message[0], "the result")
            assert any("yagent undo --to 3" in t for t in entries(tui, "diff"))

    arun(go())

"""External tools end to end: a real daemon owns a real MCP server, a real Director worker calls its tool through
the daemon, only the model is scripted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit, wait_until
from tests.fake_provider import Step, ToolCallSpec
from tests.mcp.servers import toolbox_table
from yagent.ipc.messages import Ack, Answer, TaskControl
from yagent.ipc.vocabulary import ControlAction, EventType, McpState

pytestmark = pytest.mark.e2e


def test_the_director_loads_and_calls_an_mcp_tool_through_the_daemon(fake, make_agent_daemon, project: Path,
                                                                      tmp_path: Path) -> None:
    daemon = make_agent_daemon(toolbox_table("tb", tmp_path / "tb", extra="required = true"))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__echo"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__echo", {"text": "hello from the model"})]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    _, events = run_turn(daemon, project, "Echo something.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    requests = fake.requests_for("director")
    system = requests[0].body["messages"][0]["content"]
    assert "mcp__tb__echo" in system and "tb: ready" in system
    tools = {t["function"]["name"] for t in requests[2].body["tools"]}
    assert "mcp__tb__echo" in tools
    assert tool_messages(requests[2])[-1]["content"] == "hello from the model"


def _exit_only(fake, agent: str = "director") -> None:
    fake.script(agent, MARKERS[agent], [Step(text="ok", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ok"})])])


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_kill_9_of_the_daemon_leaves_no_server_process_once_a_new_daemon_has_started(
        fake, make_daemon, project: Path, tmp_path: Path) -> None:
    state = tmp_path / "tb"
    config = llm_config(fake, extra=toolbox_table("tb", state, mode="linger", extra="required = true"))
    daemon = make_daemon(config, env={"YAGENT_TEST_DAEMON_SECRET": "sk-never-for-servers"})
    _exit_only(fake)
    run_turn(daemon, project, "Hi.")
    server, child = int((state / "pid").read_text()), int((state / "child").read_text())
    env = json.loads((state / "env.json").read_text())
    assert "YAGENT_TEST_DAEMON_SECRET" not in env and "YAGENT_HOME" not in env  # only its configured environment
    daemon.proc.kill()
    daemon.proc.wait(10)
    # It ignores the end of its stdin: only a kill of its group ends it, and nothing else did.
    assert _pid_alive(server) and _pid_alive(child)
    daemon.start()
    assert not _pid_alive(server) and not _pid_alive(child)  # killed before the new daemon said READY
    assert "leftover processes of 1 MCP servers" in daemon.log_path.read_text()


def test_a_cancelled_turn_cancels_its_call_at_the_server(fake, make_agent_daemon, project: Path,
                                                          tmp_path: Path) -> None:
    state = tmp_path / "tb"
    daemon = make_agent_daemon(toolbox_table("tb", state, extra="required = true"))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__slow"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__slow", {"seconds": 120})]),
    ])

    async def go() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, "Wait.", agent="director")

            async def on_event(ev) -> None:
                if ev.type == EventType.TOOL_CALL_START and ev.data.get("name") == "mcp__tb__slow":
                    await asyncio.to_thread(wait_until, (state / "slow-started").exists, 30, "the call at the server")
                    await c.request(TaskControl(id=0, task=sub.task, action=ControlAction.CANCEL), Ack)

            return await collect_turn(c, sub.task, on_event=on_event)

    events = arun(go(), 90)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "cancelled"
    wait_until((state / "cancelled").exists, 30, "the server to see the call cancelled")


def test_two_projects_get_their_own_instance_and_a_server_stuck_in_initialize_delays_no_turn(
        fake, make_agent_daemon, tmp_path: Path) -> None:
    stuck = tmp_path / "stuck"
    daemon = make_agent_daemon(toolbox_table("tb", tmp_path / "tb") + toolbox_table("stuck", stuck, mode="never-init"))
    projects = []
    for name in ("one", "two"):
        p = tmp_path / name
        p.mkdir()
        projects.append(p)
        _exit_only(fake)
        _, events = run_turn(daemon, p, "Hi.")  # the stuck server is not required: the turn never waits for it
        assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    shown = json.loads(daemon.cli("mcp", "--json", cwd=projects[0]).stdout)
    by_key = {(s["project"], s["server"]): s for s in shown["servers"]}
    stuck_one = by_key[(str(projects[0]), "stuck")]
    assert stuck_one["state"] == McpState.STARTING and stuck_one["pid"] > 0  # never answered initialize
    def instances() -> list[dict]:
        shown = json.loads(daemon.cli("mcp", "--json", cwd=projects[0]).stdout)
        return [s for s in shown["servers"] if s["server"] == "tb"]

    wait_until(lambda: all(s["state"] == McpState.READY for s in instances()), 30, "both tb instances ready")
    tb = instances()
    assert sorted(s["project"] for s in tb) == sorted(str(p) for p in projects)
    assert len({s["pid"] for s in tb}) == 2 and all(s["tools"] == 6 for s in tb)
    text = daemon.cli("mcp", cwd=projects[1]).stdout
    assert f"tb [{projects[1]}]: ready (6 tools" in text and "unconfined" in text.lower()
    assert "write_note: it may change things" in text  # withheld without allow_write, and said why
    restarted = daemon.cli("mcp", "restart", "tb", cwd=projects[0])
    assert restarted.returncode == 0 and f"restarting tb in {projects[0]}" in restarted.stdout
    wait_until(lambda: any(s["project"] == str(projects[0]) and s["restarts"] == 1 and s["state"] == McpState.READY
                           for s in instances()), 30, "the restart")


def test_a_tool_added_mid_turn_reaches_the_run_at_its_next_step(fake, make_agent_daemon, project: Path,
                                                                 tmp_path: Path) -> None:
    daemon = make_agent_daemon(toolbox_table("tb", tmp_path / "tb", extra="required = true"))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__grow"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__grow", {})]),
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__extra"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__extra", {})]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    run_turn(daemon, project, "Grow.")
    requests = fake.requests_for("director")
    assert tool_messages(requests[4])[-1]["content"] == "extra here"
    # The call after the list changed told the model of the new tool, which the system prompt could not name.
    told = [m["content"] for m in requests[2].body["messages"] if m["role"] == "user"]
    assert any("mcp__tb__extra" in t and "became available" in t for t in told)


def test_a_tool_that_may_write_is_withheld_without_allow_write_and_asks_authorisation_with_it(
        fake, make_agent_daemon, project: Path, tmp_path: Path) -> None:
    daemon = make_agent_daemon(toolbox_table("tb", tmp_path / "tb", extra="required = true\nallow_write = true"))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": "write the note"}, id="code")]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["mcp__tb__write_note"]})]),
        Step(tool_calls=[ToolCallSpec("mcp__tb__write_note", {"text": "from coding"})]),
        Step(text="written", tool_calls=[ToolCallSpec("agent_exit", {"summary": "written"})]),
    ])

    async def go() -> list:
        async with daemon.client() as c:
            sub = await submit(c, project, "Write a note.", agent="director")

            async def answer(ev) -> None:
                if ev.type == EventType.USER_HELP_NEEDED:
                    await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": "once"}), Ack)

            return await collect_turn(c, sub.task, on_event=answer)

    events = arun(go(), 90)
    asked = of_type(events, EventType.USER_HELP_NEEDED)
    assert len(asked) == 1 and "mcp__tb__write_note" in asked[0].data["prompt"]
    assert (project / "note.txt").read_text() == "from coding"  # the server runs in the project root
    director_tools = {t["function"]["name"] for t in fake.requests_for("director")[0].body["tools"]}
    director_system = fake.requests_for("director")[0].body["messages"][0]["content"]
    assert "mcp__tb__write_note" not in director_system and "mcp__tb__write_note" not in director_tools
    assert "mcp__tb__write_note" in fake.requests_for("coding")[0].body["messages"][0]["content"]


def test_a_required_server_that_never_comes_up_fails_the_turn_naming_it_and_no_model_is_asked(
        fake, make_agent_daemon, project: Path, tmp_path: Path) -> None:
    daemon = make_agent_daemon(toolbox_table("stuck", tmp_path / "stuck", mode="never-init",
                                             extra='required = true\nstartup_timeout = "2s"'))
    _exit_only(fake)
    _, events = run_turn(daemon, project, "Hi.")
    finished = of_type(events, EventType.RUN_FINISHED)[-1].data
    assert finished["status"] == "failed" and "stuck" in finished["error"], finished
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "failed"
    assert fake.requests_for("director") == []  # the run ends before its first model call

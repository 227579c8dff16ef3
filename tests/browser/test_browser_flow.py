"""The Browser agent end to end: a real daemon owns the project's Chromium, a Browser worker's browser_* tools reach it
through the daemon, and only the model is scripted (the fake provider). One daemon and one Chromium serve the module's
tool tests; the kill -9 test and the missing-Chromium test have daemons of their own."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn, tool_messages
from tests.browser.site import LocalSite
from tests.daemon_harness import DaemonProcess, of_type, wait_until
from tests.fake_provider import FakeProvider, Step, ToolCallSpec
from yagent.daemon.browser_manager import BROWSER_RECORD, CHROMIUM_RECORD
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")

BROWSER = "You are the yagent Browser agent"
# The page the scripted Browser agent works on: its references are those of a fresh tab's first snapshot.
PAGE = """<title>Shop</title><input aria-label="Name"><select aria-label="Colour"><option value="r">Red</option>
<option value="g">Green</option></select><button onclick="document.getElementById('out').textContent =
'Hello ' + document.querySelector('input').value">Send</button><input aria-label="Search">
<a href="second.html" target="_blank">Second</a><p id="out"></p>"""


def call(name: str, **arguments: object) -> ToolCallSpec:
    return ToolCallSpec(name, arguments)


def _exit(summary: str) -> ToolCallSpec:
    return ToolCallSpec("agent_exit", {"summary": summary, "handoff": {"conclusion": summary, "status": "ok"}})


def _records(daemon: DaemonProcess) -> dict[str, int]:
    db = sqlite3.connect(f"file:{daemon.home / 'state.db'}?mode=ro", uri=True)
    try:
        return {name: pid for name, pid in db.execute("SELECT name, pid FROM mcp_servers")}
    finally:
        db.close()


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    with LocalSite() as served:
        yield served


@pytest.fixture(scope="module")
def web_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web") / "project"
    root.mkdir()
    (root / "shop.html").write_text(PAGE)
    (root / "second.html").write_text("<title>Second</title><p>The second page.</p>")
    return root


@pytest.fixture(scope="module")
def browser_daemon(tmp_path_factory: pytest.TempPathFactory, fake_model: FakeProvider) -> Iterator[DaemonProcess]:
    # A model the catalogue says reads images: a screenshot goes to it as an image.
    daemon = DaemonProcess(tmp_path_factory.mktemp("browser-daemon"),
                           llm_config(fake_model).replace('model = "fake-model"', 'model = "gpt-4o"'))
    daemon.start()
    yield daemon
    daemon.close()


@needs_chromium
def test_every_browser_tool_runs_through_a_browser_worker_that_coding_delegated(
        browser_daemon: DaemonProcess, fake_model: FakeProvider, web_project: Path) -> None:
    url = f"file://{web_project}/shop.html"
    fake_model.script("director", MARKERS["director"], [
        Step(tool_calls=[call("delegate_coding", task="Check the shop page in a browser.")]),
        Step(text="checked", tool_calls=[call("agent_exit", summary="checked")]),
    ])
    fake_model.script("coding", MARKERS["coding"], [  # Coding → Browser: a nested delegation, a pool of its own
        Step(tool_calls=[call("delegate_browser", task=f"Open {url}, greet Ann and report.")]),
        Step(text="the page greets", tool_calls=[_exit("the page greets Ann")]),
    ])
    fake_model.script("browser", BROWSER, [
        Step(tool_calls=[call("browser_status"), call("browser_open", url=url), call("browser_snapshot")]),
        Step(tool_calls=[call("browser_fill", ref="e2", text="Ann"), call("browser_select", ref="e3", values=["g"]),
                         call("browser_type", ref="e5", text="xyz"), call("browser_click", ref="e4"),
                         call("browser_wait", text="Hello Ann", seconds=10), call("browser_press", key="Tab"),
                         call("browser_scroll", direction="down", amount=200), call("browser_inspect", ref="e2")]),
        Step(tool_calls=[call("browser_click", ref="e6"), call("browser_tabs", action="list"),
                         call("browser_screenshot"), call("browser_eval", expression="document.title")]),
        Step(text="Ann was greeted.", tool_calls=[_exit("the page says Hello Ann")]),
    ])
    _task, events = run_turn(browser_daemon, web_project, "Check the shop page.", yolo="yolo", timeout=120)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done", browser_daemon.log_tail()
    requests = fake_model.requests_for("browser")
    offered = {t["function"]["name"] for t in requests[0].body["tools"]}
    assert {n for n in offered if n.startswith("browser_")} == {
        "browser_status", "browser_open", "browser_inspect", "browser_snapshot", "browser_click", "browser_fill",
        "browser_type", "browser_press", "browser_scroll", "browser_select", "browser_tabs", "browser_wait",
        "browser_screenshot", "browser_eval"}
    assert not offered & {"read_file", "run_bash", "create_file"}
    answers = [m["content"] for m in tool_messages(requests[-1])]  # the conversation holds every result, in order
    first, second, third = answers[0:3], answers[3:11], answers[11:15]
    assert "not running in this project" in first[0] and "Shop" in first[1]
    assert 'textbox "Name" [ref=e2]' in first[2] and 'button "Send" [ref=e4]' in first[2]
    assert "filled e2" in second[0] and "selected g in e3" in second[1] and "typed 3 characters" in second[2]
    assert "'Hello Ann' is on the page" in second[4] and '"value": "Ann"' in second[7]
    clicked, tabs, shot, evaluated = third
    assert "the page opened a new tab (2)" in clicked and "tab 2:" in tabs and "second.html" in tabs
    assert evaluated.strip() == '"Shop"'
    stored = shot.split("Stored as ")[-1].strip()
    assert Path(stored).read_bytes().startswith(b"\x89PNG") and stored.endswith(".png")
    assert str(browser_daemon.home / "tasks") in stored  # among the task's artifacts
    # ... and the Browser's model saw it: the image itself, right after the results of that step.
    last = requests[-1].body["messages"]
    images = [p["image_url"]["url"] for m in last if m["role"] == "user" and isinstance(m["content"], list)
              for p in m["content"] if p.get("type") == "image_url"]
    assert images == ["data:image/png;base64," + base64.b64encode(Path(stored).read_bytes()).decode()]
    assert last[-1]["role"] == "user" and last[-2]["role"] == "tool"
    pages = of_type(events, EventType.BROWSER_PAGE)
    assert pages[1].data["action"] == "browser_open" and pages[1].data["url"] == url
    assert any(p.data["artifact"] == stored for p in pages)
    status = browser_daemon.cli("daemon", "status").stdout
    # Chromium's own sandbox cannot run as root: the status says which case this machine is.
    sandbox = "its sandbox off (yagentd runs as root)" if os.geteuid() == 0 else "its sandbox on"
    assert f"{web_project}: ready (Chromium" in status and sandbox in status


@needs_chromium
def test_chromium_killed_mid_action_is_a_clear_error_restarted_next_time_and_shown(
        browser_daemon: DaemonProcess, fake_model: FakeProvider, web_project: Path, site: LocalSite) -> None:
    killed: list[int] = []

    def kill_chromium(path: str) -> None:
        if path.endswith("/slow") and not killed:
            pid = _records(browser_daemon)[CHROMIUM_RECORD]
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    site.on_request = kill_chromium
    fake_model.script("director", MARKERS["director"], [
        Step(tool_calls=[call("delegate_browser", task="Open the slow page.")]),
        Step(text="done", tool_calls=[call("agent_exit", summary="done")]),
    ])
    fake_model.script("browser", BROWSER, [
        Step(tool_calls=[call("browser_open", url=site.url("/slow"))]),
        Step(tool_calls=[call("browser_open", url=site.url("/second"))]),
        Step(text="reported", tool_calls=[_exit("the browser was restarted")]),
    ])
    try:
        _task, events = run_turn(browser_daemon, web_project, "Open the slow page.", timeout=120)
    finally:
        site.on_request = None
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    gone, again = ([m["content"] for m in tool_messages(r)][-1] for r in fake_model.requests_for("browser")[-2:])
    assert "the browser went away during the call" in gone and "the next browser call starts it again" in gone
    assert "Second" in again
    assert killed and _records(browser_daemon)[CHROMIUM_RECORD] != killed[0]  # a new one, recorded
    status = browser_daemon.cli("daemon", "status").stdout
    assert "ready (Chromium" in status and "last problem: Chromium went away" in status


@needs_chromium
def test_a_projects_browser_stops_once_the_project_was_idle_past_idle_ttl(
        browser_daemon: DaemonProcess, fake_model: FakeProvider, web_project: Path) -> None:
    browser_daemon.write_config(llm_config(fake_model, extra='[browser]\nidle_ttl = "1s"\n'))
    try:
        assert "browser" in browser_daemon.cli("daemon", "status").stdout  # the daemon reads the changed file
        fake_model.script("director", MARKERS["director"], [
            Step(tool_calls=[call("delegate_browser", task="Open the second page.")]),
            Step(text="ok", tool_calls=[call("agent_exit", summary="ok")]),
        ])
        fake_model.script("browser", BROWSER, [
            Step(tool_calls=[call("browser_open", url=f"file://{web_project}/second.html")]),
            Step(text="open", tool_calls=[_exit("opened")]),
        ])
        run_turn(browser_daemon, web_project, "Open the second page.")  # in use, then idle: the TTL starts
        wait_until(lambda: BROWSER_RECORD not in _records(browser_daemon), 30, "the idle browser stopped")
        status = browser_daemon.cli("daemon", "status").stdout
        assert "stopped: its project was idle past [browser] idle_ttl; the next browser call starts it" in status
    finally:
        browser_daemon.write_config(llm_config(fake_model))
        browser_daemon.cli("daemon", "status")


@needs_chromium
def test_kill_9_of_the_daemon_leaves_no_chromium_once_a_new_daemon_has_started(make_daemon, project: Path) -> None:
    with FakeProvider() as fake:
        daemon = make_daemon(llm_config(fake))
        (project / "page.html").write_text("<title>Page</title><p>hi</p>")
        fake.script("director", MARKERS["director"], [
            Step(tool_calls=[call("delegate_browser", task="Open the page.")]),
            Step(text="ok", tool_calls=[call("agent_exit", summary="ok")]),
        ])
        fake.script("browser", BROWSER, [
            Step(tool_calls=[call("browser_open", url=f"file://{project}/page.html")]),
            Step(text="open", tool_calls=[_exit("opened")]),
        ])
        run_turn(daemon, project, "Open the page.")
        records = _records(daemon)
        host, chromium = records[BROWSER_RECORD], records[CHROMIUM_RECORD]
        tree = {chromium, host, *(p.pid for p in psutil.Process(chromium).children(recursive=True))}
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(10)
        daemon.start()
        wait_until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                                   for p in tree), 30, "the browser host and every Chromium process gone")
        wait_until(lambda: not _records(daemon), 10, "their records forgotten")


def test_a_project_without_chromium_gets_the_status_text_and_the_tools_say_why(make_daemon, project: Path) -> None:
    with FakeProvider() as fake:
        daemon = make_daemon(llm_config(fake, extra='[browser]\nchrome_path = "/nowhere/chromium"\n'))
        status = daemon.cli("daemon", "status").stdout
        assert "browser      unavailable: [browser] chrome_path = /nowhere/chromium is not an executable file: " \
               "install chromium" in status and "delegate_browser is unavailable until then" in status
        assert daemon.status().browser[0].startswith("browser: unavailable:")
        fake.script("director", MARKERS["director"], [
            Step(tool_calls=[call("delegate_browser", task="Open the page.")]),
            Step(text="no browser", tool_calls=[call("agent_exit", summary="no browser here")]),
        ])
        fake.script("browser", BROWSER, [
            Step(tool_calls=[call("browser_open", url="http://127.0.0.1:9/")]),
            Step(text="unavailable", tool_calls=[_exit("the browser is unavailable")]),
        ])
        run_turn(daemon, project, "Open the page.")
        described = {t["function"]["name"]: t["function"]["description"]
                     for t in fake.requests_for("director")[0].body["tools"]}
        assert described["delegate_browser"].startswith("UNAVAILABLE: [browser] chrome_path = /nowhere/chromium")
        answer = tool_messages(fake.requests_for("browser")[1])[0]["content"]
        assert answer.startswith("browser_open: the browser is unavailable: [browser] chrome_path")
        assert not _records(daemon)  # nothing was started

"""The browser's parts that need no Chromium: `[browser]` and its bounds, which addresses may load, the frames between
daemon and host, the daemon's manager when no browser can start (and what it hands a host), the worker's tools
without authorisation or a browser, and how the line client shows a browser action."""

from __future__ import annotations

import asyncio
import io
import math
import sys
import tomllib
from pathlib import Path

import pytest

from yagent.client.event_text import TextPrinter
from yagent.daemon.browser_manager import CHROMIUM_RECHECK, BrowserManager
from yagent.daemon.chromium_lookup import find_chromium
from yagent.daemon.registry import Registry
from yagent.daemon.schedule import Scheduler
from yagent.ipc.browser_settings import BROWSER_OFF, BrowserSettings, domain_allowed, parse_browser
from yagent.ipc.config import ConfigError, parse_duration, settings_from_table
from yagent.ipc.errors import MalformedMessage, MessageTooLarge
from yagent.ipc.messages import BrowserCallResult, BrowserHostCall, Event
from yagent.ipc.pipe_frames import FrameReader, framed
from yagent.ipc.vocabulary import EventType
from yagent.workers.browser.url_policy import UrlPolicy
from yagent.workers.tools import ToolCall, ToolContext, build_surface, invoke_tool
from yagent.workers.tools.authorization import YoloLevel


def browser(toml: str) -> BrowserSettings:
    return parse_browser(tomllib.loads(toml), parse_duration)


@pytest.mark.parametrize(("toml", "says"), [
    ('[browser]\nmode = "kiosk"', "mode must be one of headless, headful, attach"),
    ('[browser]\nmode = "attach"', 'mode = "attach" needs cdp_url'),
    ('[browser]\ncdp_url = "file:///x"', "cdp_url must be an http:// or ws://"),
    ("[browser]\nmax_chrome = 0", "max_chrome must be a whole number from 1 to 64"),
    ("[browser]\nmax_output_bytes = 99999999999", "max_output_bytes must be a whole number"),
    ("[browser]\nidle_ttl = nan", "idle_ttl"),
    ("[browser]\ncommand_timeout = inf", "command_timeout"),
    ("[browser]\ncommand_timeout = 0", "command_timeout must be more than 0"),
    ('[browser]\ndialog_policy = "ignore"', "dialog_policy must be accept or dismiss"),
    ('[browser]\nallowed_domains = ["exa mple.com"]', "is not a host name"),
    ('[browser]\ndenied_domains = "example.com"', "denied_domains must be a list of host names"),
    ("[browser]\nenabled = 1", "enabled must be true or false"),
])
def test_a_browser_value_out_of_bounds_is_the_three_line_error(toml: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_from_table(tomllib.loads(toml))
    assert says in str(raised.value) and len(raised.value.lines()) == 3


def test_zero_keeps_profiles_forever_only_where_the_key_says_so() -> None:
    assert browser('[browser]\nworkspace_ttl = "0"').workspace_ttl == 0
    assert browser("[browser]\nmode = 'headful'").workspace_ttl == 72 * 3600.0
    assert math.isfinite(browser('[browser]\nidle_ttl = "90s"').idle_ttl)
    assert settings_from_table(tomllib.loads("[browser]\nenabled = false")).run_settings.browser == BROWSER_OFF


def test_a_name_covers_its_subdomains_and_denied_wins() -> None:
    assert domain_allowed("docs.example.com", ["example.com"], [])
    assert not domain_allowed("badexample.com", ["example.com"], [])
    assert domain_allowed("a.example.com", ["*.example.com"], []) and not domain_allowed("example.com",
                                                                                          ["*.example.com"], [])
    assert not domain_allowed("docs.example.com", ["example.com"], ["docs.example.com"])
    assert domain_allowed("anything.org", [], ["example.com"])


def test_only_the_projects_files_and_harmless_schemes_load(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "in.html").write_text("x")
    (root / "out.html").symlink_to("/etc/hostname")
    policy = UrlPolicy(root, [], ["localhost"])
    assert policy.refusal(f"file://{root}/in.html") == ""
    assert "outside the project" in policy.refusal(f"file://{root}/out.html")
    assert "outside the project" in policy.refusal(f"file://{root}/../../etc/passwd")
    assert "another machine" in policy.refusal("file://server/share/x")
    assert "denied_domains" in policy.refusal("http://LOCALHOST:8080/")
    assert policy.refusal("about:blank") == "" and policy.refusal("data:text/html,hi") == ""
    for url in ("chrome://settings", "javascript:alert(1)", "view-source:http://x/", "ftp://x/"):
        assert "are not opened by yagent's browser" in policy.refusal(url), url


def test_a_frame_announced_over_the_cap_is_refused_before_it_is_buffered() -> None:
    reader = FrameReader(limit=1024)
    with pytest.raises(MessageTooLarge):
        reader.feed(b"\xff\xff\xff\xff" + b"x" * 10)
    assert FrameReader().feed(b"\x00\x00") == []  # half a length: nothing yet
    with pytest.raises(MalformedMessage):
        FrameReader().feed(b"\x00\x00\x00\x03abc")
    whole = framed(BrowserHostCall(id=7, session="r", tool="browser_status"))
    reader = FrameReader()
    assert reader.feed(whole[:5]) == [] and reader.feed(whole[5:])[0].id == 7  # split anywhere


def test_chromium_is_looked_for_where_the_configuration_says(tmp_path: Path) -> None:
    chrome = tmp_path / "bin" / "chromium"
    chrome.parent.mkdir()
    chrome.write_text("#!/bin/sh\n")
    chrome.chmod(0o755)
    assert find_chromium(BrowserSettings(), {"PATH": str(chrome.parent)}) == (str(chrome), "")
    missing, why = find_chromium(BrowserSettings(), {"PATH": str(tmp_path)})
    assert missing == "" and "install chromium" in why and "delegate_browser is unavailable until then" in why
    assert find_chromium(BrowserSettings(mode="attach", cdp_url="http://127.0.0.1:9222"), {}) == ("", "")


def _manager(tmp_path: Path, settings: BrowserSettings, spawn=None) -> BrowserManager:
    return BrowserManager(Registry(tmp_path / "state.db"), Scheduler(), lambda: settings, tmp_path,
                          environ={"PATH": str(tmp_path)}, spawn=spawn)


def test_without_chromium_nothing_starts_and_every_call_says_why(tmp_path: Path) -> None:
    started: list[list[str]] = []

    async def spawn(args, environ, marker, cwd):
        started.append(args)
        raise OSError("must not be called")

    async def go() -> None:
        for settings, why in ((BrowserSettings(), "no Chromium on PATH"), (BrowserSettings(enabled=False),
                                                                            "enabled = false")):
            manager = _manager(tmp_path, settings, spawn)
            assert why in manager.unavailable() and why in manager.status_lines()[0]
            reply = await manager.call("p", str(tmp_path), "run", "browser_open", {"url": "http://x/"},
                                       downloads="", timeout=5)
            assert reply.is_error and why in reply.content

    asyncio.run(go())
    assert started == []


def test_the_host_is_started_with_what_browser_says_and_a_failed_start_is_the_state(tmp_path: Path) -> None:
    chrome = tmp_path / "chromium"
    chrome.write_text("#!/bin/sh\n")
    chrome.chmod(0o755)
    settings = browser(f'[browser]\nchrome_path = "{chrome}"\ndialog_policy = "dismiss"\nmax_output_bytes = 4096\n'
                       f'allowed_domains = ["example.com"]\ndenied_domains = ["ads.example.com"]\n'
                       f'profile_dir = "{tmp_path / "profiles"}"')
    seen: list[list[str]] = []

    async def spawn(args, environ, marker, cwd):
        seen.append(args)
        raise OSError("no such interpreter")

    async def go() -> str:
        manager = _manager(tmp_path, settings, spawn)
        serving = asyncio.get_running_loop().create_task(manager.serve())
        await asyncio.sleep(0)  # let serve make its task group
        while manager._group is None:
            await asyncio.sleep(0.01)
        reply = await manager.call("p1", str(tmp_path), "run", "browser_open", {"url": "http://example.com/"},
                                   downloads="", timeout=5)
        lines = manager.status_lines()
        await manager.close()
        serving.cancel()
        return reply.content + "\n" + "\n".join(lines)

    said = asyncio.run(go())
    assert "the browser host could not be started: no such interpreter" in said
    (args,) = seen
    assert f"--chrome={chrome}" in args and "--dialog-policy=dismiss" in args and "--max-output=4096" in args
    assert "--allow=example.com" in args and "--deny=ads.example.com" in args
    assert f"--profile={tmp_path / 'profiles' / 'p1' / 'profile'}" in args
    assert (tmp_path / "profiles" / "p1" / "profile").stat().st_mode & 0o777 == 0o700


def test_browser_eval_without_authorisation_runs_nothing(tmp_path: Path) -> None:
    calls: list[str] = []

    class Port:
        async def call_browser(self, tool, arguments, *, call_id):
            calls.append(tool)
            return BrowserCallResult(id=1, content="ran")

    ctx = ToolContext(project_root=tmp_path, yolo=YoloLevel.NONE, authorizer=None, browser=Port())
    surface = build_surface("browser")
    refused = asyncio.run(invoke_tool(surface, ToolCall("c1", "browser_eval", '{"expression": "document.cookie"}'),
                                      ctx))
    assert refused.is_error and "needs the user's authorisation" in refused.content and calls == []
    ctx = ToolContext(project_root=tmp_path, yolo=YoloLevel.YOLO, authorizer=None, browser=Port())
    ran = asyncio.run(invoke_tool(surface, ToolCall("c2", "browser_eval", '{"expression": "1"}'), ctx))
    assert ran.content == "ran" and calls == ["browser_eval"]


def test_the_line_client_shows_the_action_the_url_and_a_screenshots_path() -> None:
    out = io.StringIO()
    printer = TextPrinter(out)
    printer.handle(Event(task="t", run="r", agent="browser", seq=1, type=EventType.BROWSER_PAGE.value, ts=0.0,
                         data={"action": "browser_screenshot", "url": "http://127.0.0.1:5173/login",
                               "artifact": "/home/u/.yagent/tasks/t/artifacts/x.png", "is_error": False}))
    text = out.getvalue()
    assert "browser: browser_screenshot → http://127.0.0.1:5173/login" in text
    assert "screenshot saved: /home/u/.yagent/tasks/t/artifacts/x.png" in text


def test_a_host_that_writes_junk_is_ended_and_its_callers_hear_why(tmp_path: Path) -> None:
    from yagent.daemon.browser_process import BrowserProcess

    junk = "import sys, time; sys.stdout.buffer.write(b'\\xff\\xff\\xff\\xff not a frame'); sys.stdout.flush(); " \
           "time.sleep(60)"

    async def go() -> tuple[str, str, str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", junk, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    start_new_session=True)
        host = BrowserProcess(proc, "marker")
        waiting = host.expect(1)
        async with asyncio.timeout(30):
            await host.talk()  # returns once the junk ended the conversation and the process is gone
        with pytest.raises(ConnectionError) as ready:
            host.ready.result()
        with pytest.raises(ConnectionError) as call:
            waiting.result()
        return host.problem, str(ready.value), str(call.value)

    problem, ready, call = asyncio.run(go())
    assert "it wrote what is not a message" in problem and "over the" in problem
    assert ready == call == problem


def test_a_worker_asks_only_browser_tools_of_its_own_projects_browser_and_downloads_go_to_its_scratch(
        tmp_path: Path) -> None:
    from yagent.daemon.browser_run_requests import BrowserRunRequests
    from yagent.daemon.task_scope import TaskScope
    from yagent.ipc.messages import BrowserCall, ErrorReply, RunSpec

    asked: list[tuple] = []

    class Manager:
        async def call(self, project_id, root, session, tool, arguments, *, downloads, timeout):
            asked.append((project_id, root, session, tool, downloads, timeout))
            from yagent.ipc.messages import BrowserHostReply
            return BrowserHostReply(id=0, content="ok", url="http://x/")

        def release(self, project_id, session):
            asked.append(("release", project_id, session))

    class Run:
        id = "run-1"
        spec = RunSpec(run="run-1", task="t", turn=1, project="proj", project_root="/p", agent="browser", input="x",
                       home=str(tmp_path))
        project_id = "proj"

        def __init__(self) -> None:
            self.sent: list = []

        def send(self, msg):
            self.sent.append(msg)

        def time_left(self):
            return 30.0

        def wait_began(self, reason):
            pass

        def wait_ended(self, reason):
            pass

    async def go() -> None:
        run = Run()
        requests = BrowserRunRequests(run, Manager(), TaskScope("t"), tmp_path)  # type: ignore[arg-type]
        requests.call(BrowserCall(id=1, tool="run_bash", arguments={"command": "id"}))
        requests.call(BrowserCall(id=2, tool="browser_open", arguments={"url": "http://x/"}, timeout=float("nan")))
        while len(run.sent) < 2:
            await asyncio.sleep(0.01)
        requests.close()
        refused, answered = run.sent
        assert isinstance(refused, ErrorReply) and "'run_bash' is not a browser tool" in refused.message
        assert answered.content == "ok" and answered.url == "http://x/"

    asyncio.run(go())
    assert asked == [("proj", "/p", "run-1", "browser_open", str(tmp_path / "scratch" / "run-1"), 30.0),
                     ("release", "proj", "run-1")]


def test_a_profile_unused_past_workspace_ttl_is_deleted_when_the_daemon_starts(tmp_path: Path) -> None:
    import os
    import time as clock

    root = tmp_path / "data" / "browser"
    old, fresh = root / "old-project", root / "fresh-project"
    for directory in (old, fresh):
        (directory / "profile").mkdir(parents=True)
    long_ago = clock.time() - 4 * 86400
    os.utime(old, (long_ago, long_ago))

    async def go(settings: BrowserSettings) -> None:
        manager = _manager(tmp_path, settings)
        serving = asyncio.get_running_loop().create_task(manager.serve())
        while manager._group is None:  # the prune runs before the group exists
            await asyncio.sleep(0.01)
        await manager.close()
        serving.cancel()

    asyncio.run(go(BrowserSettings(workspace_ttl=0)))  # "0": kept forever
    assert old.exists()
    asyncio.run(go(BrowserSettings()))  # 72 h
    assert not old.exists() and fresh.exists()


def test_a_look_for_chromium_stands_a_few_seconds_unless_the_settings_or_path_change(tmp_path: Path) -> None:
    now = [1000.0]
    settings = [BrowserSettings()]
    environ = {"PATH": str(tmp_path / "bin")}
    manager = BrowserManager(Registry(tmp_path / "state.db"), Scheduler(), lambda: settings[0], tmp_path,
                             environ=environ, clock=lambda: now[0])
    assert "no Chromium on PATH" in manager.unavailable()
    chrome = tmp_path / "bin" / "chromium"
    chrome.parent.mkdir()
    chrome.write_text("#!/bin/sh\n")
    chrome.chmod(0o755)
    now[0] += CHROMIUM_RECHECK / 2
    assert "no Chromium on PATH" in manager.unavailable()  # installed since: seen at the next look
    now[0] += CHROMIUM_RECHECK / 2
    assert manager.unavailable() == ""
    chrome.unlink()
    settings[0] = BrowserSettings(max_chrome=3)  # another configuration: looked for at once
    assert "no Chromium on PATH" in manager.unavailable()
    chrome.write_text("#!/bin/sh\n")
    chrome.chmod(0o755)
    now[0] -= 3600  # a clock set back is no reason to believe an old look
    assert manager.unavailable() == ""
    chrome.unlink()
    environ["PATH"] = str(tmp_path)
    assert "no Chromium on PATH" in manager.unavailable()

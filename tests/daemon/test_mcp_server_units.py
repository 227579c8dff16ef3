"""One MCP server supervised (`daemon/mcp_server.py`) against real server processes: the toolbox written with the
SDK's server API and the third-party mcp-server-git. No daemon: the supervisor is driven directly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import psutil
import pytest

from tests.daemon_harness import arun
from tests.mcp.servers import TOOLBOX
from yagent.daemon import mcp_process
from yagent.daemon.mcp_errors import McpUnavailable
from yagent.daemon.mcp_server import McpServer, ServerHooks, render_result
from yagent.ipc.mcp_settings import McpServerConfig
from yagent.ipc.vocabulary import McpState


class Recorded:
    def __init__(self) -> None:
        self.started: list[int] = []
        self.gone: list[int] = []
        self.changes: list[int] = []

    def hooks(self) -> ServerHooks:
        return ServerHooks(started=lambda s, p: self.started.append(p.pid), gone=lambda s, p: self.gone.append(p.pid),
                           tools_changed=lambda s: self.changes.append(s.generation))


def toolbox(state: Path, *, mode: str = "normal", page_size: int = 3, **kw: object) -> McpServerConfig:
    return McpServerConfig(name="tb", command=sys.executable,
                           args=(str(TOOLBOX), "--state", str(state), "--mode", mode, "--page-size", str(page_size)),
                           **kw)  # type: ignore[arg-type]


@asynccontextmanager
async def supervised(config: McpServerConfig, root: Path, environ: dict[str, str] | None = None,
                     recorded: Recorded | None = None) -> AsyncIterator[McpServer]:
    server = McpServer("p1", root, config, environ=os.environ if environ is None else environ,
                       hooks=(recorded or Recorded()).hooks(), marker="test-marker")
    task = asyncio.create_task(server.run())
    try:
        yield server
    finally:
        server.stop()
        async with asyncio.timeout(30):
            await task


async def ready(server: McpServer, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        await server.until(lambda s: s.state is McpState.READY)


async def file_appears(path: Path, timeout: float = 10.0) -> None:
    """The server process's own record (a file it writes): polled, with a deadline."""
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.02)


def test_every_page_is_read_and_annotations_decide_reads_and_writes(tmp_path: Path) -> None:
    async def go() -> None:
        async with supervised(toolbox(tmp_path / "s", page_size=2), tmp_path) as server:
            await ready(server)
            names = {t.name for t in server.tools}
            assert names == {"echo", "add", "slow", "crash", "big", "grow"}  # 7 tools over 4 pages, one withheld
            assert int((tmp_path / "s" / "listings").read_text()) == 4  # pages of one listing
            assert all(not t.write for t in server.tools)
            assert [w.split(":")[0] for w in server.withheld] == ["write_note"]
            assert "allow_write = true" in server.withheld[0]
            assert await server.call("add", {"a": 2, "b": 40}) == ("42", False)
        async with supervised(toolbox(tmp_path / "w", allow_write=True), tmp_path) as server:
            await ready(server)
            writes = {t.name for t in server.tools if t.write}
            assert writes == {"write_note"} and not server.withheld
        async with supervised(toolbox(tmp_path / "r", read_only=("write_note",)), tmp_path) as server:
            await ready(server)
            assert {t.name for t in server.tools if t.name == "write_note" and not t.write} == {"write_note"}

    arun(go(), 90)


def test_a_list_changed_during_the_first_listing_is_never_lost_and_the_older_list_never_wins(tmp_path: Path) -> None:
    async def go() -> None:
        recorded = Recorded()
        async with supervised(toolbox(tmp_path / "s", mode="changes-while-listed"), tmp_path, recorded=recorded) as s:
            await ready(s)
            # The first listing served the first tool set, but announced the change before it answered.
            assert [t.name for t in s.tools] == ["second_echo"]
            assert recorded.changes == [1]  # the stale listing was never published

    arun(go(), 60)


def test_a_tool_added_at_run_time_is_published_with_a_new_generation(tmp_path: Path) -> None:
    async def go() -> None:
        recorded = Recorded()
        async with supervised(toolbox(tmp_path / "s"), tmp_path, recorded=recorded) as server:
            await ready(server)
            first = server.generation
            assert await server.call("grow", {}) == ("grown", False)
            async with asyncio.timeout(10):
                await server.until(lambda s: s.generation > first)
            assert "extra" in {t.name for t in server.tools}
            assert recorded.changes[-1] == server.generation > first
            assert await server.call("extra", {}) == ("extra here", False)

    arun(go(), 60)


def test_a_server_killed_mid_call_gives_a_clear_error_and_comes_back(tmp_path: Path) -> None:
    async def go() -> None:
        recorded = Recorded()
        async with supervised(toolbox(tmp_path / "s"), tmp_path, recorded=recorded) as server:
            await ready(server)
            first_pid = server.pid
            text, is_error = await server.call("crash", {})
            assert is_error and "connection ended during the call" in text and "check whether" in text
            async with asyncio.timeout(10):
                await server.until(lambda s: s.restarts == 1)
            status = server.status()
            assert status.state in (McpState.OFFLINE, McpState.STARTING)
            await ready(server)
            assert server.restarts == 1 and server.pid not in (0, first_pid)
            assert recorded.gone == [first_pid] and len(recorded.started) == 2
            assert not psutil.pid_exists(first_pid) or psutil.Process(first_pid).status() == psutil.STATUS_ZOMBIE
            assert await server.call("echo", {"text": "back"}) == ("back", False)

    arun(go(), 60)


def test_a_server_that_exits_at_start_is_offline_with_its_stderr_and_is_tried_again(tmp_path: Path) -> None:
    async def go() -> None:
        async with supervised(toolbox(tmp_path / "s", mode="exit-at-start"), tmp_path) as server:
            async with asyncio.timeout(20):
                await server.until(lambda s: s.restarts >= 2)
            status = server.status()
            assert status.state in (McpState.OFFLINE, McpState.STARTING)
            assert "exited with status 3" in server.last_error
            assert any("refusing to start" in line for line in status.stderr_tail)
            with pytest.raises(McpUnavailable):
                await server.call("echo", {"text": "x"})

    arun(go(), 60)


def test_a_server_that_never_answers_initialize_stays_starting_then_is_given_up(tmp_path: Path) -> None:
    async def go() -> None:
        config = toolbox(tmp_path / "s", mode="never-init", startup_timeout=0.5)
        async with supervised(config, tmp_path) as server:
            assert server.state is McpState.STARTING
            with pytest.raises(McpUnavailable, match="starting"):
                await server.call("echo", {"text": "x"})
            async with asyncio.timeout(20):
                await server.settled.wait()
            assert server.state is McpState.OFFLINE
            assert "did not answer initialize within" in server.last_error

    arun(go(), 60)


def test_the_server_gets_the_configured_environment_and_nothing_else_of_the_daemons(tmp_path: Path) -> None:
    async def go() -> None:
        environ = {**os.environ, "YAGENT_TEST_DAEMON_SECRET": "sk-do-not-leak", "LC_ALL": "C.UTF-8"}
        config = toolbox(tmp_path / "s", env={"TOOLBOX_SETTING": "on"})
        async with supervised(config, tmp_path, environ=environ) as server:
            await ready(server)
        env = json.loads((tmp_path / "s" / "env.json").read_text())
        assert "YAGENT_TEST_DAEMON_SECRET" not in env
        assert env["TOOLBOX_SETTING"] == "on" and env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"
        assert env[mcp_process.MARKER_ENV] == "test-marker"
        assert set(env) <= {*mcp_process.INHERITED_ENV, "LC_ALL", "TOOLBOX_SETTING", mcp_process.MARKER_ENV,
                            "LC_CTYPE", "PWD", "SHLVL", "_"}

    arun(go(), 60)


def test_progress_keeps_a_long_call_alive_and_the_callers_deadline_cancels_it_at_the_server(tmp_path: Path) -> None:
    async def go() -> None:
        config = toolbox(tmp_path / "s", call_timeout=0.5)
        async with supervised(config, tmp_path) as server:
            await ready(server)
            # Three times the silence allowed, with a progress notice every 0.1 s: it completes.
            assert await server.call("slow", {"seconds": 1.5}) == ("slept 1.5s", False)
            text, is_error = await server.call("slow", {"seconds": 30}, timeout=0.5)
            assert is_error and "cancelled at the server" in text
            await file_appears(tmp_path / "s" / "cancelled")  # the server's own record of the cancellation
            assert await server.call("echo", {"text": "still here"}) == ("still here", False)

    arun(go(), 60)


def test_a_line_past_the_cap_and_junk_on_stdout_cost_no_daemon(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(mcp_process, "MAX_LINE", 64 * 1024)

    async def go() -> None:
        async with supervised(toolbox(tmp_path / "s", mode="junk-stdout"), tmp_path) as server:
            await ready(server)  # a stray non-JSON line is skipped
            assert (await server.call("big", {"size": 1000}))[0] == "x" * 1000
            _text, is_error = await server.call("big", {"size": 200_000})
            assert is_error
            async with asyncio.timeout(20):
                await server.until(lambda s: s.restarts == 1)
            await ready(server)
            assert await server.call("echo", {"text": "ok"}) == ("ok", False)

    arun(go(), 60)


def test_a_cancelled_call_is_cancelled_at_the_server(tmp_path: Path) -> None:
    async def go() -> None:
        async with supervised(toolbox(tmp_path / "s"), tmp_path) as server:
            await ready(server)
            call = asyncio.create_task(server.call("slow", {"seconds": 30}))
            await file_appears(tmp_path / "s" / "slow-started")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await file_appears(tmp_path / "s" / "cancelled")

    arun(go(), 60)


def test_the_third_party_git_server_from_pypi_serves_its_read_tools_and_withholds_its_writes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.st"], ["config", "user.name", "T"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "a.txt").write_text("hello\n")
    config = McpServerConfig(name="git", command=sys.executable,
                             args=("-m", "mcp_server_git", "--repository", str(repo)))

    async def go() -> None:
        async with supervised(config, repo) as server:
            await ready(server, timeout=60)
            names = {t.name for t in server.tools}
            assert "git_status" in names and "git_log" in names
            withheld = {w.split(":")[0] for w in server.withheld}
            assert {"git_commit", "git_add"} <= withheld and not names & withheld
            text, is_error = await server.call("git_status", {"repo_path": str(repo)})
            assert not is_error and "a.txt" in text

    arun(go(), 120)


def test_results_are_rendered_as_text_and_binary_content_is_named_not_inlined() -> None:
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="first"),
        types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///a", text="body")),
    ])
    text = render_result(result)
    assert text.startswith("first\n[image image/png") and "aGVsbG8=" not in text
    assert "[resource file:///a]\nbody" in text
    assert render_result(types.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'
    assert render_result(types.CallToolResult(content=[])) == "(the tool returned nothing)"


def test_a_streamable_http_server_gets_the_bearer_token_from_the_daemons_environment_and_never_shows_it(
        tmp_path: Path) -> None:
    state = tmp_path / "http"
    server = subprocess.Popen([sys.executable, str(TOOLBOX), "--state", str(state), "--http", "s3cret-token"])
    try:
        deadline = time.monotonic() + 30
        while not (state / "port").exists():  # the server process's own record of its port
            assert time.monotonic() < deadline and server.poll() is None, "the HTTP toolbox did not start"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{(state / 'port').read_text()}/mcp"
        config = McpServerConfig(name="remote", url=url, bearer_token_env="TB_TOKEN")

        async def go() -> None:
            async with supervised(config, tmp_path, environ={"TB_TOKEN": "s3cret-token"}) as remote:
                await ready(remote)
                assert await remote.call("echo", {"text": "over http"}) == ("over http", False)
                assert remote.pid == 0 and remote.status().transport == "http"
            seen = json.loads((state / "headers").read_text())
            assert seen["authorization"] == "Bearer s3cret-token"
            async with supervised(config, tmp_path, environ={}) as unset:
                async with asyncio.timeout(20):
                    await unset.until(lambda s: s.state is McpState.OFFLINE)
                assert "TB_TOKEN is not set" in unset.last_error and "Environment=" in unset.fix
            async with supervised(config, tmp_path, environ={"TB_TOKEN": "wrong-token"}) as refused:
                async with asyncio.timeout(20):
                    await refused.until(lambda s: s.state is McpState.OFFLINE)
                shown = repr(refused.status())
                assert refused.last_error and "wrong-token" not in shown and "s3cret" not in shown

        arun(go(), 90)
    finally:
        server.kill()
        server.wait(10)

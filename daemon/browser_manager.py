"""The project browsers the daemon owns: one browser host (and its Chromium) per project, started by the project's
first browser call, shared by every run of the project, each run with its own tabs.

A browser stops `[browser] idle_ttl` after its project's last task went idle, when `[browser] max_chrome` needs room
for another project (the least recently used one with no call in flight), and at daemon exit. A host that ends by
itself (Chromium killed or crashed) leaves its state saying why; the next call starts a new one. Each host and its
Chromium are recorded in state.db with pid, start time and marker before any call reaches them (the MCP servers'
table and mechanism: a starting daemon kills what a dead predecessor left, `mcp_leftovers`), under names no MCP
server can have.

Profiles live in `[browser] profile_dir` (default `$YAGENT_HOME/data/browser`), one directory per project, never
the user's own; one unused for `[browser] workspace_ttl` is deleted when the daemon starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from yagent.ipc.browser_settings import BROWSER_OFF, BrowserSettings
from yagent.ipc.messages import BrowserHostCall, BrowserHostCancel, BrowserHostReply, BrowserRelease
from yagent.ipc.private_files import make_private_dirs

from .browser_process import BrowserProcess
from .chromium_lookup import find_chromium
from .registry import Registry
from .schedule import Scheduler, Timer

__all__ = ["BROWSER_RECORD", "CHROMIUM_RECORD", "STARTUP_TIMEOUT", "BrowserManager"]

log = logging.getLogger(__name__)

# Their rows in state.db's mcp_servers: names an MCP server cannot take (they must start with a letter).
BROWSER_RECORD = "(browser)"
CHROMIUM_RECORD = "(chromium)"
STARTUP_TIMEOUT = 60.0  # a host that has not reported its Chromium by then is stopped
REPLY_SLACK = 5.0  # a host's reply may come this long after the call's own deadline (it says why it ran over)
CLOSE_GRACE = 3.0
# How long a lookup of Chromium stands: every run's spec says whether a browser can start, and a search of PATH
# is some forty stat calls (~0.2 ms) on the daemon's loop before the run's worker is handed its run.
CHROMIUM_RECHECK = 5.0


class BrowserUnavailable(Exception):
    """No browser can serve the call; the message says why and what to do."""


@dataclass(slots=True, eq=False)
class _ProjectBrowser:
    project_id: str
    root: Path
    process: BrowserProcess | None = None
    state: str = "not started"
    version: str = ""
    sandbox: str = ""
    last_error: str = ""
    started: float = 0.0
    last_used: float = 0.0
    in_flight: int = 0
    in_use: bool = False
    restarts: int = 0
    idle_timer: Timer | None = None
    starting: asyncio.Task[BrowserProcess] | None = None
    stopping: bool = False


class BrowserManager:
    def __init__(self, registry: Registry, scheduler: Scheduler, settings: Callable[[], BrowserSettings],
                 home: Path, *, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 spawn: Callable[[list[str], Mapping[str, str], str, Path], Awaitable[BrowserProcess]] | None = None
                 ) -> None:
        self._registry = registry
        self._spawn = spawn or BrowserProcess.start  # a seam: what starts a host from its arguments
        self._scheduler = scheduler
        self._settings = settings
        self._home = home
        self._environ = os.environ if environ is None else environ
        self._clock = clock
        self._browsers: dict[str, _ProjectBrowser] = {}
        self._group: asyncio.TaskGroup | None = None
        self._closed = asyncio.Event()
        self._ids = itertools.count(1)
        self._lookup: tuple[BrowserSettings, str | None, float, str] | None = None  # settings, PATH, until, why

    # -- the owner of every host's life --------------------------------------------------------------------------

    async def serve(self) -> None:
        """Hold the task group every host's conversation runs in; after `close`, wait to be cancelled with the
        daemon's other loops."""
        await asyncio.to_thread(self._prune_profiles)
        async with asyncio.TaskGroup() as group:
            self._group = group
            await self._closed.wait()
        self._group = None
        await asyncio.get_running_loop().create_future()

    async def close(self) -> None:
        """Stop every browser (the daemon is stopping)."""
        browsers = list(self._browsers.values())
        for browser in browsers:
            if browser.idle_timer is not None:
                browser.idle_timer.cancel()
            if browser.starting is not None:
                browser.starting.cancel()
        stops = [self._stop(b, "yagentd is stopping") for b in browsers if b.process is not None]
        if stops:
            await asyncio.gather(*stops, return_exceptions=True)
        self._closed.set()

    # -- what the daemon asks ------------------------------------------------------------------------------------

    def unavailable(self) -> str:
        """Why no browser can start ("" when one can): turned off, or no Chromium (looked for again once the last
        look is `CHROMIUM_RECHECK` seconds old, or the settings or PATH changed)."""
        settings = self._settings()
        if not settings.enabled:
            return BROWSER_OFF
        path, now, last = self._environ.get("PATH"), self._clock(), self._lookup
        # A clock that went back makes a look stale too.
        if last is None or (last[0], last[1]) != (settings, path) or not last[2] - CHROMIUM_RECHECK <= now < last[2]:
            last = self._lookup = (settings, path, now + CHROMIUM_RECHECK, find_chromium(settings, self._environ)[1])
        return last[3]

    def status_lines(self) -> list[str]:
        """What `yagent daemon status` says of the browsers: which Chromium, or why none; each project's browser."""
        settings = self._settings()
        problem = self.unavailable()
        if problem:
            lines = [f"browser: unavailable: {problem}"]
        elif settings.mode == "attach":
            lines = [f"browser: attaches to {settings.cdp_url} ([browser] mode = \"attach\")"]
        else:
            chrome = find_chromium(settings, self._environ)[0]
            sandbox = "its sandbox off (yagentd runs as root)" if os.geteuid() == 0 else "its sandbox on"
            lines = [f"browser: {chrome}, {settings.mode}, {sandbox}; at most {settings.max_chrome} at once"]
        now = self._clock()
        for browser in self._browsers.values():
            if browser.state == "not started" and not browser.last_error:
                continue  # a project in use that never asked for a browser
            line = f"  {browser.root}: {browser.state}"
            if browser.process is not None and browser.state == "ready":
                line += (f" (Chromium {browser.version}, pid {browser.process.browser_pid or '?'}, up "
                         f"{now - browser.started:.0f} s, last used {now - browser.last_used:.0f} s ago)")
            if browser.last_error:
                line += f"; last problem: {browser.last_error}"
            lines.append(line)
        return lines

    def project_in_use(self, project_id: str, root: str) -> None:
        browser = self._browser(project_id, root)
        browser.in_use = True
        if browser.idle_timer is not None:
            browser.idle_timer.cancel()
            browser.idle_timer = None

    def project_idle(self, project_id: str) -> None:
        """The project's last task went idle: its browser stops after `[browser] idle_ttl` unless a turn comes."""
        browser = self._browsers.get(project_id)
        if browser is None:
            return
        browser.in_use = False
        if browser.idle_timer is not None:
            browser.idle_timer.cancel()
        browser.idle_timer = self._scheduler.after(self._settings().idle_ttl, lambda: self._idle_expired(browser),
                                                   f"browser-ttl-{project_id}")

    def _idle_expired(self, browser: _ProjectBrowser) -> None:
        browser.idle_timer = None
        if browser.in_use or browser.process is None or self._group is None:
            return
        log.info("stopping the browser of %s: the project was idle past [browser] idle_ttl", browser.root)
        self._group.create_task(self._stop(browser, "stopped: its project was idle past [browser] idle_ttl; the "
                                                    "next browser call starts it"))

    def release(self, project_id: str, session: str) -> None:
        """Run `session` ended: its tabs close (its browser goes on for the project's other runs)."""
        browser = self._browsers.get(project_id)
        if browser is not None and browser.process is not None:
            browser.process.send(BrowserRelease(session=session))

    # -- calls ---------------------------------------------------------------------------------------------------

    async def call(self, project_id: str, root: str, session: str, tool: str, arguments: dict, *, downloads: str,
                   timeout: float) -> BrowserHostReply:
        """One browser tool call of run `session`; errors are replies the model reads, never exceptions."""
        settings = self._settings()
        limit = min(t for t in (timeout, settings.command_timeout) if t > 0)
        browser = self._browser(project_id, root)
        problem = self.unavailable()
        if problem:
            return BrowserHostReply(id=0, is_error=True, content=f"{tool}: the browser is unavailable: {problem}")
        if tool == "browser_status" and browser.process is None:
            return BrowserHostReply(id=0, content=self._idle_status(browser, settings))
        try:
            process = await self._running(browser, limit)
        except BrowserUnavailable as exc:
            return BrowserHostReply(id=0, is_error=True, content=f"{tool}: {exc}")
        request_id = next(self._ids)
        reply = process.expect(request_id)
        if not process.send(BrowserHostCall(id=request_id, session=session, tool=tool, arguments=arguments,
                                            downloads=downloads, timeout=limit)):
            reply.cancel()
            return BrowserHostReply(id=0, is_error=True, content=f"{tool}: the browser was ending; call again")
        browser.in_flight += 1
        browser.last_used = self._clock()
        try:
            async with asyncio.timeout(limit + REPLY_SLACK):
                answer = await reply
            if answer.gone:
                self._retire(browser, process)
            return answer
        except TimeoutError:
            process.send(BrowserHostCancel(id=request_id))
            return BrowserHostReply(id=0, is_error=True, content=f"{tool}: the browser did not answer within "
                                    f"{limit:.0f} s; it may be stuck: browser_status shows its state")
        except ConnectionError as exc:
            return BrowserHostReply(id=0, is_error=True, content=(
                f"{tool}: the browser went away during the call ({exc}); the next browser call starts it again, "
                "with your tabs gone: browser_open the page again"))
        except asyncio.CancelledError:
            process.send(BrowserHostCancel(id=request_id))
            raise
        finally:
            process.replies.pop(request_id, None)
            browser.in_flight -= 1
            browser.last_used = self._clock()

    def _retire(self, browser: _ProjectBrowser, process: BrowserProcess) -> None:
        """Its Chromium went away: the host is ending; the next call starts a new one without waiting for it."""
        if browser.process is not process:
            return
        browser.process = None
        browser.restarts += 1
        browser.last_error = "Chromium went away during a call"
        browser.state = "stopped: it went away; the next browser call starts it again"
        log.warning("browser of %s: %s", browser.root, browser.last_error)
        if self._group is not None:
            self._group.create_task(process.stop())

    def _idle_status(self, browser: _ProjectBrowser, settings: BrowserSettings) -> str:
        chrome = find_chromium(settings, self._environ)[0] or settings.cdp_url
        text = f"The browser is not running in this project ({browser.state}); the next browser_open starts " \
               f"{chrome} ({settings.mode}). You have no tabs."
        if browser.last_error:
            text += f" Last problem: {browser.last_error}."
        return text

    async def _running(self, browser: _ProjectBrowser, limit: float) -> BrowserProcess:
        if browser.process is not None and browser.state == "ready" and not browser.process.exited.is_set():
            return browser.process
        if browser.starting is None or browser.starting.done():
            if self._group is None:
                raise BrowserUnavailable("the browser manager is not serving (yagentd is starting or stopping)")
            browser.starting = self._group.create_task(self._start(browser))
        try:
            return await asyncio.shield(browser.starting)
        except asyncio.CancelledError:
            if browser.starting.cancelled():
                raise BrowserUnavailable("the browser's start was cancelled (yagentd is stopping)") from None
            raise

    async def _start(self, browser: _ProjectBrowser) -> BrowserProcess:
        settings = self._settings()
        chrome, problem = find_chromium(settings, self._environ)
        if problem:
            raise BrowserUnavailable(problem)
        await self._make_room(browser, settings)
        profile = self._profile_dir(browser.project_id, settings)
        try:
            make_private_dirs(profile)
            os.utime(profile.parent)
        except OSError as exc:
            raise BrowserUnavailable(f"cannot make the browser profile directory {profile}: {exc}") from None
        args = [f"--chrome={chrome}", f"--root={browser.root}", f"--profile={profile}", f"--mode={settings.mode}",
                f"--dialog-policy={settings.dialog_policy}", f"--max-output={settings.max_output_bytes}",
                f"--parent={os.getpid()}"]
        if settings.cdp_url:
            args.append(f"--cdp-url={settings.cdp_url}")
        args += [f"--allow={host}" for host in settings.allowed_domains]
        args += [f"--deny={host}" for host in settings.denied_domains]
        marker = uuid.uuid4().hex
        browser.state = "starting"
        try:
            process = await self._spawn(args, self._environ, marker, profile.parent)
        except OSError as exc:
            browser.state, browser.last_error = "not started", f"the browser host could not be started: {exc}"
            raise BrowserUnavailable(browser.last_error) from None
        self._record(browser, BROWSER_RECORD, process.pid, process.started_at, marker)
        browser.process = process
        assert self._group is not None
        self._group.create_task(self._talk(browser, process), name=f"browser-{browser.project_id}")
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT):
                ready = await asyncio.shield(process.ready)
        except (TimeoutError, ConnectionError) as exc:
            why = f"did not report within {STARTUP_TIMEOUT:.0f} s" if isinstance(exc, TimeoutError) else str(exc)
            tail = "; ".join(list(process.stderr_tail)[-3:])
            browser.last_error = f"the browser host {why}" + (f" ({tail})" if tail else "")
            await self._stop(browser, "not started")
            raise BrowserUnavailable(browser.last_error) from None
        if ready.problem:
            browser.last_error = ready.problem
            await self._stop(browser, "not started")
            raise BrowserUnavailable(ready.problem)
        process.note_browser(ready.browser_pid, _descendants(process.pid))
        if process.browser_pid:
            self._record(browser, CHROMIUM_RECORD, process.browser_pid, process.browser_started_at, marker)
        browser.state, browser.version, browser.sandbox = "ready", ready.version, ready.sandbox
        browser.started = browser.last_used = self._clock()
        log.info("browser of %s: Chromium %s started (host pid %d, browser pid %d, sandbox %s)", browser.root,
                 ready.version, process.pid, process.browser_pid, ready.sandbox)
        return process

    async def _talk(self, browser: _ProjectBrowser, process: BrowserProcess) -> None:
        try:
            await process.talk()
        finally:
            if process.browser_pid:
                # Chromium leaves with its pipe; whatever of it has not yet, goes now.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.browser_pid, 9)
            self._forget(browser, BROWSER_RECORD, process.pid)
            if process.browser_pid:
                self._forget(browser, CHROMIUM_RECORD, process.browser_pid)
            if browser.process is process:
                browser.process = None
                if not browser.stopping and browser.state == "ready":
                    browser.restarts += 1
                    browser.last_error = f"Chromium went away ({process.end_text()})"
                    browser.state = "stopped: it went away; the next browser call starts it again"
                    log.warning("browser of %s: %s", browser.root, browser.last_error)

    async def _stop(self, browser: _ProjectBrowser, why: str) -> None:
        process = browser.process
        if process is None:
            return
        browser.stopping = True
        try:
            await process.stop()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_GRACE):
                    await process.exited.wait()
        finally:
            browser.stopping = False
            if browser.process is process:
                browser.process = None
            browser.state = why

    async def _make_room(self, browser: _ProjectBrowser, settings: BrowserSettings) -> None:
        running = [b for b in self._browsers.values() if b.process is not None and b is not browser]
        if len(running) < settings.max_chrome:
            return
        idle = sorted((b for b in running if b.in_flight == 0), key=lambda b: b.last_used)
        if not idle:
            raise BrowserUnavailable(f"[browser] max_chrome = {settings.max_chrome} browsers run already, each busy "
                                     "with a call; try again in a moment, or raise max_chrome")
        victim = idle[0]
        log.info("stopping the browser of %s to make room for %s ([browser] max_chrome = %d)", victim.root,
                 browser.root, settings.max_chrome)
        await self._stop(victim, f"stopped to make room for another project's browser ([browser] max_chrome = "
                                 f"{settings.max_chrome}); the next browser call starts it")

    # -- records and files ---------------------------------------------------------------------------------------

    def _browser(self, project_id: str, root: str | Path) -> _ProjectBrowser:
        browser = self._browsers.get(project_id)
        if browser is None:
            browser = self._browsers[project_id] = _ProjectBrowser(project_id, Path(root))
        return browser

    def _record(self, browser: _ProjectBrowser, name: str, pid: int, started_at: float, marker: str) -> None:
        try:
            self._registry.mcp_server_started(browser.project_id, name, pid, started_at, marker)
        except sqlite3.Error as exc:
            log.error("cannot record the browser process %d of %s in %s: %s", pid, browser.root, self._registry.path,
                      exc)

    def _forget(self, browser: _ProjectBrowser, name: str, pid: int) -> None:
        try:
            self._registry.mcp_server_gone(browser.project_id, name, pid)
        except sqlite3.Error as exc:
            log.error("cannot record the end of browser process %d in %s: %s", pid, self._registry.path, exc)

    def _profiles_root(self, settings: BrowserSettings) -> Path:
        return Path(os.path.expanduser(settings.profile_dir)) if settings.profile_dir else \
            self._home / "data" / "browser"

    def _profile_dir(self, project_id: str, settings: BrowserSettings) -> Path:
        return self._profiles_root(settings) / project_id / "profile"

    def _prune_profiles(self) -> None:
        """Delete the browser directories of projects unused for `[browser] workspace_ttl` (0: never)."""
        settings = self._settings()
        if settings.workspace_ttl <= 0:
            return
        root = self._profiles_root(settings)
        cutoff = time.time() - settings.workspace_ttl
        with contextlib.suppress(OSError):
            for entry in os.scandir(root):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        shutil.rmtree(entry.path)
                        log.info("removed the browser profile of project %s: unused past [browser] workspace_ttl",
                                 entry.name)


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()

"""The browser host's conversation with the daemon over its stdin and stdout (`ipc.pipe_frames`): one
`BrowserHostReady` once Chromium runs (or why it cannot), then a `BrowserHostReply` per `BrowserHostCall`.

Calls of one run are carried out one at a time (its pages are one user's); calls of different runs may overlap.
A `BrowserHostCancel` withdraws a call, a `BrowserRelease` closes a run's pages. The host ends when its stdin
ends (the daemon closed it, or died), and when Chromium went away — after answering every call in flight with the
reason — so that the daemon starts a fresh one with the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from typing import Any

from yagent.ipc.errors import IpcError
from yagent.ipc.messages import (
    BrowserHostCall,
    BrowserHostCancel,
    BrowserHostReady,
    BrowserHostReply,
    BrowserRelease,
)
from yagent.ipc.pipe_frames import FrameReader, framed
from yagent.ipc.records import Message

from .actions import perform
from .host import BrowserGone, BrowserHost, HostOptions

__all__ = ["EXIT_BROWSER_GONE", "EXIT_NO_BROWSER", "serve"]

log = logging.getLogger(__name__)

EXIT_NO_BROWSER = 2  # Chromium could not be started
EXIT_BROWSER_GONE = 3  # Chromium went away; the daemon starts a new host with the next call
MAX_CALL_SECONDS = 3600.0


class _Conversation:
    def __init__(self, host: BrowserHost, writer: asyncio.StreamWriter | Any) -> None:
        self.host = host
        self.writer = writer
        self.calls: dict[int, asyncio.Task[None]] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    def send(self, msg: Message) -> None:
        try:
            self.writer.write(framed(msg))
        except IpcError as exc:  # over the frame cap: say so instead
            if isinstance(msg, BrowserHostReply):
                self.writer.write(framed(BrowserHostReply(id=msg.id, content=f"the answer was too large: {exc}",
                                                          is_error=True)))

    def on_message(self, msg: Message) -> None:
        if isinstance(msg, BrowserHostCall):
            if msg.id in self.calls:
                return
            task = asyncio.get_running_loop().create_task(self._call(msg))
            self.calls[msg.id] = task
            task.add_done_callback(lambda _t, i=msg.id: self.calls.pop(i, None))
        elif isinstance(msg, BrowserHostCancel):
            task = self.calls.get(msg.id)
            if task is not None:
                task.cancel()
        elif isinstance(msg, BrowserRelease):
            self.locks.pop(msg.session, None)
            asyncio.get_running_loop().create_task(self.host.release(msg.session))

    async def _call(self, msg: BrowserHostCall) -> None:
        timeout = msg.timeout if 0 < msg.timeout <= MAX_CALL_SECONDS else 75.0
        deadline = time.monotonic() + timeout
        lock = self.locks.setdefault(msg.session, asyncio.Lock())
        pages = self.host.session(msg.session, msg.downloads)
        try:
            async with asyncio.timeout(timeout):
                async with lock:
                    outcome = await perform(self.host, pages, msg.tool, msg.arguments, deadline)
        except asyncio.CancelledError:
            return  # withdrawn: nobody waits for the answer
        except TimeoutError:
            self.send(BrowserHostReply(id=msg.id, is_error=True, content=(
                f"{msg.tool} did not finish within {timeout:.0f} s ([browser] command_timeout, or the run's own "
                "deadline); the page may still be busy: browser_snapshot shows it as it is")))
            return
        except BrowserGone as gone:
            self.send(BrowserHostReply(id=msg.id, is_error=True, content=_gone_text(msg.tool, str(gone)), gone=True))
            return
        except Exception as exc:  # a bug here must still answer, or the run waits until its deadline
            log.exception("browser call %s failed", msg.tool)
            self.send(BrowserHostReply(id=msg.id, is_error=True, content=f"{msg.tool} failed in yagent's browser "
                                       f"host: {type(exc).__name__}: {str(exc)[:300]}"))
            return
        url = ""
        with contextlib.suppress(Exception):
            url = pages.current.url if pages.current is not None and not pages.current.is_closed() else ""
        self.send(BrowserHostReply(id=msg.id, content=outcome.text, is_error=outcome.is_error, image=outcome.image,
                                   url=url))


def _gone_text(tool: str, why: str) -> str:
    return (f"{tool}: the browser went away during the call ({why}); the next browser call starts it again, with "
            "your tabs gone: browser_open the page again")


async def serve(options: HostOptions) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(1, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    host = BrowserHost(options)
    try:
        await host.start()
    except Exception as exc:
        writer.write(framed(BrowserHostReady(problem=_launch_problem(options, exc))))
        with contextlib.suppress(Exception):
            await writer.drain()
        await host.close()
        return EXIT_NO_BROWSER
    writer.write(framed(BrowserHostReady(
        browser_pid=host.browser_pid, version=host.version,
        sandbox="on" if options.sandbox else "off: yagentd runs as root, where Chromium's sandbox cannot run")))
    talk = _Conversation(host, writer)
    frames = FrameReader()
    gone = loop.create_task(host.gone.wait())
    try:
        while True:
            read = loop.create_task(reader.read(65536))
            await asyncio.wait({read, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone.done():
                read.cancel()
                for task in list(talk.calls.values()):
                    await asyncio.wait({task}, timeout=2.0)
                return EXIT_BROWSER_GONE
            data = read.result()
            if not data:
                return 0
            try:
                for msg in frames.feed(data):
                    talk.on_message(msg)
            except IpcError as exc:
                print(f"yagent browser host: the daemon's stream cannot be read ({exc}); ending", file=sys.stderr)
                return 1
    finally:
        gone.cancel()
        for task in list(talk.calls.values()):
            task.cancel()
        with contextlib.suppress(Exception):
            await writer.drain()
        await host.close()


def _launch_problem(options: HostOptions, exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), type(exc).__name__)[:400]
    if options.mode == "attach":
        return f"cannot attach to the browser at [browser] cdp_url = {options.cdp_url}: {first}"
    if "No usable sandbox" in str(exc) or "sandbox" in first.lower():
        return (f"Chromium ({options.chrome}) could not start its sandbox: {first}. Allow unprivileged user "
                "namespaces (sysctl kernel.unprivileged_userns_clone=1) or run Chromium's setuid sandbox")
    if options.mode == "headful" and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return f'[browser] mode = "headful" needs a display (DISPLAY is not set): {first}'
    return f"Chromium ({options.chrome}) could not be started: {first}"

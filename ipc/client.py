"""Request/reply with the daemon over control.sock, with deadlines.

`DaemonClient` is asyncio-based (the TUI runs on asyncio); the CLI drives it with `asyncio.run`.
A client that cannot reach the daemon gets `DaemonNotRunning` at once instead of a hang: before
speaking ZeroMQ we try a plain Unix connect, which fails immediately when nobody listens. Its hello carries
the runtime directory's client token (`client_token`), without which yagentd answers nothing; when the daemon
restarted under the connection (a new token, a daemon that does not know it) the client says hello again.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from pathlib import Path
from typing import TypeVar

import zmq
import zmq.asyncio

from .client_token import read_client_token
from .errors import DaemonNotRunning, ProtocolError, ProtocolMismatch, RemoteError, RequestTimeout
from .messages import PROTOCOL_VERSION, Hello, HelloReply
from .pending_replies import PendingReplies
from .records import Message, decode, encode
from .runtime_dir import RuntimePaths, ensure_runtime_dir, resolve_runtime_dir
from .sockets import connect_dealer
from .vocabulary import ErrorCode

__all__ = ["DaemonClient", "daemon_listening"]

R = TypeVar("R", bound=Message)


def daemon_listening(paths: RuntimePaths) -> bool:
    """True when something accepts connections on control.sock."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(paths.control))
        return True
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTDIR):
            return False
        raise
    finally:
        probe.close()


class DaemonClient:
    """One connection to yagentd's control socket."""

    def __init__(
        self,
        runtime_dir: Path | None = None,
        *,
        timeout: float = 10.0,
        connect_timeout: float = 5.0,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        self.runtime_dir = runtime_dir or resolve_runtime_dir()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._ctx = context or zmq.asyncio.Context.instance()
        self._sock: zmq.asyncio.Socket | None = None
        self._pending = PendingReplies()
        self._reader: asyncio.Task[None] | None = None
        self.paths: RuntimePaths | None = None
        self.hello: HelloReply | None = None
        self.token = ""  # the client token this connection authenticated with (events.sock takes it too)

    async def __aenter__(self) -> DaemonClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> HelloReply:
        self.paths = ensure_runtime_dir(self.runtime_dir, create=False) if self.runtime_dir.exists() else None
        if self.paths is None or not daemon_listening(self.paths):
            raise DaemonNotRunning(str(self.runtime_dir))
        self._sock = connect_dealer(self._ctx, RuntimePaths.endpoint(self.paths.control))
        self._reader = asyncio.get_running_loop().create_task(self._read_replies(), name="daemon-client-reader")
        self._reader.add_done_callback(self._reader_ended)
        try:
            reply = await self._say_hello()
        except RequestTimeout:
            await self.close()
            raise RequestTimeout(
                f"yagentd accepted the connection on {self.paths.control} but did not answer within "
                f"{self.connect_timeout:.0f}s; it may be overloaded or stuck — try `yagent daemon stop` "
                "and `yagent daemon start`"
            ) from None
        except RemoteError as exc:
            await self.close()
            if exc.code == ErrorCode.PROTOCOL_MISMATCH:
                raise ProtocolMismatch(str(exc)) from None
            raise
        return reply

    async def _say_hello(self) -> HelloReply:
        """Authenticate this connection with the token yagentd wrote at its start (read anew each time)."""
        assert self.paths is not None
        try:
            token, unreadable = read_client_token(self.paths.token), ""
        except OSError as exc:
            token, unreadable = "", f"{self.paths.token}: {exc.strerror or exc}"
        hello = Hello(id=0, version=PROTOCOL_VERSION, pid=os.getpid(), token=token)
        try:
            reply = await self._request(hello, HelloReply, self.connect_timeout)
        except RemoteError as exc:
            if exc.code == ErrorCode.UNAUTHENTICATED and unreadable:
                raise RemoteError(exc.code, f"{exc} (this client cannot read the token: {unreadable})") from None
            raise
        self.token, self.hello = token, reply
        return reply

    def _reader_ended(self, reader: asyncio.Task[None]) -> None:
        """A reader that died (the socket failed) fails the requests waiting on it, rather than their timeouts."""
        if not reader.cancelled() and reader.exception() is not None:
            self._pending.fail_all(ProtocolError(f"the connection to yagentd failed: {reader.exception()}"))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            # gather, not a suppressed await: a cancellation of the caller itself must go through
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        self._pending.cancel_all()
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    async def request(self, msg: Message, expect: type[R], *, timeout: float | None = None) -> R:
        """Send `msg` (its `id` is assigned here) and wait for the reply of type `expect`."""
        try:
            return await self._request(msg, expect, timeout)
        except RemoteError as exc:
            if exc.code != ErrorCode.UNAUTHENTICATED or self.hello is None or isinstance(msg, Hello):
                raise
        # yagentd restarted under this connection: it has a new token and does not know us. Once more, after
        # a hello; the refused request was not acted on, so sending it again is safe.
        await self._say_hello()
        return await self._request(msg, expect, timeout)

    async def _request(self, msg: Message, expect: type[R], timeout: float | None) -> R:
        if self._sock is None:
            raise DaemonNotRunning(str(self.runtime_dir))
        with self._pending.expect(msg) as reply:
            await self._sock.send(encode(msg))
            return await reply.get(expect, timeout=timeout if timeout is not None else self.timeout)

    async def _read_replies(self) -> None:
        assert self._sock is not None
        while True:
            frame = await self._sock.recv()
            try:
                reply = decode(frame)
            except ProtocolError:  # malformed or over the cap
                continue  # a daemon bug must not kill the client; the request will time out
            self._pending.resolve(reply)

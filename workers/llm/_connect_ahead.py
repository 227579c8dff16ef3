"""The provider connection of a new run, opened while the run is still being built.

A run's first model request otherwise opens its connection on the spot: a TCP handshake, then for HTTPS a TLS
handshake, each a round trip to the provider (tens of milliseconds to a remote one) spent after the request is
ready. `ConnectAheadTransport` is httpx's own transport over an httpcore pool whose network backend can be asked to
open the connection to an origin ahead (`open_ahead`); the pool's first connection to that origin then takes it
instead of connecting. One connection per origin, used once: later ones are the pool's as usual.

A connection opened ahead is only handed over while it is fresh (`MAX_AGE`) and the server has not closed it; a
failed attempt is forgotten and the request connects as it would have, so its error is the request's own.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import ipaddress
import logging
import os
import socket
import ssl
import time
import types
import typing
import urllib.request
from collections.abc import Callable, Iterable

import anyio.abc
import httpcore
import httpx

try:  # httpcore's own stream over an anyio socket: a socket connected here is handed to the pool in it
    from httpcore._backends.anyio import AnyIOStream as _SocketStream
except ImportError:  # moved in another httpcore: connections ahead are opened by its backend (after the build)
    _SocketStream = None  # type: ignore[assignment,misc]

__all__ = ["MAX_AGE", "ConnectAheadTransport", "connects_ahead"]

log = logging.getLogger(__name__)

# A server may close an idle connection after a few seconds (keep-alive timeouts of 5 s are common): one opened
# ahead for a run that then waited (paused at its start) is not used after this long.
MAX_AGE = 2.0

_DEFAULT_PORTS = {"http": 80, "https": 443}

SocketOptions = Iterable[tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]]


@functools.cache
def connects_ahead() -> bool:
    """Whether a run's client may open connections ahead: not when the environment names a proxy, which httpx's
    default transport honours (per URL, with NO_PROXY) and a transport of our own would bypass.

    Worked out once per process, and first by the forkserver's preload: reading the proxies decodes every variable
    of the environment (0.15-0.35 ms in a fresh worker, on its way to its first request), and a worker's
    environment is the forkserver's, whose proxies nothing changes. `connects_ahead.cache_clear()` reads it anew."""
    # `no` (NO_PROXY) names hosts to reach directly: alone it changes nothing.
    return not any(scheme in urllib.request.getproxies() for scheme in ("http", "https", "all"))


def _ip_version(host: str) -> int:
    """4 or 6 for an IP address, 0 for a host name."""
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 0


class _Ahead:
    """One connection being opened, or opened, ahead of the request that will use it."""

    task: asyncio.Task[httpcore.AsyncNetworkStream]

    def __init__(self) -> None:
        self.opened_at: float | None = None  # when it was open (TLS included); None while being opened, or failed


class _OpenedAhead(httpcore.AsyncNetworkStream):
    """A connection that was opened ahead, TLS included: the pool's own `start_tls` on it is a no-op when it asks
    for what was done ahead, and otherwise (a different server name) a fresh connection does it."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, tls: tuple[ssl.SSLContext, str],
                 reconnect: Callable[[], typing.Awaitable[httpcore.AsyncNetworkStream]]) -> None:
        self._stream = stream
        self._tls = tls
        self._reconnect = reconnect

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        context, name = self._tls
        if ssl_context is context and server_hostname == name:
            return self._stream
        await self._stream.aclose()
        fresh = await self._reconnect()
        return await fresh.start_tls(ssl_context, server_hostname, timeout)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class AheadBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default network backend, plus connections opened ahead for the pool's first connect to them."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()
        self._clock = clock
        self._ahead: dict[tuple[str, int], _Ahead] = {}

    def open_ahead(self, host: str, port: int, timeout: float, tls: tuple[ssl.SSLContext, str] | None) -> bool:
        """Start opening a connection to (host, port), TLS with `tls` (context, server name) included; False if one
        is opened ahead already. The TCP handshake with an IP address starts before this returns: the caller may
        keep the loop busy for a while (a run being built) and the handshake still travels meanwhile."""
        key = (host, port)
        if key in self._ahead:
            return False
        loop = asyncio.get_running_loop()
        # A host name is left to httpcore's backend (anyio: resolved in a thread, its addresses tried in turn and, after
        # 250 ms, side by side): it starts once the loop runs again.
        version = _ip_version(host)
        dial = _Dial(host, port, version) if version and _SocketStream is not None else None
        ahead = _Ahead()
        ahead.task = loop.create_task(self._open(ahead, dial, host, port, timeout, tls),
                                      name=f"connect-ahead-{host}:{port}")
        ahead.task.add_done_callback(lambda task: _opened(task, dial))
        self._ahead[key] = ahead
        return True

    async def _open(self, ahead: _Ahead, dial: _Dial | None, host: str, port: int, timeout: float,
                    tls: tuple[ssl.SSLContext, str] | None) -> httpcore.AsyncNetworkStream:
        if dial is None:
            stream = await self._inner.connect_tcp(host, port, timeout=timeout)
        else:
            assert _SocketStream is not None
            async with asyncio.timeout(timeout):
                sock = await dial.connected()
            try:
                stream = _SocketStream(await anyio.abc.SocketStream.from_socket(sock))
            except BaseException:
                sock.close()
                raise
        if tls is None:
            ahead.opened_at = self._clock()
            return stream
        context, name = tls
        try:
            secured = await stream.start_tls(context, name, timeout)
        except BaseException:
            await stream.aclose()
            raise
        ahead.opened_at = self._clock()  # its age counts from the handshakes' end, not from their start
        return _OpenedAhead(secured, tls, lambda: self._inner.connect_tcp(host, port, timeout=timeout))

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: SocketOptions | None = None) -> httpcore.AsyncNetworkStream:
        # A connection asked for with options of its own is not the one opened ahead (which stays for the next).
        ahead = self._ahead.pop((host, port), None) if local_address is None and not socket_options else None
        if ahead is not None:
            stream = await self._take(ahead, timeout)
            if stream is not None:
                return stream
        return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def _take(self, ahead: _Ahead, timeout: float | None) -> httpcore.AsyncNetworkStream | None:
        """The connection opened ahead if it is usable: still being opened is waited for (it is nearer done than a
        new one) within the request's connect `timeout`; failed or stale is left for a new connection."""
        try:
            async with asyncio.timeout(timeout):
                stream = await asyncio.shield(ahead.task)
        except (asyncio.CancelledError, TimeoutError) as exc:
            # The request was cancelled, or its time to connect is up: what was being opened is not left behind.
            ahead.task.cancel()
            ahead.task.add_done_callback(_close_opened)
            if isinstance(exc, TimeoutError):
                raise httpcore.ConnectTimeout(f"no connection within {timeout:g}s") from exc
            raise
        except Exception as exc:
            log.debug("the connection opened ahead failed (%s); connecting anew", exc)
            return None
        # A server that closed a plain connection (an idle timeout) made it readable: it would fail the request. A TLS
        # one is readable anyway once the server sent its session tickets after the handshake: only its age counts.
        closed = not isinstance(stream, _OpenedAhead) and stream.get_extra_info("is_readable")
        if closed or ahead.opened_at is None or self._clock() - ahead.opened_at > MAX_AGE:
            await stream.aclose()
            return None
        return stream

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: SocketOptions | None = None) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    async def aclose(self) -> None:
        """Close what was opened ahead and not used; what is still being opened is cancelled (or closed once open)."""
        ahead, self._ahead = list(self._ahead.values()), {}
        for item in ahead:
            if not item.task.done():
                item.task.cancel()
                item.task.add_done_callback(_close_opened)
            elif not item.task.cancelled() and item.task.exception() is None:
                await item.task.result().aclose()


class _Dial:
    """A TCP connection to an IP address started at once: its handshake begins before the caller's next await."""

    def __init__(self, host: str, port: int, version: int) -> None:
        self._sock: socket.socket | None = None
        self._error: OSError | None = None
        family = socket.AF_INET6 if version == 6 else socket.AF_INET
        try:
            self._sock = _dialled(family, (host, port))
        except OSError as exc:
            self._error = exc

    async def connected(self) -> socket.socket:
        """The socket once its handshake is done; its error otherwise."""
        if self._error is not None:
            raise self._error
        assert self._sock is not None
        sock, self._sock = self._sock, None
        return await _handshake_done(asyncio.get_running_loop(), sock)

    def close(self) -> None:
        """Close the socket if `connected` did not take it (its task was cancelled before it ran)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _dialled(family: int, address: tuple[typing.Any, ...]) -> socket.socket:
    """A non-blocking socket whose connect to `address` is under way (or done, or refused at once: raised)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's own TCP connections
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            raise OSError(code, f"cannot connect to {address[0]} port {address[1]}: {os.strerror(code)}")
    except BaseException:
        sock.close()
        raise
    return sock


async def _handshake_done(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> socket.socket:
    """`sock` once its connect has finished (it is writable then); raises the connect's error, closing it."""
    try:
        writable: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_writer(fd, lambda: writable.done() or writable.set_result(None))
        try:
            await writable
        finally:
            loop.remove_writer(fd)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, f"cannot connect: {os.strerror(code)}")
    except BaseException:
        sock.close()
        raise
    return sock


def _opened(task: asyncio.Task[httpcore.AsyncNetworkStream], dial: _Dial | None) -> None:
    if dial is not None:
        dial.close()  # a task cancelled before it ran never took its socket
    _forget_failure(task)


def _forget_failure(task: asyncio.Future[typing.Any]) -> None:
    # Retrieved here so an attempt nobody waited for is not reported as an unretrieved exception.
    if not task.cancelled():
        task.exception()


def _close_opened(task: asyncio.Task[httpcore.AsyncNetworkStream]) -> None:
    """A connection that finished opening after nobody wanted it any more: closed."""
    if task.cancelled() or task.exception() is not None:
        return
    closing = asyncio.ensure_future(task.result().aclose())
    closing.add_done_callback(_forget_failure)


class ConnectAheadTransport(httpx.AsyncHTTPTransport):
    """httpx's transport for a run's provider client, able to open a connection before its first request."""

    def __init__(self, ssl_context: ssl.SSLContext, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(verify=ssl_context)
        self._ssl_context = ssl_context
        self.backend = AheadBackend(clock=clock)
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's defaults
        # The pool httpx makes, over the backend that knows what was opened ahead. `_pool` is the one attribute of
        # httpx's transport its request path uses (tests/llm/test_connect_ahead.py fails if that changes).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            network_backend=self.backend)

    def open_ahead(self, url: str | httpx.URL, timeout: float) -> bool:
        """Start connecting to `url`'s origin (TLS included for https) within `timeout` seconds; False if that is not
        possible here (no event loop, a scheme httpx would not connect to directly) or already under way."""
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
            asyncio.get_running_loop()
        except (httpx.InvalidURL, RuntimeError):
            return False
        scheme = parsed.scheme
        if scheme not in _DEFAULT_PORTS or not parsed.raw_host:
            return False
        host = parsed.raw_host.decode("ascii")
        tls = None
        if scheme == "https":
            self._ssl_context.set_alpn_protocols(["http/1.1"])  # as httpcore sets it for an HTTP/1.1 pool
            tls = (self._ssl_context, host)
        return self.backend.open_ahead(host, parsed.port or _DEFAULT_PORTS[scheme], timeout, tls)

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self.backend.aclose()

    async def __aexit__(self, exc_type: type[BaseException] | None = None, exc_value: BaseException | None = None,
                        traceback: types.TracebackType | None = None) -> None:
        # A client used as a context manager closes its transport this way, not through `aclose`.
        try:
            await super().__aexit__(exc_type, exc_value, traceback)
        finally:
            await self.backend.aclose()

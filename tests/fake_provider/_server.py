"""The fake provider: a real HTTP/1.1 server on 127.0.0.1 running in a background thread.

It speaks OpenAI Chat Completions (`POST .../chat/completions`) and Anthropic Messages
(`POST .../v1/messages`), replays scripts keyed by agent identity, records every request and
notices when a client disconnects mid-stream. Test code talks to it from any thread; every wait has
a deadline and wakes on a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._script import Failure, Script, Step
from ._wire import (
    Rendered,
    anthropic_error_body,
    anthropic_error_event,
    openai_error_body,
    openai_error_event,
    render_anthropic,
    render_openai,
)

__all__ = ["FakeProvider", "RecordedRequest", "ScriptHandle"]

_HEAD_LIMIT = 64 * 1024
_GATE_POLL = 0.01  # how often a gated response looks at its step's gate (a threading.Event: no loop wake-up)
_PREVIEW = 160
_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 307: "Temporary Redirect",
            308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 409: "Conflict", 413: "Payload Too Large", 422: "Unprocessable Entity",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 529: "Overloaded"}


@dataclass
class RecordedRequest:
    """One request as the server saw it. `disconnected` turns true if the client hung up mid-response;
    `received_at` / `finished_at` are `time.monotonic()` readings (to check ordering, not durations);
    `received_wall` / `finished_wall` are the same moments by the wall clock, to set beside the timestamps of yagent's
    events (a bench's breakdown)."""

    serial: int
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    api_format: str
    system: str = ""
    first_user: str = ""
    identity: str | None = None
    step: int | None = None
    status: int = 0
    completed: bool = False
    disconnected: bool = False
    received_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    received_wall: float = field(default_factory=time.time)
    finished_wall: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"serial": self.serial, "method": self.method, "path": self.path, "headers": self.headers,
                "body": self.body, "api_format": self.api_format, "identity": self.identity,
                "step": self.step, "status": self.status, "completed": self.completed,
                "disconnected": self.disconnected, "received_at": self.received_at, "finished_at": self.finished_at,
                "received_wall": self.received_wall, "finished_wall": self.finished_wall}


@dataclass
class ScriptHandle:
    """Returned by `FakeProvider.script`: how far that script has been replayed."""

    _script: Script
    _owner: FakeProvider = field(repr=False)

    @property
    def consumed(self) -> int:
        with self._owner._cond:
            return self._script.consumed

    @property
    def remaining(self) -> int:
        with self._owner._cond:
            return len(self._script.steps) - self._script.consumed

    def wait_consumed(self, n: int | None = None, timeout: float = 10.0) -> None:
        """Block until `n` steps (default: all) were served."""
        target = len(self._script.steps) if n is None else n
        self._owner._wait(lambda: self._script.consumed >= target, timeout,
                          lambda: f"script {self._script.identity!r} served {self._script.consumed} of "
                                  f"{target} steps")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _prompt_parts(api_format: str, body: Any) -> tuple[str, str]:
    """(system prompt, first user message text) of a request body."""
    if not isinstance(body, dict):
        return "", ""
    messages = body.get("messages") or []
    if api_format == "anthropic":
        system = _text_of(body.get("system", ""))
    else:
        system = "\n".join(_text_of(m.get("content")) for m in messages
                           if isinstance(m, dict) and m.get("role") in ("system", "developer"))
    first_user = next((_text_of(m.get("content")) for m in messages
                       if isinstance(m, dict) and m.get("role") == "user"), "")
    return system, first_user


class _Connection:
    """A buffered reader that can also watch for the peer hanging up while we stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buffer = bytearray()
        self.closed = asyncio.Event()

    async def _fill(self) -> None:
        data = await self.reader.read(65536)
        if not data:
            raise EOFError
        self.buffer += data

    async def read_until(self, separator: bytes) -> bytes | None:
        while separator not in self.buffer:
            if len(self.buffer) > _HEAD_LIMIT:
                raise ValueError("request head too large")
            try:
                await self._fill()
            except EOFError:
                return None
        end = self.buffer.index(separator) + len(separator)
        head = bytes(self.buffer[:end])
        del self.buffer[:end]
        return head

    async def read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def watch(self) -> None:
        """Runs while a response is written: EOF from the client means it hung up."""
        try:
            while True:
                await self._fill()
        except (EOFError, ConnectionError):
            self.closed.set()


class FakeProvider:
    """A scripted LLM provider over real HTTP. Use as a context manager or call start()/stop().

    `openai_base_url` (ends in /v1) and `anthropic_base_url` go into provider configs.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._cond = threading.Condition()
        self._scripts: list[Script] = []
        self._requests: list[RecordedRequest] = []
        self._problems: list[str] = []
        self._serial = 0
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._connections: set[_Connection] = set()
        # What GET …/models lists, in order (a zero-config start takes the first chat model).
        self.models: list[str] = ["fake-model"]

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        self._thread = threading.Thread(target=self._run, name="fake-provider", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake provider did not start within 10s")
        if self._startup_error is not None:
            raise RuntimeError(f"the fake provider could not start: {self._startup_error}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def provider_table(self, api_format: str = "openai", model: str = "fake-model", **extra: Any) -> dict[str, Any]:
        """A `[global.llm.providers.NAME]` table pointing at this server."""
        url = self.anthropic_base_url if api_format == "anthropic" else self.openai_base_url
        return {"api_base_url": url, "api_key": "fake-key", "model": model, "api_format": api_format, **extra}

    # -- scripting ----------------------------------------------------------------------------------
    def script(self, identity: str, marker: str, steps: Sequence[Step], *, user_contains: str | None = None,
               regex: bool = False) -> ScriptHandle:
        """Register steps for requests whose system prompt contains `marker` (a regex when `regex`).

        Scripts are tried in registration order; an exhausted script is skipped, so registering the
        same marker again queues steps for a later run.
        """
        if regex:
            re.compile(marker)
        script = Script(identity, marker, list(steps), user_contains=user_contains, regex=regex)
        with self._cond:
            self._scripts.append(script)
        return ScriptHandle(script, self)

    def reset(self) -> None:
        with self._cond:
            self._scripts.clear()
            self._requests.clear()
            self._problems.clear()

    # -- observation --------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def requests_for(self, identity: str) -> list[RecordedRequest]:
        with self._cond:
            return [r for r in self._requests if r.identity == identity]

    @property
    def problems(self) -> list[str]:
        """Requests that matched no script or hit an exhausted one."""
        with self._cond:
            return list(self._problems)

    def assert_no_problems(self) -> None:
        problems = self.problems
        if problems:
            raise AssertionError("fake provider problems:\n" + "\n".join(problems))

    def _wait(self, predicate: Callable[[], bool], timeout: float, describe: Callable[[], str]) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise TimeoutError(f"fake provider: waited {timeout}s; {describe()}")

    def wait_for_requests(self, n: int, timeout: float = 10.0, identity: str | None = None) -> list[RecordedRequest]:
        """Block until at least `n` requests (for `identity`, if given) arrived; returns them."""

        def selected() -> list[RecordedRequest]:
            return [r for r in self._requests if identity is None or r.identity == identity]

        self._wait(lambda: len(selected()) >= n, timeout,
                   lambda: f"expected {n} requests{f' for {identity!r}' if identity else ''}, "
                           f"got {len(selected())}")
        with self._cond:
            return selected()

    def wait_for_disconnect(self, timeout: float = 10.0) -> RecordedRequest:
        """Block until some client hung up in the middle of a response; returns that request."""

        def first() -> RecordedRequest | None:
            return next((r for r in self._requests if r.disconnected), None)

        self._wait(lambda: first() is not None, timeout, lambda: "no client disconnected mid-response")
        with self._cond:
            found = first()
        assert found is not None
        return found

    def most_open_at_once(self, identity: str | None = None) -> int:
        """The most requests (of `identity`, or all) the server had open at one moment: from receiving a request
        to the end of its response or noticing the client gone; one still unanswered counts as open."""
        with self._cond:
            spans = [(r.received_at, r.finished_at if r.finished_at is not None else float("inf"))
                     for r in self._requests if identity is None or r.identity == identity]
        # Ends sort before starts at the same instant: a request that begins as another ends never overlaps it.
        marks = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda m: (m[0], m[1]))
        most = now = 0
        for _, step in marks:
            now += step
            most = max(most, now)
        return most

    def wait_until(self, predicate: Callable[[FakeProvider], bool], timeout: float = 10.0) -> None:
        """Block until `predicate(self)` holds; it is re-checked whenever a request changes state."""
        self._wait(lambda: predicate(self), timeout, lambda: "the condition never held")

    async def wait_for_requests_async(self, n: int, timeout: float = 10.0,
                                      identity: str | None = None) -> list[RecordedRequest]:
        return await asyncio.to_thread(self.wait_for_requests, n, timeout, identity)

    async def wait_for_disconnect_async(self, timeout: float = 10.0) -> RecordedRequest:
        return await asyncio.to_thread(self.wait_for_disconnect, timeout)

    # -- server -------------------------------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            server = await asyncio.start_server(self._accept, self.host, self.port)
        except OSError as exc:
            self._startup_error = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for connection in list(self._connections):
                connection.writer.transport.abort()  # wakes stalled streams: their watcher sees EOF
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=5)
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        connection = _Connection(reader, writer)
        self._connections.add(connection)
        try:
            while await self._one_request(connection):
                pass
        except (ConnectionError, EOFError, ValueError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            return  # shutting down; ending normally keeps asyncio (3.11) from logging the cancellation
        finally:
            self._connections.discard(connection)
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(self, conn: _Connection) -> bool:
        head = await conn.read_until(b"\r\n\r\n")
        if head is None:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        raw = await conn.read_exactly(int(headers.get("content-length", "0") or 0))
        keep_alive = headers.get("connection", "").lower() != "close"
        if path.startswith("/_fake/"):
            await self._control(conn, method, path, raw)
            return keep_alive
        api_format = "anthropic" if path.rstrip("/").endswith("/messages") else "openai"
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        system, first_user = _prompt_parts(api_format, body)
        with self._cond:
            self._serial += 1
            record = RecordedRequest(self._serial, method, path, headers, raw, body, api_format, system, first_user)
            self._requests.append(record)
            self._cond.notify_all()
        if method == "GET" and path.rstrip("/").endswith("/models"):
            # The model list a zero-config start asks for (OpenAI and Anthropic share this shape).
            listing = {"object": "list", "data": [{"id": model, "object": "model"} for model in self.models]}
            self._finish(record, 200)
            await self._write_json(conn, 200, listing)
            return keep_alive
        if method != "POST" or not path.rstrip("/").endswith(("/chat/completions", "/messages")):
            await self._error(conn, record, 404, f"fake provider: no endpoint {method} {path}; use POST "
                                                 f"/v1/chat/completions, POST /v1/messages or GET /v1/models")
            return keep_alive
        if not isinstance(body, dict):
            await self._error(conn, record, 400, "fake provider: the request body is not a JSON object")
            return keep_alive
        step, problem = self._pick(record)
        if step is not None and step.respond is not None:
            step = step.respond(body)
        if step is None:
            # 400 is not retried, so a missing script fails the test at once with this message.
            await self._error(conn, record, 400, problem)
            return keep_alive
        return await self._respond(conn, record, step) and keep_alive

    def _pick(self, record: RecordedRequest) -> tuple[Step | None, str]:
        with self._cond:
            matching = [s for s in self._scripts if s.matches(record.system, record.first_user)]
            script = next((s for s in matching if not s.exhausted), None)
            if script is not None:
                record.identity = script.identity
                record.step = script.consumed
                script.consumed += 1
                self._cond.notify_all()
                return script.steps[record.step], ""
            if matching:
                used = matching[0]
                problem = (f"fake provider: the script for identity {used.identity!r} is exhausted "
                           f"({sum(len(s.steps) for s in matching)} steps served); first user message starts "
                           f"{record.first_user[:_PREVIEW]!r}")
                record.identity = used.identity
            else:
                known = ", ".join(f"{s.identity!r} (marker {s.marker!r})" for s in self._scripts) or "none"
                problem = (f"fake provider: no script recognises this request; the system prompt starts "
                           f"{record.system[:_PREVIEW]!r} and the first user message starts "
                           f"{record.first_user[:_PREVIEW]!r}; registered identities: {known}")
            self._problems.append(problem)
        return None, problem

    async def _error(self, conn: _Connection, record: RecordedRequest, status: int, message: str,
                     headers: dict[str, str] | None = None, error_type: str = "") -> None:
        body = (anthropic_error_body(status, message, error_type) if record.api_format == "anthropic"
                else openai_error_body(status, message, error_type))
        self._finish(record, status)
        await self._write_json(conn, status, body, headers)

    def _answering(self, record: RecordedRequest, status: int) -> None:
        """Record the status before the response leaves: a client that got it may look at the record at once."""
        with self._cond:
            record.status = status
            self._cond.notify_all()

    def _finish(self, record: RecordedRequest, status: int, disconnected: bool = False) -> None:
        """Mark the request over. Called before the response's last bytes leave: a client that has read them may
        send its next request (or look at this record) before this thread runs again."""
        with self._cond:
            record.status = status
            record.completed = not disconnected
            record.disconnected = disconnected
            record.finished_at = time.monotonic()
            record.finished_wall = time.time()
            self._cond.notify_all()

    async def _write_json(self, conn: _Connection, status: int, body: Any,
                          headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        conn.writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: application/json"
                          f"\r\nContent-Length: {len(payload)}\r\n{extra}\r\n".encode() + payload)
        await conn.writer.drain()

    async def _respond(self, conn: _Connection, record: RecordedRequest, step: Step) -> bool:
        if step.gate is not None and not await self._gate_opened(conn, step.gate):
            self._finish(record, 0, disconnected=True)  # hung up on before anything was sent
            return False
        failure = step.failure
        if failure is not None and failure.kind == "http":
            headers = dict(failure.headers)
            if failure.retry_after is not None:
                headers["retry-after"] = f"{failure.retry_after:g}"
            await self._error(conn, record, failure.status, failure.message, headers, failure.error_type)
            return True
        body = record.body
        if step.raw is not None:
            chunks = [step.raw] if isinstance(step.raw, str | bytes) else list(step.raw)
            if not body.get("stream"):
                # A streaming content type makes no sense for a whole body: such steps mean plain JSON.
                content_type = ("application/json" if step.raw_content_type == "text/event-stream"
                                else step.raw_content_type)
                self._finish(record, 200)
                await self._write_raw_body(conn, content_type,
                                           b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks))
                return True
            return await self._stream(conn, record, chunks, step, failure)
        render = render_anthropic if record.api_format == "anthropic" else render_openai
        rendered: Rendered = render(step, body, record.serial, len(record.raw))
        if rendered.json_body is not None:
            self._finish(record, 200)
            await self._write_json(conn, 200, rendered.json_body)
            return True
        return await self._stream(conn, record, rendered.events, step, failure)

    async def _write_raw_body(self, conn: _Connection, content_type: str, payload: bytes) -> None:
        conn.writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(payload)}"
                          f"\r\n\r\n".encode() + payload)
        await conn.writer.drain()

    async def _stream(self, conn: _Connection, record: RecordedRequest, events: list[str] | list[bytes], step: Step,
                      failure: Failure | None) -> bool:
        """Write events as HTTP chunks; False when the connection must not be reused."""
        writer = conn.writer
        self._answering(record, 200)
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {step.raw_content_type}\r\nCache-Control: no-cache\r\n"
                     f"Transfer-Encoding: chunked\r\n\r\n".encode())
        watcher = asyncio.ensure_future(conn.watch())
        clock = asyncio.get_running_loop().time
        started = clock()
        try:
            for position, event in enumerate(events):
                if failure is not None and position == failure.after_chunks:
                    return await self._fail_stream(conn, record, events[position], failure)
                # Paced against the stream's start: each sleep's overshoot must not add up over many events.
                due = started + step.latency * (position + 1)
                if step.latency and await self._hung_up_within(conn, max(0.0, due - clock())):
                    self._finish(record, 200, disconnected=True)
                    return False
                if conn.closed.is_set():
                    self._finish(record, 200, disconnected=True)
                    return False
                data = event if isinstance(event, bytes) else event.encode()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
            if failure is not None and failure.after_chunks >= len(events):
                return await self._fail_stream(conn, record, "", failure)
            if step.end_latency:
                await asyncio.sleep(step.end_latency)  # not watching for a hang-up: the request is open till the end
            if conn.closed.is_set():
                self._finish(record, 200, disconnected=True)
                return False
            self._finish(record, 200)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return not conn.closed.is_set()
        except ConnectionError:
            self._finish(record, 200, disconnected=True)
            return False
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _gate_opened(self, conn: _Connection, gate: threading.Event) -> bool:
        """Hold a response until the test sets its step's gate; False when the client hung up first."""
        watcher = asyncio.ensure_future(conn.watch())
        try:
            while not gate.is_set():
                if await self._hung_up_within(conn, _GATE_POLL):
                    return False
            return True
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _hung_up_within(self, conn: _Connection, seconds: float) -> bool:
        try:
            await asyncio.wait_for(conn.closed.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _fail_stream(self, conn: _Connection, record: RecordedRequest, next_event: str | bytes,
                           failure: Failure) -> bool:
        writer = conn.writer
        if failure.kind == "truncate":
            data = next_event if isinstance(next_event, bytes) else next_event.encode()
            half = data[: max(1, len(data) // 2)]
            writer.write(b"%x\r\n%s\r\n" % (len(half), half))
            await writer.drain()
            self._finish(record, 200)
            writer.transport.abort()  # no terminating chunk: the client sees an incomplete body
            return False
        if failure.kind == "stall":
            await conn.closed.wait()
            self._finish(record, 200, disconnected=True)
            return False
        if failure.kind == "malformed_event":
            data = b'data: {"choices": [{"delta": {"content": "unterminated\n\n'
        else:
            data = (anthropic_error_event(failure) if record.api_format == "anthropic"
                    else openai_error_event(failure)).encode()
        self._finish(record, 200)
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        return True

    async def _control(self, conn: _Connection, method: str, path: str, raw: bytes) -> None:
        """Standalone mode: GET /_fake/requests, POST /_fake/scripts (a JSON list), POST /_fake/reset."""
        if method == "GET" and path == "/_fake/requests":
            await self._write_json(conn, 200, [r.to_dict() for r in self.requests])
        elif method == "POST" and path == "/_fake/scripts":
            scripts = [Script.from_dict(s) for s in json.loads(raw)]
            with self._cond:
                self._scripts.extend(scripts)
            await self._write_json(conn, 200, {"registered": len(scripts)})
        elif method == "POST" and path == "/_fake/reset":
            self.reset()
            await self._write_json(conn, 200, {"reset": True})
        elif method == "GET" and path == "/_fake/problems":
            await self._write_json(conn, 200, self.problems)
        else:
            await self._write_json(conn, 404, {"error": f"unknown control endpoint {method} {path}"})

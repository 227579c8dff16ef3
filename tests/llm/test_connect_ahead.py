"""A run's provider connection opened ahead of its first request (workers/llm/_connect_ahead.py).

Against a real local HTTP(S) server that counts its connections: the request takes the connection opened ahead
(TLS handshake included) instead of opening one; one the server closed, one too old, one for another server name
and one that failed are not used, and the request goes on as it would have; closing the client closes an unused one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from tests.llm.seams import FakeClock
from yagent.ipc.provider_config import LLMConfig, LLMSettings, ProviderConfig
from yagent.workers.llm import EngineFactory, _build, _engine, build_engine, make_client_ahead, parse_ahead
from yagent.workers.llm._connect_ahead import MAX_AGE, ConnectAheadTransport, connects_ahead


class Origin:
    """An HTTP/1.1 server answering every request with 200 "ok" on a kept-alive connection; it counts connections,
    notes which one served each request, and may close its first connection as soon as it is accepted."""

    def __init__(self, *, close_first: bool = False) -> None:
        self.close_first = close_first
        self.accepted = 0
        self.served: list[int] = []  # the connection number of each request
        self.closed_by_client: list[int] = []
        self.changed = asyncio.Condition()

    async def wait_for(self, what: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(what)

    async def _note(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        number = self.accepted
        await self._note()
        try:
            if self.close_first and number == 1:
                return
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.served.append(number)
                await self._note()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                del head
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            self.closed_by_client.append(number)
            await self._note()
        finally:
            writer.close()


@asynccontextmanager
async def serving(origin: Origin, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(origin.handle, "127.0.0.1", 0, ssl=tls)
    async with server:
        yield server.sockets[0].getsockname()[1]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost (and 127.0.0.1), made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def client_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificate[0]))


def test_the_first_request_takes_the_connection_opened_ahead() -> None:
    async def main() -> None:
        origin = Origin()
        async with serving(origin) as port:
            transport = ConnectAheadTransport(ssl.create_default_context())
            async with httpx.AsyncClient(transport=transport) as client:
                assert transport.open_ahead(f"http://127.0.0.1:{port}/v1", 5.0)
                assert not transport.open_ahead(f"http://127.0.0.1:{port}/v1/other", 5.0)  # one per origin
                await origin.wait_for(lambda: origin.accepted == 1)
                first = await client.get(f"http://127.0.0.1:{port}/v1/models")
                second = await client.get(f"http://127.0.0.1:{port}/v1/models")
            assert (first.text, second.text) == ("ok", "ok")
            # Both requests on the connection opened ahead: without it the first would have opened a second one.
            assert origin.accepted == 1 and origin.served == [1, 1]

    asyncio.run(main())


def test_the_tcp_handshake_with_an_ip_address_starts_before_the_event_loop_runs_again() -> None:
    """What a run's build does next holds the loop for milliseconds: the connect must already be on its way."""
    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            transport = ConnectAheadTransport(ssl.create_default_context())
            async with httpx.AsyncClient(transport=transport):
                assert transport.open_ahead(f"http://127.0.0.1:{port}", 5.0)
                # A blocking accept, without yielding to the loop: it returns only if the connect was made already.
                listener.settimeout(10.0)
                accepted, _ = listener.accept()
                accepted.close()

    asyncio.run(main())


async def tls_request_after_ahead(certificate: tuple[Path, Path], origin: Origin,
                                  **extensions: str) -> httpx.Response:
    """A connection to localhost opened ahead (TLS included) and, once the server has it, one request."""
    async with serving(origin, server_tls(certificate)) as port:
        transport = ConnectAheadTransport(client_tls(certificate))
        async with httpx.AsyncClient(transport=transport) as client:
            assert transport.open_ahead(f"https://localhost:{port}/v1", 5.0)
            await origin.wait_for(lambda: origin.accepted == 1)
            return await client.get(f"https://localhost:{port}/v1/models", extensions=extensions)


def test_the_tls_handshake_is_made_ahead_too(certificate: tuple[Path, Path]) -> None:
    async def main() -> None:
        origin = Origin()
        response = await tls_request_after_ahead(certificate, origin)
        assert response.text == "ok"
        assert origin.accepted == 1 and origin.served == [1]

    asyncio.run(main())


def test_a_request_for_another_server_name_does_not_take_the_tls_connection_made_ahead(
        certificate: tuple[Path, Path]) -> None:
    async def main() -> None:
        origin = Origin()
        response = await tls_request_after_ahead(certificate, origin, sni_hostname="127.0.0.1")
        assert response.text == "ok"
        # The one made ahead for "localhost" was closed; the request made its own, for the name it asked.
        assert origin.accepted == 2 and origin.served == [2]
        await origin.wait_for(lambda: 1 in origin.closed_by_client)

    asyncio.run(main())


def test_a_connection_the_server_closed_meanwhile_is_not_used() -> None:
    async def main() -> None:
        origin = Origin(close_first=True)
        async with serving(origin) as port:
            transport = ConnectAheadTransport(ssl.create_default_context())
            async with httpx.AsyncClient(transport=transport) as client:
                transport.open_ahead(f"http://127.0.0.1:{port}", 5.0)
                await origin.wait_for(lambda: origin.accepted == 1)
                # The server's close must have reached the client before the request: wait until the socket says so.
                ahead = transport.backend._ahead[("127.0.0.1", port)]
                stream = await ahead.task
                async with asyncio.timeout(10):
                    while not stream.get_extra_info("is_readable"):
                        await asyncio.sleep(0.01)  # polls a condition with a deadline, not a delay that must suffice
                response = await client.get(f"http://127.0.0.1:{port}/")
            assert response.text == "ok"
            assert origin.accepted == 2 and origin.served == [2]

    asyncio.run(main())


def test_a_connection_opened_too_long_ago_is_closed_instead_of_used() -> None:
    async def main() -> None:
        origin = Origin()
        clock = FakeClock()
        async with serving(origin) as port:
            transport = ConnectAheadTransport(ssl.create_default_context(), clock=clock)
            async with httpx.AsyncClient(transport=transport) as client:
                transport.open_ahead(f"http://127.0.0.1:{port}", 5.0)
                await transport.backend._ahead[("127.0.0.1", port)].task  # open: its age counts from now
                clock.advance(MAX_AGE + 0.5)  # the run waited (paused at its start): a server may drop it any moment
                response = await client.get(f"http://127.0.0.1:{port}/")
                await origin.wait_for(lambda: 1 in origin.closed_by_client)
            assert response.text == "ok"
            assert origin.accepted == 2 and origin.served == [2]

    asyncio.run(main())


def test_a_failed_connection_ahead_leaves_the_request_its_own_error() -> None:
    async def main() -> None:
        reported: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reported.append(context))
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # nothing listens on the port now
        transport = ConnectAheadTransport(ssl.create_default_context())
        async with httpx.AsyncClient(transport=transport) as client:
            transport.open_ahead(f"http://127.0.0.1:{port}", 5.0)
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")
        assert reported == []  # the attempt's failure was retrieved, not left for the loop to complain about

    asyncio.run(main())


def test_closing_the_client_closes_a_connection_opened_ahead_and_never_used() -> None:
    async def main() -> None:
        origin = Origin()
        async with serving(origin) as port:
            transport = ConnectAheadTransport(ssl.create_default_context())
            async with httpx.AsyncClient(transport=transport):
                transport.open_ahead(f"http://127.0.0.1:{port}", 5.0)
                await origin.wait_for(lambda: origin.accepted == 1)
            await origin.wait_for(lambda: origin.closed_by_client == [1])
            assert origin.served == []

    asyncio.run(main())


def llm_config(port: int, scheme: str = "http") -> LLMConfig:
    provider = ProviderConfig(name="local", model="m", api_base_url=f"{scheme}://127.0.0.1:{port}/v1", api_key="k",
                              api_format="openai")
    return LLMConfig(providers={"local": provider}, use_provider="local", settings=LLMSettings())


def test_a_run_engine_opens_its_provider_connection_ahead() -> None:
    async def main() -> None:
        origin = Origin()
        async with serving(origin) as port:
            engine = build_engine(llm_config(port), agent="chat")
            try:
                assert engine.open_ahead()
                await origin.wait_for(lambda: origin.accepted == 1)
            finally:
                await engine.aclose()
            await origin.wait_for(lambda: origin.closed_by_client == [1])

    asyncio.run(main())


def test_a_request_waits_for_the_connection_opened_ahead_no_longer_than_its_own_connect_timeout(
        certificate: tuple[Path, Path]) -> None:
    """A server that accepts and then never answers the TLS handshake: the request gives up after its own connect
    timeout, with httpx's error, instead of waiting out the minute the connection ahead was given."""
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []
        server = await asyncio.start_server(lambda _r, w: accepted.append(w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            transport = ConnectAheadTransport(client_tls(certificate))
            async with httpx.AsyncClient(transport=transport) as client:
                transport.open_ahead(f"https://localhost:{port}", 60.0)
                with pytest.raises(httpx.ConnectTimeout):
                    await client.get(f"https://localhost:{port}/", timeout=httpx.Timeout(60.0, connect=0.5))
            assert len(accepted) == 1  # no second connection: the one opened ahead was the request's own attempt
            for writer in accepted:
                writer.close()

    asyncio.run(main())


@pytest.fixture
def proxies_read_anew() -> Iterator[None]:
    """`connects_ahead` reads the environment once per process: these tests change it, before and after."""
    connects_ahead.cache_clear()
    yield
    connects_ahead.cache_clear()


def test_the_proxies_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch, proxies_read_anew: None) -> None:
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    first = connects_ahead()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert connects_ahead() is first  # what the forkserver read holds for its workers
    connects_ahead.cache_clear()
    assert not connects_ahead()


def test_no_proxy_alone_keeps_connections_ahead(monkeypatch: pytest.MonkeyPatch, proxies_read_anew: None) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert connects_ahead()


def test_with_a_proxy_in_the_environment_the_client_is_httpx_default(monkeypatch: pytest.MonkeyPatch,
                                                                    proxies_read_anew: None) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert not connects_ahead()

    async def main() -> None:
        factory = EngineFactory(llm_config(9))
        try:
            engine = factory("local")
            assert not factory.open_ahead(engine)  # the proxy would be bypassed by a connection of our own
        finally:
            await factory.aclose()

    asyncio.run(main())


def test_the_client_a_warm_worker_made_while_it_waited_serves_its_runs_first_factory_only() -> None:
    async def main() -> None:
        origin = Origin()
        async with serving(origin) as port:
            make_client_ahead()  # as a warm worker does before its run comes, with no event loop of its own needed
            made = _build._made_ahead
            assert made is not None
            first, second = EngineFactory(llm_config(port)), EngineFactory(llm_config(port))
            try:
                assert first._client is made[1] and first._ahead is made[0]  # the one made ahead, taken once
                assert second._client is not made[1] and second._ahead is not None
                assert first.open_ahead(first("local"))  # and it connects ahead like one made at the start
                await origin.wait_for(lambda: origin.accepted == 1)
            finally:
                _build._made_ahead = None  # taken, or left by a failure: no later test's factory may get it
                await first.aclose()
                await second.aclose()
            await origin.wait_for(lambda: origin.closed_by_client == [1])

    asyncio.run(main())


def test_behind_a_proxy_a_warm_worker_makes_no_client_ahead(monkeypatch: pytest.MonkeyPatch,
                                                           proxies_read_anew: None) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setattr(_build, "_made_ahead", None)
    make_client_ahead()
    assert _build._made_ahead is None


def test_an_engine_parses_its_address_once_and_anew_when_it_changes() -> None:
    """The connection ahead and every request take the engine's address as one parsed `httpx.URL` (httpx parses a
    string again at every request); a provider address that changes is parsed anew, never served stale."""
    factory = EngineFactory(llm_config(9))
    engine = factory("local")
    try:
        parsed = engine.request_url()
        assert str(parsed) == engine.url() == "http://127.0.0.1:9/v1/chat/completions"
        assert engine.request_url() is parsed
        engine.config = dataclasses.replace(engine.config, api_base_url="http://127.0.0.1:10/v2")
        assert str(engine.request_url()) == "http://127.0.0.1:10/v2/chat/completions"
    finally:
        asyncio.run(factory.aclose())


def test_an_address_parsed_ahead_is_the_one_a_runs_engine_takes() -> None:
    """A warm worker parses its daemon's configured providers' addresses while it waits (`parse_ahead`); the run's
    engine then takes that very parse. An address httpx refuses is left for the run's own request to report."""
    factory = EngineFactory(llm_config(11))
    engine = factory("local")
    try:
        parse_ahead([("openai", "http://127.0.0.1:11/v1"), ("anthropic", "http://127.0.0.1:12"),
                     ("openai", "http://[::1/bad\x00")])
        ahead = _engine.PARSED_AHEAD["http://127.0.0.1:11/v1/chat/completions"]
        assert engine.request_url() is ahead
        assert str(_engine.PARSED_AHEAD["http://127.0.0.1:12/v1/messages"]) == "http://127.0.0.1:12/v1/messages"
        assert not any("bad" in text for text in _engine.PARSED_AHEAD)
    finally:
        _engine.PARSED_AHEAD.clear()
        asyncio.run(factory.aclose())

"""The zero-config model from a server's /models: the first chat model, over real HTTP; and a server that lies,
floods, redirects or never answers costs a bounded wait and an actionable error, never a hang."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.fake_provider import FakeProvider
from yagent.daemon.model_listing import MAX_LISTING_BYTES, ModelLister, ModelListingError, first_chat_model


def test_the_first_chat_model_the_server_lists_is_taken_with_the_key_sent(fake: FakeProvider) -> None:
    fake.models = ["text-embedding-3-small", "whisper-1", "qwen3-coder", "llama3"]
    model = asyncio.run(first_chat_model(fake.openai_base_url, "openai", "sk-local"))
    assert model == "qwen3-coder"
    (request,) = fake.requests
    assert (request.method, request.path, request.headers["authorization"]) == ("GET", "/v1/models", "Bearer sk-local")


def test_an_anthropic_endpoint_is_asked_at_v1_models_with_its_headers(fake: FakeProvider) -> None:
    fake.models = ["claude-sonnet-4-5"]
    assert asyncio.run(first_chat_model(fake.anthropic_base_url, "anthropic", "sk-ant")) == "claude-sonnet-4-5"
    (request,) = fake.requests
    assert request.path == "/v1/models" and request.headers["x-api-key"] == "sk-ant"


def test_a_server_is_asked_once_per_endpoint_for_the_daemons_life(fake: FakeProvider) -> None:
    lister = ModelLister()

    async def twice() -> list[str]:
        return [await lister.model_for(fake.openai_base_url, "openai", "none") for _ in range(2)]

    assert asyncio.run(twice()) == ["fake-model", "fake-model"] and len(fake.requests) == 1


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _answer(status: int, body: bytes, headers: dict[str, str] | None = None) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=body, headers=headers or {}))


@pytest.mark.parametrize(("transport", "said"), [
    (_answer(200, json.dumps({"data": [{"id": "text-embedding-3-large"}, {"id": "tts-1"}]}).encode()),
     "lists no chat model"),
    (_answer(200, b"<html>hello</html>"), "something other than a JSON model list"),
    (_answer(500, b"{}"), "answered HTTP 500"),
    (_answer(302, b"", {"location": "http://elsewhere/models"}), "answered HTTP 302"),
    (_answer(200, b"[" + b"1," * MAX_LISTING_BYTES + b"1]"), "more than 1024 KiB"),
    (_answer(200, json.dumps({"data": [{"id": "\x1b[2Jevil"}, {"id": "x" * 10_000}]}).encode()), "lists no chat model"),
])
def test_a_listing_that_cannot_be_used_is_an_error_naming_the_url_and_the_fix(transport, said: str) -> None:
    with pytest.raises(ModelListingError) as caught:
        asyncio.run(first_chat_model("http://server.test/v1", "openai", "k", transport=transport))
    assert said in str(caught.value) and "http://server.test/v1/models" in str(caught.value)
    assert "set YAGENT_MODEL" in str(caught.value)


def test_a_server_that_never_answers_costs_the_deadline_not_a_hang() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept_and_stay_silent() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)
        done.wait(30)

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    try:
        with pytest.raises(ModelListingError, match=r"did not answer within 0\.3s; is the server running"):
            asyncio.run(first_chat_model(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", "openai", "k",
                                         timeout=0.3))
    finally:
        done.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_nothing_listening_is_an_error_saying_so() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ModelListingError, match=r"cannot reach .*is the server running"):
        asyncio.run(first_chat_model(f"http://127.0.0.1:{port}/v1", "openai", "k"))


def test_a_password_in_the_url_is_masked_in_the_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelListingError) as info:
        asyncio.run(first_chat_model(f"http://corp:s3cret-pw@127.0.0.1:{port}/v1", "openai", "k"))
    assert f"cannot reach http://corp:***@127.0.0.1:{port}/v1/models" in str(info.value)
    assert "s3cret-pw" not in str(info.value)

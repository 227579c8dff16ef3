"""The connectivity probe makes a real HTTP request (to the fake provider) and reports in plain words."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from tests.daemon_harness import arun
from tests.fake_provider import Failure, FakeProvider, Step
from yagent.client.setup.probe import PROBE_SYSTEM_PROMPT, probe_provider


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_a_working_endpoint_reports_model_and_latency(fake: FakeProvider, api_format: str) -> None:
    handle = fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(text="p")])
    result = arun(probe_provider(fake.provider_table(api_format, model="probe-model")))
    assert result.ok, result
    assert result.status == 200 and result.summary.startswith("probe-model answered in ")
    handle.wait_consumed(1, timeout=5)
    request = fake.requests[0]
    if api_format == "anthropic":
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == "fake-key" and request.headers["anthropic-version"] == "2023-06-01"
    else:
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer fake-key"
    assert request.body["max_tokens"] == 1
    fake.assert_no_problems()


def test_an_anthropic_base_ending_in_v1_is_accepted(fake: FakeProvider) -> None:
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(text="p")])
    table = fake.provider_table("anthropic") | {"api_base_url": fake.anthropic_base_url + "/v1/"}
    result = arun(probe_provider(table))
    assert result.ok, result
    assert fake.requests[0].path == "/v1/messages"


def test_a_rejected_key_is_explained(fake: FakeProvider) -> None:
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(failure=Failure.http(401, message="Invalid API key"))])
    result = arun(probe_provider(fake.provider_table("openai")))
    assert not result.ok and result.status == 401
    assert "refused the key" in result.summary and "api_key" in result.summary
    assert result.detail == "Invalid API key"


def test_a_wrong_base_url_is_explained(fake: FakeProvider) -> None:
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(failure=Failure.http(404, message="no route"))])
    result = arun(probe_provider(fake.provider_table("openai")))
    assert not result.ok and result.status == 404
    assert "base URL is probably wrong" in result.summary


def test_nobody_listening_is_a_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = arun(probe_provider({"api_base_url": f"http://127.0.0.1:{port}/v1", "api_key": "k", "model": "m"}))
    assert not result.ok
    assert result.summary == (f"could not connect to 127.0.0.1:{port}: connection refused — is the server running "
                              "and the URL right?")


def test_a_password_in_the_url_is_never_in_the_report(fake: FakeProvider) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = arun(probe_provider({"api_base_url": f"http://corp:s3cret-pw@127.0.0.1:{port}/v1", "api_key": "k",
                                   "model": "m"}))
    assert refused.summary.startswith(f"could not connect to 127.0.0.1:{port}: ")
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(failure=Failure.http(404, message="no route"))])
    base = fake.provider_table("openai")["api_base_url"].replace("://", "://corp:s3cret-pw@", 1)
    missing = arun(probe_provider(fake.provider_table("openai") | {"api_base_url": base}))
    assert missing.status == 404 and "corp:***@" in missing.summary
    for result in (refused, missing):
        assert "s3cret-pw" not in result.summary


def test_an_unset_key_variable_is_reported_before_any_request(fake: FakeProvider) -> None:
    table = fake.provider_table("openai")
    del table["api_key"]
    table["api_key_env"] = "YAGENT_PROBE_TEST_UNSET"
    result = arun(probe_provider(table, environ={}))
    assert not result.ok and "YAGENT_PROBE_TEST_UNSET is not set" in result.summary
    assert fake.requests == []
    ok = arun(probe_provider(table, environ={"YAGENT_PROBE_TEST_UNSET": "fake-key"}))
    assert not ok.ok and "HTTP 400" in ok.summary  # reached the server (which has no script for it)


@pytest.mark.parametrize("api_format, message", [
    ("openai", "The model `no-such-model` does not exist or you do not have access to it."),
    ("anthropic", "model: no-such-model"),
])
def test_an_unknown_model_is_not_blamed_on_the_base_url(fake: FakeProvider, api_format: str, message: str) -> None:
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(failure=Failure.http(404, message=message))])
    result = arun(probe_provider(fake.provider_table(api_format, model="no-such-model")))
    assert not result.ok and result.status == 404
    assert result.summary == "the endpoint does not know the model 'no-such-model' (HTTP 404): check the model name"
    assert result.detail == message


def test_a_redirect_names_where_it_goes(fake: FakeProvider) -> None:
    target = "https://api.example.com/v1/chat/completions"
    fake.script("probe", PROBE_SYSTEM_PROMPT, [Step(failure=Failure.http(301, headers={"location": target}))])
    result = arun(probe_provider(fake.provider_table("openai")))
    assert not result.ok and result.status == 301
    assert f"redirects to {target} (HTTP 301)" in result.summary and "base URL" in result.summary


def test_a_web_page_answering_200_is_not_a_working_endpoint() -> None:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            page = b"<!doctype html><html><body>Dashboard</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        result = arun(probe_provider({"api_base_url": f"http://127.0.0.1:{port}", "api_key": "k", "model": "m"}))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not result.ok and result.status == 200
    assert "not with an openai chat reply" in result.summary and "Dashboard" in result.detail

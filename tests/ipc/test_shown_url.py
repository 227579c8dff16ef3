"""`shown_url`: a configured URL as messages and logs show it — the password and key-like query values masked."""

from __future__ import annotations

import pytest

from yagent.ipc.shown_url import shown_url


@pytest.mark.parametrize(("url", "shown"), [
    ("https://proxyuser:s3cret@llm.corp.example/v1", "https://proxyuser:***@llm.corp.example/v1"),
    ("http://u:p%40ss@127.0.0.1:8080/v1/chat/completions", "http://u:***@127.0.0.1:8080/v1/chat/completions"),
    ("https://:onlypassword@host/v1", "https://:***@host/v1"),
    ("http://u:p@ss@w0rd@host:1/v1?x=1", "http://u:***@host:1/v1?x=1"),  # a raw '@' in the password
    ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),  # a port's colon is no password
    ("https://user@host/v1", "https://user@host/v1"),  # a user alone is no secret
    ("https://api.example/v1beta?key=AIzaSyXYZ&alt=sse", "https://api.example/v1beta?key=***&alt=sse"),
    ("https://gw.example/v1?api-version=2024-06-01&API_KEY=abc#frag",
     "https://gw.example/v1?api-version=2024-06-01&API_KEY=***#frag"),
    ("https://gw.example/v1?monkey=banana&token=t0k", "https://gw.example/v1?monkey=banana&token=***"),
    ("https://host/path/with@sign/v1", "https://host/path/with@sign/v1"),  # an '@' in the path is not userinfo
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("", ""),
])
def test_credentials_are_masked_and_the_rest_is_kept(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_what_is_not_a_url_comes_back_without_an_error() -> None:
    assert shown_url("not a url at all: ::@@") == "not a url at all: ::@@"
    assert shown_url(None) == "None"  # type: ignore[arg-type]  # a config value of the wrong type

"""A real, minimal request to a provider, reported in plain words.

The client may not import the workers' engines (layering), so this is its own one-token request:
OpenAI-compatible `POST {base}/chat/completions` with a bearer key, or Anthropic `POST {base}/v1/messages`
(a base already ending in `/v1` is accepted) with `x-api-key`. The system prompt is a fixed marker
so a scripted test provider can recognise the probe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from yagent.ipc.shown_url import shown_url

__all__ = ["PROBE_SYSTEM_PROMPT", "ProbeResult", "probe_provider"]

PROBE_SYSTEM_PROMPT = "yagent connectivity probe"
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    summary: str  # one line a person reads
    status: int = 0
    latency_ms: int = 0
    detail: str = ""  # the provider's own words, when it said something


def _endpoint(table: Mapping[str, Any]) -> tuple[str, str]:
    base = str(table.get("api_base_url") or "").rstrip("/")
    fmt = str(table.get("api_format") or "openai")
    if fmt == "anthropic":
        return fmt, (base + "/messages") if base.endswith("/v1") else base + "/v1/messages"
    return fmt, base + "/chat/completions"


def _key(table: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, str]:
    """(key, problem)."""
    env_name = table.get("api_key_env")
    if env_name:
        value = environ.get(str(env_name), "")
        if not value:
            return "", (f"the environment variable {env_name} is not set in this shell, so the key cannot be "
                        f"tested; export it (the daemon needs it too) or enter the key itself")
        return value, ""
    return str(table.get("api_key") or ""), ""


def _provider_words(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return str(body)[:300]


def _explain(status: int, url: str, words: str, model: str, location: str) -> str:
    if status in (401, 403):
        return f"the endpoint refused the key (HTTP {status}): check api_key / api_key_env"
    if status == 404 and ((model and model in words) or "model" in words.lower()):
        # OpenAI answers an unknown model with 404 model_not_found, Anthropic with not_found_error "model: X".
        return f"the endpoint does not know the model {model!r} (HTTP 404): check the model name"
    if status in (301, 302, 303, 307, 308):
        where = f" to {location}" if location else ""
        return (f"{url} redirects{where} (HTTP {status}); requests are not followed, so put the address the "
                "API really answers at in the base URL")
    if status == 404:
        return (f"nothing answers at {url} (HTTP 404): the base URL is probably wrong — OpenAI-compatible "
                "servers usually end in /v1")
    if status == 429:
        return "the endpoint is reachable and knows the key, but it is rate-limiting (HTTP 429); try again later"
    if status in (400, 422):
        return f"the endpoint rejected the request (HTTP {status}); often the model name is wrong"
    if status >= 500:
        return f"the endpoint had an internal error (HTTP {status}); it may be down — try again later"
    return f"unexpected HTTP {status} from {url}"


async def probe_provider(table: Mapping[str, Any], *, environ: Mapping[str, str] | None = None,
                         timeout: float = 20.0, transport: httpx.AsyncBaseTransport | None = None) -> ProbeResult:
    env = os.environ if environ is None else environ
    fmt, url = _endpoint(table)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return ProbeResult(False, f"{shown_url(str(table.get('api_base_url')))!r} is not an http(s) URL")
    key, problem = _key(table, env)
    if problem:
        return ProbeResult(False, problem)
    model = str(table.get("model") or "")
    headers = {"content-type": "application/json"}
    body: dict[str, Any]
    if fmt == "anthropic":
        headers.update({"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION})
        body = {"model": model, "max_tokens": 1, "system": PROBE_SYSTEM_PROMPT,
                "messages": [{"role": "user", "content": "ping"}]}
    else:
        headers["authorization"] = f"Bearer {key}"
        body = {"model": model, "max_tokens": 1, "stream": False,
                "messages": [{"role": "system", "content": PROBE_SYSTEM_PROMPT},
                             {"role": "user", "content": "ping"}]}
    host = parts.netloc.rpartition("@")[2]  # what the user reads names the server, never a user:password in the URL
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False) as client:
            response = await client.post(url, json=body, headers=headers)
    except httpx.ConnectError as exc:
        return ProbeResult(False, f"could not connect to {host}: {_reason(exc)} — is the server running and the "
                                  "URL right?")
    except httpx.TimeoutException:
        return ProbeResult(False, f"{host} did not answer within {timeout:.0f}s")
    except httpx.HTTPError as exc:
        return ProbeResult(False, f"the request to {host} failed: {exc}")
    latency = int((time.monotonic() - started) * 1000)
    if response.status_code == 200:
        if not _is_reply(fmt, response):
            return ProbeResult(False, f"{host} answered HTTP 200, but not with an {fmt} chat reply: the base URL "
                                      "probably points at a web page or another service, not the model API",
                               200, latency, response.text.strip()[:300])
        return ProbeResult(True, f"{model} answered in {latency} ms (HTTP 200 from {host})", 200, latency)
    words = _provider_words(response)
    summary = _explain(response.status_code, shown_url(url), words, model,
                       shown_url(response.headers.get("location", "")))
    return ProbeResult(False, summary, response.status_code, latency, words)


def _is_reply(fmt: str, response: httpx.Response) -> bool:
    """A 200 is only an answer if it is the API's JSON (a catch-all web server answers 200 to anything)."""
    try:
        body = response.json()
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    return "content" in body if fmt == "anthropic" else "choices" in body


def _reason(exc: Exception) -> str:
    # httpx wraps the socket error ("All connection attempts failed"); the cause says what happened.
    texts = []
    node: BaseException | None = exc
    while node is not None and len(texts) < 6:
        texts.append(str(node) or type(node).__name__)
        if isinstance(node, ConnectionRefusedError):
            return "connection refused"
        node = node.__cause__ or node.__context__
    text = texts[-1]
    lowered = " ".join(texts).lower()
    if "refused" in lowered:
        return "connection refused"
    if "name or service not known" in lowered or "nodename" in lowered or "getaddrinfo" in lowered:
        return "the host name does not resolve"
    return text

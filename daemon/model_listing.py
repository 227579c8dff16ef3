"""The first chat model an endpoint's `/models` lists: the zero-config model when neither YAGENT_MODEL nor a default
applies (a local server at OPENAI_BASE_URL).

The request is bounded like everything the daemon does for a peer it does not control: a deadline for the whole
exchange, a cap on the body read, no redirects followed. A server that lists nothing usable, answers with an error
or never answers gives an actionable error (`ModelListingError`), and the turn is refused with it — the daemon
goes on serving meanwhile (the submit is answered off the control loop). A success is kept per endpoint for the
daemon's life, so the server is asked once and what was picked is said once.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from yagent.ipc.shown_url import shown_url

__all__ = ["LISTING_TIMEOUT", "MAX_LISTING_BYTES", "ModelLister", "ModelListingError", "first_chat_model"]

LISTING_TIMEOUT = 10.0
MAX_LISTING_BYTES = 1024 * 1024
ANTHROPIC_VERSION = "2023-06-01"
# Ids of models that cannot chat: embeddings, speech, images, moderation, reranking.
_NOT_CHAT = re.compile(r"embed|whisper|tts|speech|transcri|dall-e|image|moderation|rerank|audio", re.I)
_MAX_ID = 256


class ModelListingError(Exception):
    """Why no model could be taken from the server; the message says what to do (set YAGENT_MODEL)."""


def _models_url(base_url: str, api_format: str) -> str:
    base = base_url.rstrip("/")
    if api_format == "anthropic" and not base.endswith("/v1"):
        return base + "/v1/models"
    return base + "/models"


def _ids(body: Any) -> list[str]:
    """Model ids from an OpenAI-style `{"data": [{"id": …}]}` (Anthropic's too) or Ollama's
    `{"models": [{"name": …}]}`."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list) and isinstance(body, dict):
        entries = body.get("models")
    ids = []
    for entry in entries if isinstance(entries, list) else []:
        value = entry.get("id") or entry.get("name") if isinstance(entry, dict) else None
        if isinstance(value, str) and 0 < len(value) <= _MAX_ID and value.isprintable():
            ids.append(value)
    return ids


async def first_chat_model(base_url: str, api_format: str, key: str, *, timeout: float = LISTING_TIMEOUT,
                           transport: Any = None) -> str:
    """The first id the server lists that is not an embedding, speech, image or moderation model."""
    import httpx  # only a daemon that starts without a configured provider needs an HTTP client

    url = _models_url(base_url, api_format)
    headers = ({"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION} if api_format == "anthropic"
               else {"Authorization": f"Bearer {key}"})
    advice = "set YAGENT_MODEL to the model to use"
    shown = shown_url(url)  # in what the user reads; the request goes to `url`
    try:
        async with (asyncio.timeout(timeout),
                    httpx.AsyncClient(transport=transport, follow_redirects=False) as client,
                    client.stream("GET", url, headers=headers) as response):
            raw = bytearray()
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_LISTING_BYTES:
                    raise ModelListingError(f"{shown} answered with more than {MAX_LISTING_BYTES // 1024} KiB; "
                                            f"{advice}")
            status = response.status_code
    except TimeoutError:
        raise ModelListingError(f"{shown} did not answer within {timeout:g}s; is the server running? Or {advice}") \
            from None
    except httpx.HTTPError as exc:
        raise ModelListingError(f"cannot reach {shown} ({type(exc).__name__}); is the server running? Or {advice}") \
            from None
    if status != 200:
        raise ModelListingError(f"{shown} answered HTTP {status} when asked which models it has; {advice}")
    try:
        body = json.loads(bytes(raw))
    except ValueError:
        raise ModelListingError(f"{shown} answered with something other than a JSON model list; {advice}") from None
    chat = [model for model in _ids(body) if not _NOT_CHAT.search(model)]
    if not chat:
        raise ModelListingError(f"{shown} lists no chat model; pull or load one on the server, or {advice}")
    return chat[0]


class ModelLister:
    """`first_chat_model`, asked once per endpoint for the daemon's life (successes only: a server not up yet is
    asked again at the next turn)."""

    def __init__(self, transport: Any = None) -> None:
        self._known: dict[tuple[str, str], str] = {}
        self._transport = transport

    async def model_for(self, base_url: str, api_format: str, key: str) -> str:
        known = self._known.get((base_url, api_format))
        if known is None:
            known = await first_chat_model(base_url, api_format, key, transport=self._transport)
            self._known[(base_url, api_format)] = known
        return known

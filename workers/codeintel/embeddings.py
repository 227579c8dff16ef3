"""The embeddings endpoint hybrid search uses: the OpenAI-compatible `POST {base}/embeddings` that OpenAI, vLLM,
llama.cpp and Ollama serve. Used only when `[codeseek] embeddings_url` is set.

Its answers are untrusted input: a reply must hold exactly one vector per text, each of the same length (at most
`MAX_DIMENSIONS`), all numbers finite; anything else is an `EmbeddingsError` naming what was wrong, and search goes on
with BM25 alone. Vectors are normalised float32, stored as bytes.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

__all__ = ["MAX_DIMENSIONS", "EmbeddingsClient", "EmbeddingsError"]

MAX_DIMENSIONS = 8192
MAX_REPLY_BYTES = 64 * 1024 * 1024
BATCH = 32  # texts per request
MAX_TEXT_CHARS = 4000  # of one chunk's text sent to be embedded


class EmbeddingsError(Exception):
    """The endpoint failed or answered something that is not embeddings; the message says which."""


class EmbeddingsClient:
    def __init__(self, base_url: str, model: str, api_key: str = "", *, timeout: float = 60.0) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0))
        self.dimensions = 0

    def close(self) -> None:
        self._http.close()

    def embed(self, texts: list[str]) -> list[bytes]:
        """One normalised float32 vector (as bytes) per text, in order."""
        import numpy

        if not texts:
            return []
        body = {"model": self.model, "input": [t[:MAX_TEXT_CHARS] or " " for t in texts]}
        try:
            response = self._http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingsError(f"cannot reach {self.url}: {exc}") from None
        if response.status_code != 200:
            raise EmbeddingsError(f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}")
        if len(response.content) > MAX_REPLY_BYTES:
            raise EmbeddingsError(f"{self.url} answered more than {MAX_REPLY_BYTES // (1024 * 1024)} MiB")
        try:
            data: Any = response.json()
        except ValueError:
            raise EmbeddingsError(f"{self.url} did not answer JSON") from None
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or len(items) != len(texts):
            raise EmbeddingsError(f"{self.url} answered {len(items) if isinstance(items, list) else 'no'} vectors "
                                  f"for {len(texts)} texts")
        ordered: list[Any] = [None] * len(texts)
        for position, item in enumerate(items):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or ordered[index] is not None:
                raise EmbeddingsError(f"{self.url} answered a vector with a bad index")
            ordered[index] = item.get("embedding")
        vectors = []
        for vector in ordered:
            if not isinstance(vector, list) or not 0 < len(vector) <= MAX_DIMENSIONS or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in vector):
                raise EmbeddingsError(f"{self.url} answered something that is not a vector of at most "
                                      f"{MAX_DIMENSIONS} finite numbers")
            if self.dimensions and len(vector) != self.dimensions:
                raise EmbeddingsError(f"{self.url} changed its vectors' length from {self.dimensions} to "
                                      f"{len(vector)}")
            self.dimensions = len(vector)
            array = numpy.asarray(vector, dtype=numpy.float32)
            norm = float(numpy.linalg.norm(array))
            vectors.append((array / norm if norm > 0 else array).tobytes())
        return vectors

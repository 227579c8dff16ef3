"""Hybrid ranking against a real OpenAI-compatible `/embeddings` endpoint served on 127.0.0.1 by the test: with it,
search finds code that shares no word with the question; when it answers nonsense, search says so and ranks by BM25
alone."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.codeintel.trees import stop, write_tree
from tests.daemon_harness import wait_until
from yagent.workers.codeintel.server import ServerOptions, build_queries

# Words of one meaning share a dimension: what an embedding model knows and BM25 cannot.
CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "drive": 0, "apple": 1, "fruit": 1, "banana": 1}
DIMENSIONS = 8


def _vector(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[CONCEPTS.get(word, 2 + sum(map(ord, word)) % (DIMENSIONS - 2))] += 1.0
    return vector


class Endpoint(ThreadingHTTPServer):
    mode = "good"
    requests: list[dict]
    auth: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self.server.auth.append(self.headers.get("Authorization", ""))
        if self.path != "/v1/embeddings":
            self.send_error(404)
            return
        if self.server.mode == "good":
            data = [{"index": i, "embedding": _vector(text)} for i, text in enumerate(body["input"])]
        else:  # one vector too few, and not numbers
            data = [{"index": 0, "embedding": ["nan", "x"]}]
        payload = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args: object) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint(("127.0.0.1", 0), _Handler)
    server.requests, server.auth = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_hybrid_search_finds_code_by_meaning_and_falls_back_to_bm25_when_the_endpoint_fails(
        tmp_path: Path, endpoint: Endpoint) -> None:
    root = write_tree(tmp_path / "p", {
        "garage.py": 'def start_engine(v):\n    """Turns the ignition key of the car."""\n    return v\n',
        "kitchen.py": 'def peel(x):\n    """Removes the skin of a banana."""\n    return x\n',
        "ledger.py": 'def tax_rate():\n    """Looks up a rate."""\n    return 0.2\n',
    })
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    indexer, queries = build_queries(ServerOptions(root=str(root), index=str(tmp_path / "index"),
                                                   max_file_bytes=1 << 20, max_files=1000, embeddings_url=url,
                                                   embeddings_model="test-embed", embeddings_key="sk-test"))
    try:
        assert indexer.built.wait(30)

        def all_embedded() -> bool:
            with indexer.lock:
                have, total = indexer.embedded_count()
            return total > 0 and have == total

        wait_until(all_embedded, 30, "every chunk embedded by the endpoint")
        assert endpoint.auth and set(endpoint.auth) == {"Bearer sk-test"}
        assert {r["model"] for r in endpoint.requests} == {"test-embed"}
        answer = queries.semantic_search("vehicle")  # in no file: only the embeddings connect it
        lines = answer.splitlines()
        assert "fused with embeddings from test-embed (cosine similarity)" in lines[0]
        assert lines[1].startswith("garage.py:1: function start_engine")
        endpoint.mode = "broken"
        fallback = queries.semantic_search("tax rate")
        assert "ranked by BM25 keyword relevance (the embeddings endpoint failed" in fallback.splitlines()[0]
        assert "BM25 only" in fallback
        assert fallback.splitlines()[1].startswith("ledger.py:1: function tax_rate")
    finally:
        stop(queries)

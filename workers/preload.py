"""Imported once by the forkserver, so every forked worker starts ready.

Importing the agents registers every agent kind; counting one string loads the tokenizer's ranks and
building the TLS context loads the CA bundle, which forked workers then share copy-on-write instead
of each paying for their own. httpcore is imported by httpx only when a client is first made.
"""

from __future__ import annotations

import importlib.resources.readers  # noqa: F401

# Imported lazily by httpx on a worker's first request otherwise — about 25 ms of CPU per run.
import anyio._backends._asyncio
import anyio.streams.stapled
import anyio.streams.tls
import anyio.to_thread  # noqa: F401
import httpcore  # noqa: F401

from . import agents, sandbox  # noqa: F401 - registers the agent kinds
from .context.tokens import count_tokens_exact
from .llm import shared_ssl_context

count_tokens_exact("warm up the tokenizer")
sandbox.policy.warm()
shared_ssl_context()

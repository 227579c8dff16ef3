"""Imported once by the forkserver, so every forked worker starts ready.

Importing the agents registers every agent kind; counting one string loads the tokenizer's ranks and
building the TLS context loads the CA bundle, the shipped model catalog is read and parsed (a quarter of
a Chat run's setup in a fresh fork), reading one response's cookies compiles what urllib compiles on first use,
every agent's prompt is read, and one hello proof sets OpenSSL's HMAC up, all of which forked workers then share
copy-on-write instead of each paying for their own. httpcore is imported by httpx only when a client is first made.
"""

from __future__ import annotations

import importlib.resources.readers  # noqa: F401
import os

# Imported lazily by httpx on a worker's first request otherwise — about 25 ms of CPU per run.
import anyio._backends._asyncio
import anyio.streams.stapled
import anyio.streams.tls
import anyio.to_thread  # noqa: F401
import httpcore  # noqa: F401
import httpx
import yaml  # noqa: F401 - skills' YAML front matter is read at every run's start (ipc/skill_front_matter.py)

from yagent.ipc.home import yagent_home
from yagent.ipc.run_secret import hello_proof
from yagent.ipc.runtime_dir import resolve_runtime_dir
from yagent.ipc.sandbox_settings import DEFAULT_DENY_READ

from . import agents, sandbox, workflows  # noqa: F401 - registers the agent kinds (workflows: their engine and nodes)
from .agents.prompts import warm_prompts
from .agents.runtime import SWITCHED_OFF
from .context.tokens import count_tokens_exact
from .llm import default_catalog, shared_ssl_context
from .llm._connect_ahead import connects_ahead
from .tools.guard import safe_system_trees
from .tools.surface import warm_surfaces

count_tokens_exact("warm up the tokenizer")
# The daemon's defaults: a run with other [sandbox] deny_read works its listing out itself.
sandbox.policy.warm(str(yagent_home()), str(resolve_runtime_dir()),
                    [os.path.join(os.path.expanduser("~"), p[2:]) for p in DEFAULT_DENY_READ])
shared_ssl_context()
connects_ahead()  # the environment's proxies, read once for every worker (they inherit the forkserver's environment)
default_catalog()  # the shipped model catalog, read and parsed: every run's engine looks its model up
safe_system_trees()  # where commands live, resolved: every run's workspace guard starts from them
warm_surfaces(SWITCHED_OFF)  # what each profile admits of the static tools, whatever a configuration switches off
warm_prompts()  # every agent's prompt read, its shared passages in place
# A worker's first HMAC (its hello's proof) sets OpenSSL's digest up: made here, ~0.1 ms less in every start.
hello_proof(bytes(32), "", b"")
# httpx reads every response's cookies through urllib, which compiles two regular expressions the first time: ~0.65 ms
# of each run's CPU as its first response arrives.
httpx.Cookies().extract_cookies(httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1/")))

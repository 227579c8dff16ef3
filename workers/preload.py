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
import sys
from collections.abc import Callable

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


def _warm(what: str, step: Callable[[], object]) -> None:
    """Run one warm-up. They only save each run the same work: one that fails (a damaged shipped file, an
    `SSL_CERT_FILE` naming nothing) is left to the runs, which meet the failure in their own context and report
    it. An exception here would take the forkserver down — `multiprocessing` forgives a preload only an
    ImportError — and with it every launch, with nothing better to say than "unexpected EOF"."""
    try:
        step()
    except Exception as exc:  # whatever it is, a run will meet it and say so
        print(f"yagent worker preload: {what} not warmed ahead ({type(exc).__name__}: {exc}); each run does it "
              "itself", file=sys.stderr, flush=True)


_warm("the tokenizer", lambda: count_tokens_exact("warm up the tokenizer"))
# The daemon's defaults: a run with other [sandbox] deny_read works its listing out itself.
_warm("the sandbox's listing", lambda: sandbox.policy.warm(
    str(yagent_home()), str(resolve_runtime_dir()),
    [os.path.join(os.path.expanduser("~"), p[2:]) for p in DEFAULT_DENY_READ]))
_warm("the TLS context", shared_ssl_context)
# The environment's proxies, read once for every worker (they inherit the forkserver's environment).
_warm("the proxy settings", connects_ahead)
_warm("the model catalog", default_catalog)  # read and parsed: every run's engine looks its model up
_warm("the command directories", safe_system_trees)  # every run's workspace guard starts from them
# What each profile admits of the static tools, whatever a configuration switches off.
_warm("the tool surfaces", lambda: warm_surfaces(SWITCHED_OFF))
_warm("the prompts", warm_prompts)  # every agent's prompt read, its shared passages in place
# A worker's first HMAC (its hello's proof) sets OpenSSL's digest up: made here, ~0.1 ms less in every start.
_warm("the hello's HMAC", lambda: hello_proof(bytes(32), "", b""))
# httpx reads every response's cookies through urllib, which compiles two regular expressions the first time: ~0.65 ms
# of each run's CPU as its first response arrives.
_warm("the cookie reader", lambda: httpx.Cookies().extract_cookies(
    httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1/"))))

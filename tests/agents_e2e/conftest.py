from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent_harness import llm_config
from tests.fake_provider import FakeProvider


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture
def agent_daemon(make_daemon, fake):
    """A daemon whose agents use the fake provider; `extra` TOML can be passed via make_agent_daemon."""
    return make_daemon(llm_config(fake))


@pytest.fixture
def make_agent_daemon(make_daemon, fake):
    def make(extra: str = "", api_format: str = "openai"):
        return make_daemon(llm_config(fake, api_format, extra))

    return make

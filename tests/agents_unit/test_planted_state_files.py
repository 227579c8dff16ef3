"""The breaker files when something was planted at their names (a run's worker may write `breaker/`): nothing is
read or written through a link, nothing hangs, the run goes on."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tests.planted_files import KINDS, plant, untouched
from tests.run_channel_double import RecordingChannel
from yagent.ipc.config import settings_from_table
from yagent.ipc.messages import RunSpec
from yagent.ipc.state_layout import breaker_dir
from yagent.workers.agents.circuit_breaker import ProviderBreakers
from yagent.workers.agents.runtime import AgentRun
from yagent.workers.kinds import RunContext

# A planted pipe that hangs must fail the test well before the suite's own timeout.
pytestmark = pytest.mark.timeout(60)


def _run(tmp_path: Path, channel: RecordingChannel, config: dict | None = None, agent: str = "coding") -> AgentRun:
    config = config or {"global": {"llm": {"use_provider": "a", "providers": {
        "a": {"api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "gpt-4o"}}}}}
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(tmp_path), agent=agent, input="x",
                   home=str(tmp_path), settings=settings_from_table(config).run_settings)
    return AgentRun(RunContext(spec, channel), agent)


# -- circuit breaker ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_breaker_file_is_not_used_and_the_breaker_counts_in_memory(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    breakers = ProviderBreakers(2, 60, directory=tmp_path / "breaker")
    path = breakers.path_for("a")
    assert path is not None
    target = plant(path, kind, tmp_path)
    breaker = breakers.for_provider("a")
    with caplog.at_level(logging.WARNING, logger="yagent.workers.agents.circuit_breaker"):
        assert breaker.allow()
        breaker.record_failure()
        assert breaker.state == "closed"
        breaker.record_failure()
        assert breaker.state == "open" and not breaker.allow()  # still a breaker: this process's own counting
    assert untouched(target, kind)
    assert path.is_symlink() if kind in ("link", "dangling") else path.exists()
    warnings = [r.getMessage() for r in caplog.records if r.name == "yagent.workers.agents.circuit_breaker"]
    assert len(warnings) == 1 and str(path) in warnings[0] and "remove it" in warnings[0]  # once, with what to do


@pytest.mark.parametrize("forged", ['{"failures": NaN, "opened_at": null}', '{"failures": 0, "opened_at": NaN}',
                                    '{"failures": 1e400}', '{"failures": "x", "opened_at": []}', "[]"])
def test_a_forged_breaker_state_is_read_as_a_fresh_one_and_the_breaker_still_opens(tmp_path: Path,
                                                                                   forged: str) -> None:
    # NaN compares false with everything: kept, it would never let the breaker open (or never let it close).
    breakers = ProviderBreakers(2, 60, directory=tmp_path / "breaker")
    path = breakers.path_for("a")
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text(forged)
    breaker = breakers.for_provider("a")
    assert breaker.state == "closed" and breaker.allow()
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    assert json.loads(path.read_text())["failures"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_breaker_file_never_fails_the_directors_model_call(tmp_path: Path, kind: str) -> None:
    from tests.agent_harness import MARKERS
    from tests.fake_provider import FakeProvider, Step
    from yagent.ipc.vocabulary import StopReason
    from yagent.workers.agents.loop import LoopPolicy
    from yagent.workers.llm import Message

    target = plant(breaker_dir(tmp_path) / "a.json", kind, tmp_path)
    with FakeProvider() as fake:
        fake.script("director", MARKERS["director"], [Step(text="answered")])
        config = {"global": {"llm": {"use_provider": "a", "providers": {"a": fake.provider_table("openai")}}},
                  "llm": {"max_retries": 0, "circuit_breaker_threshold": 1}}
        run = _run(tmp_path, RecordingChannel(), config, agent="director")
        loop_config = run.loop_config([Message.system(MARKERS["director"]), Message.user("x")], LoopPolicy())
        assert loop_config.breaker is not None

        async def go():
            try:
                return await run.run_loop(loop_config)
            finally:
                await run.close()

        result = asyncio.run(go())
        fake.assert_no_problems()
    assert (result.stop_reason, result.output) == (StopReason.PLAIN_TEXT, "answered")
    assert untouched(target, kind)

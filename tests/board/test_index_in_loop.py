"""The index in the agent loop: rebuilt from disk for every model call, identical when a step is retried,
and never stored in the conversation (real engine over HTTP to the fake provider, real files)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS
from tests.fake_provider import Failure, FakeProvider, Step, ToolCallSpec
from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.provider_config import parse_llm_config
from yagent.workers.agents.loop import LoopConfig, LoopPolicy, run_agent_loop
from yagent.workers.board import INDEX_HEADER, Handoff, TaskBoard
from yagent.workers.llm import Message, build_engine
from yagent.workers.tools import ToolContext, build_surface


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


async def _no_sleep(_seconds: float) -> None:
    return None


def _index_messages(request) -> list[str]:
    return [m["content"] for m in request.body["messages"]
            if m["role"] == "user" and isinstance(m["content"], str) and m["content"].startswith(INDEX_HEADER)]


def test_every_call_carries_the_index_rebuilt_from_disk_and_memory_never_does(fake: FakeProvider,
                                                                              tmp_path: Path) -> None:
    board = TaskBoard(tmp_path / "home", "task-1", BoardSettings(), environ={})
    board.notes.write("repo", Handoff("first finding"), "body one")
    fake.script("director", MARKERS["director"], [
        Step(failure=Failure.http(500)),  # the first attempt of step 1 fails: the step is retried
        Step(tool_calls=[ToolCallSpec("list_dir", {"path": "."})]),
        Step(text="All done."),
    ])
    boundaries: list[int] = []

    async def boundary() -> None:
        boundaries.append(1)
        if len(boundaries) == 2:  # a note lands between the two steps (a child finished meanwhile)
            board.notes.write("coding", Handoff("second finding"), "body two")

    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 0}}
    messages = [Message.system(MARKERS["director"] + " (test)"), Message.user("do the thing")]
    cfg = LoopConfig(agent="director", engine=build_engine(parse_llm_config(config, {}), agent="director"),
                     surface=build_surface("director"), tool_ctx=ToolContext(project_root=tmp_path, run_id="r"),
                     messages=messages, max_steps=5, emit=lambda _t, _d: None, step_boundary=boundary,
                     policy=LoopPolicy(), step_retries=2, retry_delay=lambda _a: 0.0, sleep=_no_sleep,
                     call_context=board.index_messages)
    outcome = asyncio.run(run_agent_loop(cfg))
    assert outcome.output == "All done."
    failed, retried, second = fake.requests_for("director")
    assert _index_messages(failed) == _index_messages(retried)  # a retried step sends the same index
    (first_index,) = _index_messages(retried)
    assert "first finding" in first_index and "second finding" not in first_index
    (second_index,) = _index_messages(second)
    assert "first finding" in second_index and "second finding" in second_index
    assert second.body["messages"][-1]["content"] == second_index  # added last, after the tool results
    assert not any(isinstance(m.content, str) and INDEX_HEADER in m.content for m in messages)

"""The fake provider itself: identity matching, clear failures, waits with deadlines, standalone mode."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.fake_provider import FakeProvider, Script, Step, ToolCallSpec
from tests.llm.conftest import make_engine
from yagent.workers.llm import LLMBadRequestError, Message

REPO = Path(__file__).resolve().parents[2]


def _ask(fake: FakeProvider, system: str, user: str = "hi", api_format: str = "openai") -> str:
    async def main() -> str:
        async with make_engine(fake, api_format) as engine:
            return (await engine.complete([Message.system(system), Message.user(user)]).final()).text

    return asyncio.run(main())


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_unrecognised_identity_gets_a_clear_400(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "You are the Coding agent", [Step(text="x")])
    with pytest.raises(LLMBadRequestError) as info:
        _ask(fake, "You are the Reviewer agent, a new prompt", "please review", api_format)
    message = str(info.value)
    assert "no script recognises this request" in message
    assert "You are the Reviewer agent" in message and "'coding'" in message
    assert len(fake.problems) == 1
    assert fake.requests[0].status == 400 and fake.requests[0].identity is None
    with pytest.raises(AssertionError, match="Reviewer"):
        fake.assert_no_problems()


def test_exhausted_script_says_so(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="one")])
    assert _ask(fake, "Coding agent") == "one"
    with pytest.raises(LLMBadRequestError, match="script for identity 'coding' is exhausted"):
        _ask(fake, "Coding agent")


def test_steps_are_keyed_by_identity_not_by_global_call_order(fake: FakeProvider) -> None:
    fake.script("director", "You are the Director", [Step(text="d1"), Step(text="d2")])
    fake.script("coding", "You are the Coding agent", [Step(text="c1"), Step(text="c2")])
    answers = [_ask(fake, "You are the Coding agent"), _ask(fake, "You are the Director"),
               _ask(fake, "You are the Director"), _ask(fake, "You are the Coding agent")]
    assert answers == ["c1", "d1", "d2", "c2"]
    assert [r.identity for r in fake.requests] == ["coding", "director", "director", "coding"]
    assert [r.step for r in fake.requests] == [0, 0, 1, 1]
    fake.assert_no_problems()


def test_parallel_runs_of_one_agent_are_told_apart_by_the_user_message(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="for task A", latency=0.01)], user_contains="task A")
    fake.script("coding", "Coding agent", [Step(text="for task B")], user_contains="task B")

    async def main() -> list[str]:
        async with make_engine(fake) as engine:
            calls = [engine.complete([Message.system("Coding agent"), Message.user(f"Do task {x}")]).final()
                     for x in "BA"]
            return [r.text for r in await asyncio.gather(*calls)]

    assert asyncio.run(main()) == ["for task B", "for task A"]


def test_a_repeated_marker_queues_steps_for_the_next_run_and_regex_markers_work(fake: FakeProvider) -> None:
    first = fake.script("repo", r"Repo agent v\d+", [Step(text="run 1")], regex=True)
    second = fake.script("repo", "Repo agent", [Step(text="run 2")])
    assert _ask(fake, "You are the Repo agent v2") == "run 1"
    assert _ask(fake, "You are the Repo agent v2") == "run 2"
    assert (first.consumed, first.remaining, second.consumed) == (1, 0, 1)
    second.wait_consumed(timeout=1)


def test_waits_have_deadlines_and_say_what_was_missing(fake: FakeProvider) -> None:
    with pytest.raises(TimeoutError, match="expected 1 requests for 'coding', got 0"):
        fake.wait_for_requests(1, timeout=0.05, identity="coding")
    with pytest.raises(TimeoutError, match="no client disconnected"):
        fake.wait_for_disconnect(timeout=0.05)


def test_requests_are_recorded_with_parsed_bodies(fake: FakeProvider) -> None:
    fake.script("chat", "Chat agent", [Step(tool_calls=[ToolCallSpec("search", '{"q": "broken json')])])

    async def main() -> str:
        async with make_engine(fake, "anthropic") as engine:
            response = await engine.complete([Message.system("Chat agent"), Message.user("find it")]).final()
            return response.tool_calls[0].arguments

    assert asyncio.run(main()) == '{"q": "broken json'  # malformed arguments are delivered untouched
    (record,) = fake.wait_for_requests(1, identity="chat")
    assert record.api_format == "anthropic" and record.path == "/v1/messages"
    assert record.body["system"] == "Chat agent" and record.first_user == "find it"
    assert record.completed and not record.disconnected and record.status == 200


def test_a_gated_step_sends_nothing_until_its_gate_is_set_and_a_hang_up_meanwhile_ends_it(fake: FakeProvider) -> None:
    hung_up, opened = threading.Event(), threading.Event()
    fake.script("coding", "Coding agent", [Step(text="never sent", gate=hung_up), Step(text="sent", gate=opened)])

    async def main() -> str:
        async with make_engine(fake, max_retries=0) as engine:
            call = asyncio.ensure_future(engine.complete([Message.system("Coding agent"), Message.user("a")]).final())
            await fake.wait_for_requests_async(1, identity="coding")
            call.cancel()  # the client gives up on the held step: the server stops holding it
            lost = await fake.wait_for_disconnect_async()
            assert lost.step == 0 and lost.status == 0 and not lost.completed  # not a byte was sent
            call = asyncio.ensure_future(engine.complete([Message.system("Coding agent"), Message.user("b")]).final())
            await fake.wait_for_requests_async(2, identity="coding")
            opened.set()
            return (await call).text

    assert asyncio.run(main()) == "sent"
    with pytest.raises(ValueError, match="gate"):
        Step(gate=threading.Event()).to_dict()  # a gate lives in the test's process


def test_unknown_paths_get_404_naming_the_endpoints(fake: FakeProvider) -> None:
    response = httpx.post(f"{fake.base_url}/v1/completions", json={"prompt": "x"})
    assert response.status_code == 404 and "/v1/chat/completions" in response.text


def test_standalone_mode_scripts_over_http(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts.json"
    scripts.write_text(json.dumps([Script("cli", "CLI agent", [Step(text="from file")]).to_dict()]))
    with subprocess.Popen([sys.executable, "-m", "tests.fake_provider", "--scripts", str(scripts)], cwd=REPO,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("FAKE_PROVIDER_URL=http://127.0.0.1:")
            base = line.split("=", 1)[1]
            posted = httpx.post(f"{base}/_fake/scripts",
                                json=[Script("web", "Web agent", [Step(text="from post")]).to_dict()])
            assert posted.json() == {"registered": 1}
            for system, expected in (("CLI agent", "from file"), ("Web agent", "from post")):
                body = {"model": "m", "stream": False, "messages": [{"role": "system", "content": system},
                                                                     {"role": "user", "content": "x"}]}
                reply = httpx.post(f"{base}/v1/chat/completions", json=body).json()
                assert reply["choices"][0]["message"]["content"] == expected
            recorded = httpx.get(f"{base}/_fake/requests").json()
            assert [r["identity"] for r in recorded] == ["cli", "web"]
        finally:
            proc.stdin.close()
            assert proc.wait(timeout=10) == 0

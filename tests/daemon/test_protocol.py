"""The control protocol at its edges: handshakes, questions, garbage on every socket."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import msgpack
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.daemon_harness import arun, collect_turn, of_type, script, submit
from yagent.ipc import DaemonClient, DaemonNotRunning, EventStream, ProtocolMismatch, RemoteError
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    Ack,
    Answer,
    DaemonStatus,
    Hello,
    HelloReply,
    ListTasks,
    StatusRequest,
    TaskList,
    WorkerHello,
)
from yagent.ipc.records import encode
from yagent.ipc.vocabulary import ErrorCode, EventType

pytestmark = pytest.mark.e2e


def test_client_without_a_daemon_fails_fast_with_advice(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    started = time.monotonic()
    with pytest.raises(DaemonNotRunning) as exc:
        arun(DaemonClient(runtime).connect())
    assert time.monotonic() - started < 2
    assert "yagent daemon start" in str(exc.value)


def test_protocol_mismatch_is_refused_with_what_to_do(daemon) -> None:
    async def go():
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as exc:
                await c.request(Hello(id=0, version=999), HelloReply)
            return exc.value

    err = arun(go())
    assert err.code == ErrorCode.PROTOCOL_MISMATCH
    assert "restart the daemon" in str(err)
    assert isinstance(ProtocolMismatch("x"), Exception)


def test_a_client_older_than_the_daemon_is_told_to_use_the_newer_client_not_to_restart(daemon) -> None:
    async def go():
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as exc:  # protocol 1: before the client token and bound workers
                await c.request(Hello(id=0, version=PROTOCOL_VERSION - 1), HelloReply)
            return exc.value

    err = arun(go())
    assert err.code == ErrorCode.PROTOCOL_MISMATCH
    assert "older than yagentd" in str(err) and "restart" not in str(err)


def test_question_round_trip_reaches_every_client_and_closes_everywhere(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as a, daemon.client() as b:
            sub = await submit(a, project, script({"ask": {"kind": "select", "prompt": "Which?",
                                                          "options": ["left", "right"]}}))
            seen_by_b: list[str] = []

            async def watch_b():
                async with EventStream(b, sub.task) as stream:
                    async for ev in stream.events():
                        seen_by_b.append(ev.type)
                        if ev.type == EventType.TURN_FINISHED:
                            return

            watcher = asyncio.create_task(watch_b())

            async def answer(ev):
                if ev.type == EventType.USER_HELP_NEEDED:
                    listing = await a.request(ListTasks(id=0), TaskList)
                    pending = [q for t in listing.tasks for q in t.questions]
                    assert [q.prompt for q in pending] == ["Which?"]
                    await b.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": "right"}), Ack)

            events = await collect_turn(a, sub.task, on_event=answer)
            await watcher
            return events, seen_by_b

    events, seen_by_b = arun(go())
    needed = of_type(events, EventType.USER_HELP_NEEDED)[0]
    assert needed.data["options"] == ["left", "right"]
    assert of_type(events, EventType.USER_HELP_RESPONSE)[0].data["answer"] == {"value": "right"}
    assert EventType.USER_HELP_NEEDED in seen_by_b and EventType.USER_HELP_RESPONSE in seen_by_b
    assert '"value": "right"' in of_type(events, EventType.TURN_FINISHED)[0].data["output"]


def test_answering_an_unknown_question_is_an_error(daemon, project: Path) -> None:
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script())
            await collect_turn(c, sub.task)
            with pytest.raises(RemoteError) as exc:
                await c.request(Answer(id=0, task=sub.task, request_id="nope", answer={}), Ack)
            return exc.value

    assert arun(go()).code == ErrorCode.NO_QUESTION


frames = st.lists(st.binary(max_size=300), min_size=1, max_size=4)
ints = st.integers(-(2**63), 2**63 - 1)
maps = st.dictionaries(st.text(max_size=8), st.one_of(ints, st.text(max_size=20), st.none(),
                                                       st.lists(ints, max_size=3)), max_size=6)


def test_garbage_on_every_socket_leaves_the_daemon_serving(daemon, project: Path) -> None:
    ctx = zmq.Context()
    control = ctx.socket(zmq.DEALER)
    control.connect(f"ipc://{daemon.runtime / 'control.sock'}")
    worker = ctx.socket(zmq.DEALER)
    worker.setsockopt(zmq.IDENTITY, b"r-not-a-run")
    worker.connect(f"ipc://{daemon.runtime / 'workers.sock'}")
    sent = {"n": 0, "control": 0}

    @settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(frames, maps.map(lambda m: [msgpack.packb(m)]),
                     maps.map(lambda m: [msgpack.packb({**m, "k": "submit"})])), st.booleans())
    def blast(parts, to_worker):
        (worker if to_worker else control).send_multipart(parts)
        sent["n"] += 1
        sent["control"] += not to_worker

    try:
        blast()
        worker.send(encode(WorkerHello(version=PROTOCOL_VERSION, run="r-not-a-run", pid=os.getpid())))
        for path in ("control.sock", "workers.sock", "events.sock"):
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.connect(str(daemon.runtime / path))
            raw.sendall(os.urandom(4096))
            raw.close()
        # Every frame sent to control.sock is answered by exactly one error reply: wait for them all,
        # which proves the daemon read every one of them.
        replies = 0
        while replies < sent["control"]:
            assert control.poll(10_000), f"only {replies} of {sent['control']} garbage frames were answered"
            reply = msgpack.unpackb(control.recv())
            assert reply["k"] == "error"
            replies += 1
    finally:
        control.close(0)
        worker.close(0)
        ctx.term()
    assert sent["n"] >= 1000

    async def still_serving():
        async with daemon.client() as c:
            await c.request(StatusRequest(id=0), DaemonStatus)
            sub = await submit(c, project, script(output="alive"))
            return await collect_turn(c, sub.task)

    events = arun(still_serving())
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "alive"
    assert daemon.proc.poll() is None

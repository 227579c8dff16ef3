"""control.sock answers only clients that read the client token from the runtime directory.

Landlock does not mediate connect() on a socket path, so a confined agent shell could reach control.sock;
what it cannot do is read the runtime directory, and without the token yagentd does nothing for it.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
import zmq

from tests.daemon_harness import arun, collect_turn, of_type, script, submit
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    DaemonStatus,
    ErrorReply,
    Hello,
    HelloReply,
    ListTasks,
    StatusRequest,
    Submit,
    TaskList,
)
from yagent.ipc.records import Message, decode, encode
from yagent.ipc.sockets import random_identity
from yagent.ipc.vocabulary import ErrorCode, EventType


def _ask(sock: zmq.Socket, msg: Message) -> Message:
    sock.send(encode(msg))
    assert sock.poll(10_000), f"no answer to {msg.kind}"
    return decode(sock.recv())


def _raw(ctx: zmq.Context, daemon, identity: bytes | None) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    sock.connect(f"ipc://{daemon.runtime / 'control.sock'}")
    return sock


def _refused(reply: Message) -> str:
    assert isinstance(reply, ErrorReply) and reply.code == ErrorCode.UNAUTHENTICATED, reply
    return reply.message


def test_a_raw_client_without_the_token_is_refused_everything_with_what_to_do(daemon, project: Path) -> None:
    token_path = daemon.runtime / "client.token"
    assert stat.S_IMODE(token_path.stat().st_mode) == 0o600
    token = token_path.read_text().strip()
    ctx = zmq.Context()
    try:
        for identity in (None, random_identity()):  # libzmq's own identity, and one nobody can guess
            sock = _raw(ctx, daemon, identity)
            submit_msg = Submit(id=1, project=str(project), text=script(output="never"), agent="scripted")
            advice = _refused(_ask(sock, submit_msg))
            assert str(token_path) in advice and "yagent" in advice
            _refused(_ask(sock, ListTasks(id=2)))
            assert "no client token" in _refused(_ask(sock, Hello(id=3, version=PROTOCOL_VERSION)))
            wrong = Hello(id=4, version=PROTOCOL_VERSION, token="0" * len(token))
            assert "wrong client token" in _refused(_ask(sock, wrong))
            _refused(_ask(sock, submit_msg))  # still nothing: a refused hello marks nothing
            sock.close(0)
        # The right token on a guessable identity marks nothing either: another process could claim it later.
        short = _raw(ctx, daemon, b"guessable")
        assert "guessed" in _refused(_ask(short, Hello(id=5, version=PROTOCOL_VERSION, token=token)))
        _refused(_ask(short, ListTasks(id=6)))
        short.close(0)
        # With the token, on a random identity: served.
        good = _raw(ctx, daemon, random_identity())
        assert isinstance(_ask(good, Hello(id=7, version=PROTOCOL_VERSION, token=token)), HelloReply)
        listing = _ask(good, ListTasks(id=8))
        assert isinstance(listing, TaskList) and listing.tasks == []  # none of the refused submits happened
        good.close(0)
    finally:
        ctx.term()
    log = daemon.log_path.read_text()
    assert log.count("control.sock: refused peer") == 3  # each refused peer once, however often it tried


def test_a_client_that_cannot_read_the_token_is_refused_saying_why_and_the_cli_says_what_to_do(
        daemon, project: Path) -> None:
    token_path = daemon.runtime / "client.token"
    aside = daemon.runtime / "client.token.aside"
    # Permission bits do not stop root (the tests' user here), so the token is made unreadable by moving it:
    # the client meets the same OSError a confined process meets for a directory outside its read set.
    os.rename(token_path, aside)
    try:
        async def refused() -> RemoteError:
            with pytest.raises(RemoteError) as exc:
                async with daemon.client():
                    pass
            return exc.value

        error = arun(refused())
        assert error.code == ErrorCode.UNAUTHENTICATED
        assert "cannot read the token" in str(error) and str(token_path) in str(error)
        done = daemon.cli("ps")
        assert done.returncode != 0 and str(token_path) in done.stderr + done.stdout
    finally:
        os.rename(aside, token_path)
    assert daemon.status().pid == daemon.proc.pid  # readable again: served


def test_the_token_is_new_at_every_start_and_a_connected_client_says_hello_again_by_itself(
        make_daemon, project: Path) -> None:
    daemon = make_daemon()
    token_path = daemon.runtime / "client.token"
    first = token_path.read_text()

    async def across_a_restart() -> list:
        async with daemon.client() as c:
            await c.request(StatusRequest(id=0), DaemonStatus)
            await asyncio.to_thread(daemon.terminate)
            await asyncio.to_thread(daemon.start)
            assert token_path.read_text() != first and stat.S_IMODE(token_path.stat().st_mode) == 0o600
            # The old connection reaches the new daemon, which does not know it: refused, hello again, served.
            sub = await submit(c, project, script(output="after the restart"))
            return await collect_turn(c, sub.task)

    events = arun(across_a_restart())
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "after the restart"


def test_a_follower_open_across_a_restart_goes_on_and_resubscribes_with_the_new_token(
        make_daemon, project: Path) -> None:
    from yagent.ipc import EventStream

    daemon = make_daemon()

    async def follow_across_a_restart() -> tuple[list, EventStream, str]:
        async with daemon.client() as c:
            sub = await submit(c, project, script(output="before"))
            before = await collect_turn(c, sub.task)
            async with EventStream(c, sub.task, after_seq=before[-1].seq, idle_poll=0.2) as stream:
                old_token = c.token
                await asyncio.to_thread(daemon.terminate)
                await asyncio.to_thread(daemon.start)
                await submit(c, project, script(output="after the restart"), task=sub.task)
                assert c.token != old_token
                seen = []
                async for ev in stream.events():
                    seen.append(ev)
                    if ev.type == EventType.TURN_FINISHED and ev.data.get("output") == "after the restart":
                        break
                return seen, stream, c.token

    seen, stream, token = arun(follow_across_a_restart())
    assert of_type(seen, EventType.TURN_FINISHED)
    assert stream._sub_token == token  # events.sock would refuse the old one for good


def _connect_and_handshake(sock: zmq.Socket, endpoint: str, timeout_ms: int = 10_000) -> int:
    """Connect `sock` and return libzmq's handshake outcome for it (a monitor event: a signal, not a wait)."""
    from zmq.utils.monitor import recv_monitor_message

    wanted = {zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
              zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL}
    monitor = sock.get_monitor_socket()  # armed before connecting, so no event is missed
    try:
        sock.connect(endpoint)
        while True:
            assert monitor.poll(timeout_ms), "no handshake outcome"
            event = recv_monitor_message(monitor)["event"]
            if event in wanted:
                return event
    finally:
        sock.disable_monitor()
        monitor.close(0)


def test_events_sock_shows_nothing_to_a_subscriber_without_the_token(daemon, project: Path) -> None:
    token = (daemon.runtime / "client.token").read_text().strip()
    ctx = zmq.Context()
    endpoint = f"ipc://{daemon.runtime / 'events.sock'}"
    subs: dict[str, zmq.Socket] = {}
    try:
        outcomes = {}
        for name, password in (("no", None), ("a wrong", "f" * len(token)), ("the", token)):
            sock = subs[name] = ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.LINGER, 0)
            if password is not None:
                sock.setsockopt(zmq.PLAIN_USERNAME, b"yagent")
                sock.setsockopt(zmq.PLAIN_PASSWORD, password.encode())
            sock.setsockopt(zmq.SUBSCRIBE, b"")  # every task's events
            outcomes[name] = _connect_and_handshake(sock, endpoint)
        assert outcomes["the"] == zmq.EVENT_HANDSHAKE_SUCCEEDED
        assert outcomes["a wrong"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH
        assert outcomes["no"] != zmq.EVENT_HANDSHAKE_SUCCEEDED  # a NULL peer cannot even speak to a PLAIN server

        async def run_one() -> list:
            async with daemon.client() as c:
                sub = await submit(c, project, script({"mark": "secret content"}, output="private"))
                return await collect_turn(c, sub.task)

        events = arun(run_one())
        assert of_type(events, EventType.TURN_FINISHED)
        assert subs["the"].poll(10_000), "the subscriber with the token heard nothing"
        # The task's last event reached the subscriber with the token, so it was published to the others too.
        while subs["the"].poll(0):
            subs["the"].recv_multipart()
        for name in ("no", "a wrong"):
            assert not subs[name].poll(0), f"the subscriber with {name} token heard the task"
    finally:
        for sock in subs.values():
            sock.close(0)
        ctx.term()
    assert daemon.log_path.read_text().count("events.sock: refused peer") == 1  # the wrong password, once

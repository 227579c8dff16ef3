"""The event relay, worker → daemon → subscribers, against a daemon in this process on its real sockets.

The test is the run's worker (it holds the run's secret, through the launcher seam) and a subscriber on
events.sock: a well-formed batch must reach subscribers in the bytes it was sent in, a batch with anything
malformed must lose exactly that and be encoded anew, frames that are not batches must cost nothing but
themselves (and a batch from a connection that proved no run's secret, nothing), and a subscriber that never
reads must stall neither the daemon nor anyone else.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import zmq
import zmq.asyncio

from tests.daemon.seams import ScriptedLauncher
from tests.daemon_harness import collect_turn, submit
from yagent.daemon.arbiter import Daemon
from yagent.daemon.sd_notify import SystemdNotifier
from yagent.ipc import DaemonClient, EventStream
from yagent.ipc.config import Settings
from yagent.ipc.messages import (
    PROTOCOL_VERSION,
    DaemonStatus,
    ErrorReply,
    Event,
    EventBatch,
    PublishedEvents,
    ResultAck,
    RunOutcome,
    RunResult,
    StartRun,
    StatusRequest,
    WorkerHello,
)
from yagent.ipc.records import decode, encode
from yagent.ipc.run_secret import hello_proof
from yagent.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir
from yagent.ipc.sockets import connect_dealer, connect_subscriber, random_identity
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason

pytestmark = pytest.mark.e2e
CHUNK = EventType.AI_CHUNK.value  # as it comes off the wire: a plain str


@dataclass
class Relay:
    daemon: Daemon
    client: DaemonClient
    task: str
    run: str
    worker: zmq.asyncio.Socket
    ctx: zmq.asyncio.Context

    def subscriber(self, rcvhwm: int | None = None) -> zmq.asyncio.Socket:
        assert self.client.paths is not None
        return connect_subscriber(self.ctx, RuntimePaths.endpoint(self.client.paths.events), [self.task.encode()],
                                  rcvhwm=rcvhwm, token=self.client.token)

    async def subscribed(self) -> zmq.asyncio.Socket:
        """A subscriber whose subscription has taken effect: marks are published until one reaches it."""
        sub = self.subscriber()
        while True:
            await self.worker.send(encode(EventBatch(events=[["mark", 0.0, {"name": "joining"}]])))
            if await sub.poll(100):
                break
        while await sub.poll(100):  # the marks still on their way: read past them
            await sub.recv_multipart()
        return sub

    async def published(self, sub: zmq.asyncio.Socket) -> tuple[bytes, PublishedEvents]:
        async with asyncio.timeout(10):
            topic, frame = await sub.recv_multipart()
        assert topic == self.task.encode()
        msg = decode(frame)
        assert isinstance(msg, PublishedEvents)
        return frame, msg


async def _notification(sock: socket.socket, needle: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        while needle not in (await loop.sock_recv(sock, 4096)).decode():
            pass


@asynccontextmanager
async def _relay(tmp_path: Path, settings: Settings | None = None) -> AsyncIterator[Relay]:
    """A daemon with one run whose worker is the test: bound by a genuine hello and started."""
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(short / "notify.sock"))
    notify.setblocking(False)
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    paths = ensure_runtime_dir(short / "run")
    launcher = ScriptedLauncher()
    daemon = Daemon(settings or Settings(), paths, home, launcher,
                    notifier=SystemdNotifier({"NOTIFY_SOCKET": str(short / "notify.sock")}))
    serving = asyncio.create_task(daemon.serve())
    ctx = zmq.asyncio.Context()
    worker = None
    try:
        await _notification(notify, "READY=1")
        async with DaemonClient(paths.root) as client:
            sub = await submit(client, project, "x")
            run_id, secret = next(iter(launcher.secrets.items()))
            identity = random_identity()
            worker = connect_dealer(ctx, RuntimePaths.endpoint(paths.workers), identity=identity)
            await worker.send(encode(WorkerHello(version=PROTOCOL_VERSION, run=run_id, pid=1,
                                                 proof=hello_proof(secret, run_id, identity))))
            async with asyncio.timeout(10):
                assert isinstance(decode(await worker.recv()), StartRun)
            yield Relay(daemon, client, sub.task, run_id, worker, ctx)
            await worker.send(encode(RunResult(outcome=RunOutcome(
                status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="relayed"))))
            async with asyncio.timeout(10):
                while not isinstance(decode(await worker.recv()), ResultAck):
                    pass
            launcher.handles[run_id].exit(0)
            await collect_turn(client, sub.task)
    finally:
        if worker is not None:
            worker.close(0)
        ctx.destroy(0)
        daemon.request_shutdown()
        async with asyncio.timeout(10.0):
            await serving
        notify.close()
        shutil.rmtree(short, ignore_errors=True)


def _batch_frame(events_bytes: bytes) -> bytes:
    """An `events` frame around an events array already encoded (as another msgpack writer might encode it)."""
    return b"\x82" + msgpack.packb("events") + events_bytes + msgpack.packb("k") + msgpack.packb("events")


def _odd_events() -> bytes:
    """Two events encoded as msgpack allows but msgpack-python never writes: a float32 time, an int in 4 bytes.
    Decoded and packed again they would come out different, so only a relay of the bytes keeps them."""
    first = (b"\x93" + msgpack.packb(CHUNK) + b"\xca" + struct.pack(">f", 1.5)
             + b"\x81" + msgpack.packb("n") + b"\xce" + struct.pack(">I", 5))
    second = b"\x93" + msgpack.packb(CHUNK) + msgpack.packb(2.0) + msgpack.packb({"text": "two"})
    return b"\x92" + first + second


def test_a_well_formed_batch_reaches_subscribers_in_the_bytes_it_was_sent_in(tmp_path: Path) -> None:
    async def main() -> tuple[PublishedEvents, int]:
        async with _relay(tmp_path) as relay:
            sub = await relay.subscribed()
            before = relay.daemon.hub.last_seq(relay.task)
            odd = _odd_events()
            assert msgpack.packb(msgpack.unpackb(odd)) != odd  # packing anew would change them
            await relay.worker.send(_batch_frame(odd))
            frame, msg = await relay.published(sub)
            sub.close(0)
            assert odd in frame  # relayed, not packed again
            return msg, before

    msg, before = asyncio.run(main())
    events = Event.from_batch(msg)
    assert [(e.seq, e.type, e.ts, e.data) for e in events] == [
        (before + 1, CHUNK, 1.5, {"n": 5}), (before + 2, CHUNK, 2.0, {"text": "two"})]
    assert {e.agent for e in events} == {"scripted"} and events[0].run == msg.run


def test_a_batch_with_malformed_events_loses_exactly_those_and_bad_frames_never_stop_the_relay(
        tmp_path: Path) -> None:
    good = [CHUNK, 1.0, {"text": "kept"}]
    malformed = [[CHUNK, True, {}], [CHUNK, 1.0], "junk", [7, 1.0, {}], [CHUNK, 1.0, [1]],
                 [CHUNK, float("nan"), {"text": "nan is a time"}], [CHUNK, 2**64 - 1, {"text": "huge"}]]
    duplicate_keys = (b"\x83" + msgpack.packb("events") + msgpack.packb([["forged", 1.0, "not a map"]])
                      + msgpack.packb("events") + msgpack.packb([good]) + msgpack.packb("k") + msgpack.packb("events"))
    nested = b"\x91" * 100_000  # nesting deeper than any decoder follows
    garbage = [b"", b"\xc1", b"not msgpack at all", encode(EventBatch(events=[good])) + b"\x00",
               _batch_frame(nested), _batch_frame(b"\x92" + msgpack.packb(good)),  # an array cut short
               msgpack.packb({"k": "events", "events": "not a list"}), duplicate_keys,
               msgpack.packb({"k": "events", "events": [good, {1: 2}], 3: "int key"}, strict_types=False)]

    async def main() -> tuple[list[list[Event]], DaemonStatus]:
        async with _relay(tmp_path) as relay:
            sub = await relay.subscribed()
            await relay.worker.send(encode(EventBatch(events=[good, *malformed, good])))
            batches = [Event.from_batch((await relay.published(sub))[1])]
            for frame in garbage:
                await relay.worker.send(frame)
            # A batch from a connection bound to no run, forged or a genuine batch's bytes replayed: refused.
            assert relay.client.paths is not None
            impostor = connect_dealer(relay.ctx, RuntimePaths.endpoint(relay.client.paths.workers))
            await impostor.send(encode(EventBatch(events=[["forged", 1.0, {"text": "forged"}]])))
            await impostor.send(encode(EventBatch(events=[good, *malformed, good])))
            async with asyncio.timeout(10):
                assert isinstance(decode(await impostor.recv()), ErrorReply)  # told once, then ignored
            impostor.close(0)
            await relay.worker.send(encode(EventBatch(events=[good])))  # after all that, still relayed
            while len(batches) < 4:  # the duplicate-keyed frame's last "events", the int-keyed one, this one
                batches.append(Event.from_batch((await relay.published(sub))[1]))
            status = await relay.client.request(StatusRequest(id=0), DaemonStatus)
            sub.close(0)
            return batches, status

    batches, status = asyncio.run(main())
    first, *rest = batches
    assert [e.data["text"] for e in first] == ["kept", "nan is a time", "huge", "kept"]
    assert [e.seq for e in first] == list(range(first[0].seq, first[0].seq + 4))  # no hole for what was dropped
    # A map with its key twice reads as its last value, as the plain decoder reads it: that is what was checked.
    assert [[e.data for e in b] for b in rest] == [[{"text": "kept"}], [{"text": "kept"}], [{"text": "kept"}]]
    seqs = [e.seq for b in batches for e in b]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert status.version  # the daemon still answers
    assert "forged" not in repr([e.type for b in batches for e in b])


def test_a_subscriber_that_never_reads_stalls_neither_the_daemon_nor_another_subscriber(tmp_path: Path) -> None:
    count = 3000

    async def follow(relay: Relay) -> list[int]:
        got: list[int] = []
        async with EventStream(relay.client, relay.task) as stream:
            async for ev in stream.events():
                if ev.type == EventType.AI_CHUNK:
                    got.append(ev.data["i"])
                    if len(got) == count:
                        return got
        return got

    async def main() -> tuple[list[int], int]:
        # PUB keeps 4 frames for a subscriber: the one that never reads is past that at once, and dropped from.
        async with _relay(tmp_path, Settings(pub_hwm=4)) as relay:
            stuck = relay.subscriber(rcvhwm=1)  # subscribed, and never read from
            await relay.subscribed()
            reader = asyncio.create_task(follow(relay))
            for start in range(0, count, 100):
                await relay.worker.send(encode(EventBatch(events=[
                    [CHUNK, 1.0, {"i": i, "pad": "x" * 512}] for i in range(start, start + 100)])))
            async with asyncio.timeout(60):
                got = await reader
            status = await relay.client.request(StatusRequest(id=0), DaemonStatus)
            stuck.close(0)
            return got, status.pid

    got, pid = asyncio.run(main())
    assert got == list(range(count)) and pid  # every event, in order, gaps filled; the daemon still answers

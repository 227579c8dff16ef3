"""workers.sock: which connection speaks for which run, and the frames that go between them.

A connection speaks for no run until its hello proves the run's secret (`RunSupervisor.bind`); from then on
its frames go to that run alone. Everything else is refused: logged and answered once per peer, then dropped
without a word, so an impostor costs the daemon a dictionary lookup per frame and the real run nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import zmq.asyncio

from yagent.ipc.errors import MalformedMessage, MessageTooLarge
from yagent.ipc.messages import ErrorReply, WorkerHello
from yagent.ipc.records import Message, decode, decode_keeping, encode
from yagent.ipc.vocabulary import ErrorCode

from .refused_peers import RefusedPeers
from .run_supervisor import RunSupervisor
from .run_table import RunTable

__all__ = ["WorkerGate"]

log = logging.getLogger(__name__)


class WorkerGate:
    def __init__(self, socket: zmq.asyncio.Socket, runs: RunTable, refused: RefusedPeers) -> None:
        self._socket = socket
        self._runs = runs
        self.refused = refused  # peers that proved no run's secret

    async def serve(self) -> None:
        while True:
            frames = await self._socket.recv_multipart()
            try:
                self.handle(frames)
            except Exception:  # a worker's message must not stop the loop every other worker needs
                log.exception("handling a frame on workers.sock failed")
            await asyncio.sleep(0)  # as on control.sock: a worker streaming events must not starve the loop

    def handle(self, frames: list[bytes]) -> None:
        if len(frames) != 2:
            return
        identity, payload = frames
        run = self._runs.by_peer(identity)
        if run is None and self._runs.retired(identity):  # what an ended run's worker still had in flight
            return
        try:
            # Event batches keep their bytes: a bound run's well-formed batch is relayed to clients as it came.
            msg, events = decode_keeping(payload, "events") if run is not None else (decode(payload), None)
        except (MalformedMessage, MessageTooLarge) as exc:
            log.debug("dropping a bad frame from %s on workers.sock: %s", run.id if run else "a stranger", exc)
            request_id = getattr(exc, "request_id", None)
            if run is not None and request_id is not None:  # the run waits for this reply: it must not hang
                run.send(ErrorReply(id=request_id, code=ErrorCode.MALFORMED,
                                    message=f"yagentd could not read the {exc.kind or 'request'}: {exc}"))
            elif run is None:
                self.refused.first(identity, "a frame yagentd cannot read, from a connection bound to no run")
            return
        if run is None:
            run = self._admit(identity, msg)
            if run is None:
                return
        run.receive(msg, events)

    def _admit(self, identity: bytes, msg: Message) -> RunSupervisor | None:
        """The run whose secret the hello on this new connection proves, now bound to it; None if refused.

        A refused peer is logged and answered once; its further frames are dropped without a word."""
        if not isinstance(msg, WorkerHello):
            self._refuse(identity, msg, f"a {msg.kind} from a connection that has not proved a run's secret",
                         "say hello with the proof of your run's secret first")
            return None
        run = self._runs.get(msg.run)
        if run is None:
            self._refuse(identity, msg, f"a hello for {msg.run!r}, which is no live run",
                         f"no live run {msg.run!r}; exiting is the right thing", ErrorCode.UNKNOWN_RUN)
            return None
        why = run.bind(identity, msg.proof)
        if why is not None:
            self._refuse(identity, msg, f"a hello for run {run.id} {why}",
                         f"this connection cannot speak for run {run.id}: its hello does not prove the "
                         "run's secret, or the run already has its worker")
            return None
        self._runs.bind(identity, run)
        return run

    def _refuse(self, identity: bytes, msg: Message, why: str, tell: str,
                code: ErrorCode = ErrorCode.UNAUTHENTICATED) -> None:
        if self.refused.first(identity, why):
            request_id = getattr(msg, "id", None)
            self.send(identity, ErrorReply(id=request_id if isinstance(request_id, int) else 0, code=code,
                                           message=tell))

    def send(self, peer: bytes, msg: Message) -> None:
        sent = self._socket.send_multipart([peer, encode(msg)])

        def check(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.warning("cannot send %s to a worker: %s", msg.kind, fut.exception())

        sent.add_done_callback(check)


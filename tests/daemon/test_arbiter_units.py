"""The arbiter in-process, on real sockets in a real runtime directory, with the launcher seam: a socket loop
that dies takes the daemon down (exit 1) instead of leaving it serving half-deaf."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from pathlib import Path

import zmq
import zmq.asyncio

from tests.daemon.seams import ScriptedLauncher
from yagent.daemon.arbiter import Daemon
from yagent.daemon.sd_notify import SystemdNotifier
from yagent.ipc.config import Settings
from yagent.ipc.messages import Heartbeat
from yagent.ipc.records import encode
from yagent.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir


async def _notification(sock: socket.socket, needle: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        while needle not in (await loop.sock_recv(sock, 4096)).decode():
            pass


def test_a_socket_loop_that_dies_ends_the_daemon_with_exit_1(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(short / "notify.sock"))
    notify.setblocking(False)
    try:
        paths = ensure_runtime_dir(short / "run")
        notifier = SystemdNotifier({"NOTIFY_SOCKET": str(short / "notify.sock"), "WATCHDOG_USEC": "200000"})
        home = tmp_path / "home"
        home.mkdir()

        async def main() -> Daemon:
            daemon = Daemon(Settings(), paths, home, ScriptedLauncher(), notifier=notifier)
            serving = asyncio.create_task(daemon.serve())
            await _notification(notify, "READY=1")
            await _notification(notify, "WATCHDOG=1")  # alive, and telling systemd so

            async def broken() -> list[bytes]:
                raise zmq.ZMQError(zmq.EFAULT, "the socket broke")

            daemon._workers.recv_multipart = broken  # the next receive fails, as a dying socket would
            ctx = zmq.asyncio.Context()
            peer = ctx.socket(zmq.DEALER)
            peer.connect(RuntimePaths.endpoint(paths.workers))
            await peer.send(encode(Heartbeat()))  # wakes the loop, which then receives again
            try:
                await asyncio.wait_for(serving, 10.0)
            finally:
                peer.close(0)
                ctx.term()
            await _notification(notify, "STOPPING=1")
            return daemon

        daemon = asyncio.run(main())
        assert daemon.exit_code == 1 and daemon.shutting_down
    finally:
        notify.close()
        shutil.rmtree(short, ignore_errors=True)

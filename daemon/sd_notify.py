"""systemd's notify protocol: READY=1, STATUS=…, WATCHDOG=1 over the $NOTIFY_SOCKET datagram socket.

Written here rather than pulled from a library: it is one datagram, and the semantics we need
(abstract socket names, WATCHDOG_PID scoping) fit in a screen.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["SystemdNotifier"]


class SystemdNotifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET", "")
        if addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace
        self._addr = addr or None
        self._watchdog_interval: float | None = None
        usec = env.get("WATCHDOG_USEC")
        wd_pid = env.get("WATCHDOG_PID")
        if usec and usec.isdigit() and (not wd_pid or wd_pid == str(os.getpid())):
            # Ping at half the deadline, as sd_watchdog_enabled(3) recommends.
            self._watchdog_interval = int(usec) / 1_000_000 / 2

    @property
    def enabled(self) -> bool:
        return self._addr is not None

    @property
    def watchdog_interval(self) -> float | None:
        return self._watchdog_interval if self.enabled else None

    def notify(self, **fields: str | int) -> bool:
        """Send `KEY=value` lines; returns False when not under systemd or the send failed."""
        if self._addr is None:
            return False
        payload = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        # Non-blocking: a listener that stops reading must never stall the daemon's event loop.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        try:
            sock.connect(self._addr)
            sock.send(payload)
            return True
        except OSError:  # BlockingIOError included: the notification is dropped, not waited for
            return False
        finally:
            sock.close()

    def ready(self, status: str = "") -> bool:
        return self.notify(ready=1, status=status) if status else self.notify(ready=1)

    def status(self, text: str) -> bool:
        return self.notify(status=text)

    def watchdog(self) -> bool:
        return self.notify(watchdog=1)

    def stopping(self) -> bool:
        return self.notify(stopping=1)

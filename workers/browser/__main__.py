"""`python -m yagent.workers.browser --chrome PATH --root PROJECT --profile DIR …`: a project's browser host, as the
daemon starts it (`daemon/browser_process.py`), in a session and process group of its own.

It makes its files private (umask 077), asks the kernel to send it SIGTERM when the daemon that started it dies
(so Chromium goes with it: its DevTools pipe closes and it exits), then talks to the daemon over stdin and stdout
(`serve.py`). Chromium's own sandbox stays on unless this process runs as root, where it cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1
MAX_DOWNLOAD_BYTES = 200 * 1024 * 1024  # as host.MAX_DOWNLOAD_BYTES; not imported: that brings Playwright in


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m yagent.workers.browser",
                                     description="yagent's browser host: one project's Chromium, over stdio")
    parser.add_argument("--chrome", default="", help="the Chromium to run")
    parser.add_argument("--root", required=True, help="the project root (file:// pages only inside it)")
    parser.add_argument("--profile", required=True, help="the browser profile directory")
    parser.add_argument("--mode", default="headless", choices=("headless", "headful", "attach"))
    parser.add_argument("--cdp-url", default="")
    parser.add_argument("--dialog-policy", default="accept", choices=("accept", "dismiss"))
    parser.add_argument("--allow", action="append", default=[], help="a host allowed (repeat)")
    parser.add_argument("--deny", action="append", default=[], help="a host denied (repeat)")
    parser.add_argument("--max-output", type=int, default=24_000)
    parser.add_argument("--max-download-bytes", type=int, default=MAX_DOWNLOAD_BYTES)
    parser.add_argument("--parent", type=int, default=0, help="the daemon's pid: the host ends when it is gone")
    return parser.parse_args(argv)


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if parent and os.getppid() != parent:  # it died before the request was in place
        sys.exit(0)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.umask(0o077)
    _die_with_parent(args.parent)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="browser host: %(message)s")
    from .host import HostOptions
    from .serve import serve

    options = HostOptions(
        chrome=args.chrome, project_root=Path(args.root), profile_dir=Path(args.profile), mode=args.mode,
        cdp_url=args.cdp_url, dialog_policy=args.dialog_policy, allowed=args.allow, denied=args.deny,
        max_output=args.max_output, sandbox=os.geteuid() != 0, max_download_bytes=args.max_download_bytes)

    async def run() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, task.cancel)  # the browser is closed on the way out
        try:
            return await serve(options)
        except asyncio.CancelledError:
            return 0

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())

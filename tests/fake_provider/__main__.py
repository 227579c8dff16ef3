"""Standalone mode: `python -m tests.fake_provider [--port N] [--scripts FILE.json]`.

Prints `FAKE_PROVIDER_URL=http://127.0.0.1:PORT` on stdout once listening, then serves until stdin
closes or SIGINT/SIGTERM. Scripts can also be posted to `/_fake/scripts` (see README.md).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from ._script import Script
from ._server import FakeProvider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_provider", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scripts", type=Path, help="a JSON list of scripts (Script.to_dict() shapes)")
    args = parser.parse_args(argv)
    fake = FakeProvider(args.host, args.port).start()
    if args.scripts:
        for data in json.loads(args.scripts.read_text(encoding="utf-8")):
            script = Script.from_dict(data)
            fake.script(script.identity, script.marker, script.steps, user_contains=script.user_contains,
                        regex=script.regex)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print(f"FAKE_PROVIDER_URL={fake.base_url}", flush=True)
    done.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

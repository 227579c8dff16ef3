"""The fake provider in a process of its own (`python -m tests.fake_provider`), for the benches: a provider
sharing the bench's interpreter would take its CPU from the processes being measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ._script import Script

__all__ = ["start_provider_process"]

_REPO = Path(__file__).resolve().parents[2]


def start_provider_process(scripts: list[Script], directory: Path) -> tuple[subprocess.Popen[str], str]:
    """Start it with `scripts` (written to `directory`); (the process, its base URL). Closing its stdin
    (`proc.communicate("")`) stops it."""
    path = directory / "scripts.json"
    path.write_text(json.dumps([s.to_dict() for s in scripts]))
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_provider", "--scripts", str(path)], cwd=str(_REPO),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("FAKE_PROVIDER_URL="):
        proc.kill()
        raise RuntimeError(f"the fake provider did not start (it said {line!r}; its errors are above)")
    return proc, line.split("=", 1)[1]

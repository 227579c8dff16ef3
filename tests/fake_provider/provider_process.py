"""The fake provider in a process of its own (`python -m tests.fake_provider`), for the benches: a provider
sharing the bench's interpreter would take its CPU from the processes being measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ._script import Script

__all__ = ["start_provider_process"]

_REPO = Path(__file__).resolve().parents[2]


def start_provider_process(scripts: Sequence[Script] = (), directory: Path | None = None
                           ) -> tuple[subprocess.Popen[str], str]:
    """Start it, with `scripts` (written to `directory`) if any; (the process, its base URL). Closing its stdin
    (`proc.communicate("")`) stops it."""
    argv = [sys.executable, "-m", "tests.fake_provider"]
    if scripts:
        if directory is None:
            raise ValueError("scripts need a directory to be written to")
        path = directory / "scripts.json"
        path.write_text(json.dumps([s.to_dict() for s in scripts]))
        argv += ["--scripts", str(path)]
    proc = subprocess.Popen(argv, cwd=str(_REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                filter(None, [str(_REPO), os.environ.get("PYTHONPATH", "")]))})
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("FAKE_PROVIDER_URL="):
        proc.kill()
        raise RuntimeError(f"the fake provider did not start (it said {line!r}; its errors are above)")
    return proc, line.split("=", 1)[1]

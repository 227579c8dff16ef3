"""A test-only module whose import waits until the file `$YAGENT_TEST_IMPORT_GATE` exists.

Listed in `[daemon] agent_modules`, it holds the forkserver in its preload — the state of a forkserver still
importing the worker code on an overloaded machine — for as long as the test keeps the gate shut.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_GATE = os.environ.get("YAGENT_TEST_IMPORT_GATE", "")
_DEADLINE = time.monotonic() + 120  # a test that never opens the gate must not leave a forkserver behind
while _GATE and not Path(_GATE).exists() and time.monotonic() < _DEADLINE:
    time.sleep(0.02)  # nothing to wait on across processes but the file itself

"""A new worker holds no daemon code: its process object comes through the forkserver as the stdlib's class, so
unpickling it imports nothing of `yagent.daemon` (that import cost every cold start ~10 ms)."""

from __future__ import annotations

import json
import subprocess
import sys

LAUNCH = """
import json, multiprocessing
from yagent.daemon.launcher import MultiprocessingLauncher, _WorkerProcess
from yagent.ipc.process_entry import call_entry

launcher = MultiprocessingLauncher("forkserver")
launcher.start()
reader, writer = multiprocessing.Pipe(duplex=False)
report = ("import sys, multiprocessing; "
          "w.send((type(multiprocessing.current_process()).__name__, "
          "sorted(m for m in sys.modules if m.startswith('yagent.daemon'))))")
process = _WorkerProcess(target=call_entry, args=("builtins:exec", report, {"w": writer}), daemon=True)
process.start()
writer.close()
print(json.dumps(reader.recv()))
process.join(30)
launcher.stop()
"""


def test_a_new_worker_imports_no_daemon_module() -> None:
    done = subprocess.run([sys.executable, "-c", LAUNCH], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kind, daemon_modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert kind == "ForkServerProcess" and daemon_modules == [], daemon_modules

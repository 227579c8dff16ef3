"""The short process the daemon starts for one checkpoint job, outside every agent's confinement and inside its own.

Started from the forkserver like a worker (`call_entry`), it finds the project's repository first (`git rev-parse`,
which runs nothing of the project's), then confines itself with Landlock before git reads a file of the project:
it reads what every run reads (never the state home, the runtime directory or `deny_read`) and writes only the
project, the repository's git directories and its scratch directory (`sandbox.policy.checkpoint_rules`). Git runs
with the user's umask (objects and refs as the user's own git would write them), without hooks or filters
(`git_runner.py`). Its one reply (`CheckpointJobResult`, msgpack) goes back through the pipe the daemon gave it;
without Landlock it runs unconfined, as the daemon knows from the probe it made at start.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import CheckpointJob, CheckpointJobResult
from yagent.ipc.private_files import user_umask
from yagent.ipc.records import encode

from .. import entry
from ..sandbox._landlock import LandlockError, restrict_self
from ..sandbox.policy import checkpoint_rules
from .jobs import run_job
from .repository import Unsupported, find_repository

__all__ = ["checkpoint_main", "confined_job"]


def checkpoint_main(key: str, reply: Connection, confinement: ConfinementSpec, job: CheckpointJob) -> None:
    """Confine, carry out `job`, send the result on `reply`, exit."""
    entry._leave_the_forkserver()
    entry._keep_state_private()
    entry._become_run_process(f"checkpoint-{key}", "checkpoint")
    try:
        result = confined_job(confinement, job)
    except Exception as exc:  # the daemon must hear why, never a silent EOF
        result = CheckpointJobResult(ok=False, problem=f"the checkpoint process failed: {type(exc).__name__}: {exc}")
    try:
        reply.send_bytes(encode(result))
    finally:
        reply.close()
    os._exit(0)


def confined_job(confinement: ConfinementSpec, job: CheckpointJob) -> CheckpointJobResult:
    found = find_repository(Path(job.project_root), expected_common_dir=job.expected_common_dir)
    if isinstance(found, Unsupported):
        return CheckpointJobResult(ok=False, unsupported=found.reason)
    if confinement.unconfined is None:
        writable = [job.project_root, str(found.git_dir), str(found.common_dir)]
        try:
            restrict_self(confinement.abi, checkpoint_rules(confinement, writable))
        except (LandlockError, OSError) as exc:
            return CheckpointJobResult(ok=False, problem=f"the checkpoint process could not confine itself ({exc}); "
                                                         "nothing was done")
    os.umask(user_umask())  # the repository's objects and the restored files get the user's usual modes
    return run_job(job, repo=found)

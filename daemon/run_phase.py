"""The phases of one run and the only moves between them.

    QUEUED ──slot──▶ LAUNCHING ──pid──▶ STARTING ──hello──▶ RUNNING
      │                 │                   │                   │
      │                 │                   └──────stop─────────┴──▶ STOPPING
      ▼                 ▼                   ▼                   ▼        │
    ENDED ◀─────────────┴─(start failed)────┴─(result or exit)──┴────────┘
      │
      ▼ (process gone, or there never was one)
    GONE

LAUNCHING is the forkserver's round trip, which happens off the event loop: a stop asked for meanwhile is
carried out once the pid is known. ENDED means the outcome is recorded and handed on; the process may still
be exiting. A move that `MOVES` does not list is a bug in the daemon and raises `IllegalTransition`.
"""

from __future__ import annotations

import enum

__all__ = ["MOVES", "IllegalTransition", "RunPhase"]


class RunPhase(enum.Enum):
    QUEUED = "queued"  # waiting for a delegation-pool slot or the live-worker cap; no process
    LAUNCHING = "launching"  # its process is being started, off the loop; no pid yet
    STARTING = "starting"  # launched, no hello yet
    RUNNING = "running"
    STOPPING = "stopping"  # asked to stop (cancel, timeout, shutdown); the outcome is not in yet
    ENDED = "ended"  # outcome recorded and handed on; the process may still be exiting
    GONE = "gone"  # ended, and no process is left


MOVES: dict[RunPhase, frozenset[RunPhase]] = {
    RunPhase.QUEUED: frozenset({RunPhase.LAUNCHING, RunPhase.ENDED}),
    RunPhase.LAUNCHING: frozenset({RunPhase.STARTING, RunPhase.ENDED}),
    # Back to LAUNCHING: a warm worker lost before its hello is replaced by a cold one (`RunSupervisor`).
    RunPhase.STARTING: frozenset({RunPhase.LAUNCHING, RunPhase.RUNNING, RunPhase.STOPPING, RunPhase.ENDED}),
    RunPhase.RUNNING: frozenset({RunPhase.STOPPING, RunPhase.ENDED}),
    RunPhase.STOPPING: frozenset({RunPhase.ENDED}),
    RunPhase.ENDED: frozenset({RunPhase.GONE}),
    RunPhase.GONE: frozenset(),
}

class IllegalTransition(RuntimeError):
    """A run was moved along an edge `MOVES` does not have: a bug in the daemon."""

"""How a run ended, as its parent and the user are told: what the worker reported, unless the daemon
stopped the run itself (a timeout, a cancel, a shutdown) or its process died first."""

from __future__ import annotations

import dataclasses
import signal

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import RunStatus, StopReason

__all__ = ["decide_outcome", "exit_note"]

# The forced stops that are not failures of the run itself.
_FORCED_STATUS = {StopReason.CANCELLED: RunStatus.CANCELLED, StopReason.INTERRUPTED: RunStatus.INTERRUPTED}


def decide_outcome(run_id: str, agent: str, reported: RunOutcome | None, stop_reason: StopReason | None,
                   stop_detail: str, note: str = "") -> RunOutcome:
    """The run's outcome. A stop the daemon made names its reason and keeps what the worker reported (its
    partial output, its hand-off); a worker gone without a result is a crash, saying how it went (`note`)."""
    if stop_reason is not None:
        status = _FORCED_STATUS.get(stop_reason, RunStatus.FAILED)
        error = stop_detail
        if note and reported is None:
            error = f"{error} ({note})" if error else note
        base = reported or RunOutcome(status=status, stop_reason=stop_reason)
        return dataclasses.replace(base, run=run_id, agent=agent, status=status, stop_reason=stop_reason,
                                   error=error)
    if reported is None:
        return RunOutcome(run=run_id, agent=agent, status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                          error=f"{note or 'worker exited'} before reporting a result")
    status = reported.status if reported.status.finished else RunStatus.FAILED
    return dataclasses.replace(reported, run=run_id, agent=agent, status=status)


def exit_note(code: int | None) -> str:
    """How a worker process ended, in words (a negative code is the signal that killed it)."""
    if code is None or code >= 0:
        return f"worker process exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"worker process was killed by signal {-code} ({name})"

"""The baseline of `bench/daemon_death.py`: workers as they were before they watched their daemon.

Preloaded into the forkserver through `[daemon] agent_modules`, it undoes the two steps every worker now
takes first: letting go of the forkserver's liveness pipe and watching its own pipe to yagentd. Such
workers only notice a dead daemon when its pings have been missing for `daemon_loss_timeout`.
"""

from __future__ import annotations

from yagent.workers import entry

entry._leave_the_forkserver = lambda: None
entry.daemon_liveness_fd = lambda: None

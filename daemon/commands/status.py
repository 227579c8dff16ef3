"""`status` and `shutdown`: the daemon itself."""

from __future__ import annotations

import asyncio
import os

from yagent.ipc.config import ConfigError
from yagent.ipc.messages import Ack, DaemonStatus, Shutdown, StatusRequest

from ..run_confinement import confinement_status
from . import DaemonView, command


@command(StatusRequest)
async def status(daemon: DaemonView, msg: StatusRequest) -> DaemonStatus:
    try:
        daemon.refresh_settings()  # the warnings are those of the file as it is now
        config_warnings = [*daemon.settings.warnings, *daemon.settings.run_settings.llm.warnings]
    except ConfigError as exc:
        config_warnings = [f"the file cannot be used as it is now, so the last good one still applies: {exc.what}"]
    return DaemonStatus(
        id=msg.id, pid=os.getpid(), version=daemon.version, started_at=daemon.started_at,
        runtime_dir=str(daemon.paths.root), home=str(daemon.home), live_workers=len(daemon.slots.live),
        max_workers=daemon.slots.limit, tasks_running=sum(1 for t in daemon.tasks.values() if t.in_flight),
        leases=daemon.leases.stats(), runs_started=daemon.runs_started, warm_workers=daemon.launcher.warm_ready(),
        shutting_down=daemon.shutting_down,
        spent_today=daemon.spend.spent, daily_limit=daemon.spend.limit(daemon.settings.max_cost_per_day),
        confinement=confinement_status(daemon.settings, daemon.landlock_abi),
        confined=daemon.settings.sandbox.enabled and daemon.landlock_abi > 0,
        config=str(daemon.config_path),
        config_warnings=config_warnings, browser=daemon.browser.status_lines())


@command(Shutdown)
async def shutdown(daemon: DaemonView, msg: Shutdown) -> Ack:
    # Reply first: the shutdown tears the control socket down.
    asyncio.get_running_loop().call_soon(daemon.request_shutdown)
    return Ack(id=msg.id, detail="shutting down")

"""`yagent top`: the live runs of every project and what they use, refreshed like `top`.

One `list_tasks` request a second (the daemon samples the runs' process trees only when asked); `q` or
Ctrl+C quits. Without a terminal it prints one snapshot and exits.
"""

from __future__ import annotations

import asyncio
import sys
import time

from prompt_toolkit.application import Application
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl

from yagent.ipc import DaemonClient, IpcError
from yagent.ipc.messages import DaemonStatus, ListTasks, StatusRequest, TaskList, TaskSummary
from yagent.ipc.vocabulary import RunStatus

from . import exit_codes
from .humanize import age
from .usage_text import money, run_figures, task_cost

__all__ = ["render", "top"]

REFRESH = 1.0
_LIVE = (RunStatus.QUEUED, RunStatus.STARTING, RunStatus.RUNNING)


def render(status: DaemonStatus, tasks: list[TaskSummary], now: float) -> list[str]:
    """The screen: the daemon's line, then every task with live runs and each run's figures."""
    leases = status.leases
    limit = leases.get("limit") or "unlimited"
    spent = f"spent today {money(status.spent_today, True)}"
    if status.daily_limit > 0:
        spent += f" of ${status.daily_limit:.2f}"
    lines = [f"yagentd pid {status.pid} · {status.tasks_running} tasks running · {status.live_workers} workers · "
             f"model requests {leases.get('in_use', 0)}/{limit} in flight, {leases.get('waiting', 0)} waiting · "
             f"{spent}", ""]
    live = [t for t in tasks if any(r.status in _LIVE for r in t.runs)]
    if not live:
        lines.append("no task is running — `yagent ps` lists them all")
        return lines
    for t in live:
        cost = task_cost(t)
        lines.append(f"{t.task}  {t.state:<8} {age(now - t.created_at):>5}  {t.title[:60]}"
                     + (f"  · {cost}" if cost else ""))
        for r in t.runs:
            if r.status not in _LIVE:
                continue
            figures = run_figures(r)
            waiting = f"  waiting for {r.waiting}" if r.waiting else ""
            lines.append(f"  {r.agent:<10} {r.run}  {r.status:<8} {figures}{waiting}")
    return lines


async def _snapshot(client: DaemonClient) -> list[str]:
    status = await client.request(StatusRequest(id=0), DaemonStatus)
    listing = await client.request(ListTasks(id=0, limit=200), TaskList)
    return render(status, listing.tasks, time.time())


async def _run(interactive: bool) -> int:
    async with DaemonClient() as client:
        if not interactive:
            print("\n".join(await _snapshot(client)))
            return exit_codes.OK
        text: list[str] = ["loading…"]
        problem: list[str] = []
        keys = KeyBindings()

        @keys.add("q")
        @keys.add("c-c")
        def _quit(event) -> None:
            event.app.exit()

        app: Application[None] = Application(
            layout=Layout(Window(FormattedTextControl(lambda: "\n".join(text)), wrap_lines=False)),
            key_bindings=keys, full_screen=True)

        async def refresh() -> None:
            while True:
                try:
                    text[:] = [*await _snapshot(client), "", "q quits"]
                except IpcError as exc:
                    problem.append(str(exc))
                    app.exit()
                    return
                app.invalidate()
                await asyncio.sleep(REFRESH)

        async with asyncio.TaskGroup() as group:
            poller = group.create_task(refresh(), name="top-refresh")
            await app.run_async()
            poller.cancel()
        if problem:
            print(f"yagent: {problem[0]}", file=sys.stderr)
            return exit_codes.NOT_RUNNING
        return exit_codes.OK


def top() -> int:
    try:
        return asyncio.run(_run(sys.stdout.isatty() and sys.stdin.isatty()))
    except IpcError as exc:
        print(f"yagent: {exc}", file=sys.stderr)
        return exit_codes.NOT_RUNNING
    except KeyboardInterrupt:
        return exit_codes.OK

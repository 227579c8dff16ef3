"""`yagent top` and the usage figures clients print: what is known is shown, an unknown price is said so."""

from __future__ import annotations

from pathlib import Path

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import script, wait_until
from yagent.client.top import render
from yagent.client.usage_text import money, run_figures, task_cost
from yagent.ipc.messages import DaemonStatus, RunSummary, TaskSummary
from yagent.ipc.vocabulary import RunStatus, TaskState


def _run(**figures: object) -> RunSummary:
    return RunSummary(run="r1", agent="coding", status=RunStatus.RUNNING, **figures)


def test_money_never_makes_up_a_zero() -> None:
    assert money(0.0, True) == "$0.00"
    assert money(0.0, False) == "price unknown"
    assert money(1.234, False) == "$1.23+ (some prices unknown)"
    assert money(0.0012, True) == "$0.0012"


def test_run_figures_show_what_is_known() -> None:
    live = _run(cpu_percent=12.4, rss_bytes=90 << 20, uss_bytes=80 << 20, requests=7, input_tokens=12_345,
                output_tokens=1_200, cost_usd=0.042, slot_wait_seconds=65)
    assert run_figures(live) == ("cpu 12% · 80.0 MiB · 12.3k→1.2k tokens · 7 requests · $0.04 · "
                                 "waited 1m for a model slot")
    assert run_figures(_run()) == ""  # a run that has done nothing yet shows nothing, not zeros


def test_top_lists_only_live_runs_with_the_daemons_line() -> None:
    status = DaemonStatus(id=1, pid=42, version="v", started_at=0, runtime_dir="/r", home="/h", live_workers=2,
                          max_workers=32, tasks_running=1, leases={"limit": 4, "in_use": 1, "waiting": 0},
                          spent_today=1.5, daily_limit=10.0)
    live = TaskSummary(task="t1", project="/p", title="fix it", state=TaskState.RUNNING, created_at=0,
                       updated_at=0, runs=[_run(cpu_percent=5.0, rss_bytes=1 << 20, requests=1, cost_usd=0.5),
                                           RunSummary(run="r0", agent="repo", status=RunStatus.DONE)],
                       requests=1, input_tokens=2000, output_tokens=100, cost_usd=0.5, cost_limit=2.0)
    done = TaskSummary(task="t2", project="/p", title="old", state=TaskState.DONE, created_at=0, updated_at=0,
                       runs=[RunSummary(run="r9", agent="director", status=RunStatus.DONE)])
    lines = render(status, [live, done], now=100.0)
    assert "spent today $1.50 of $10.00" in lines[0] and "model requests 1/4 in flight" in lines[0]
    text = "\n".join(lines)
    assert "t1" in text and "2.0k→100 tokens · 1 request · $0.50 of $2.00" in text and "r1" in text
    assert "r0" not in text and "t2" not in text
    assert task_cost(done) == ""


def test_top_without_a_terminal_prints_one_snapshot_of_a_running_task(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    sent = daemon.cli("run", "--detach", "--agent", "scripted", script({"busy": 60}), cwd=project)
    assert sent.returncode == 0, sent.stderr
    task = sent.stdout.split("task ")[1].split()[0]
    shown = wait_until(lambda: (r := daemon.cli("top")).returncode == 0 and "cpu " in r.stdout and r.stdout, 30,
                       "top to show the live run's figures")
    assert task in shown and "scripted" in shown and "yagentd pid" in shown
    assert daemon.cli("cancel", task).returncode == 0

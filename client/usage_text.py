"""What a run or task has used, in words for a terminal: CPU, memory, tokens, requests, slot wait, money.

An unknown price is said as such ("price unknown"), and a total that leaves some calls out carries a "+":
never a made-up $0.00.
"""

from __future__ import annotations

from yagent.ipc.messages import RunSummary, TaskSummary

from .humanize import age, format_tokens

__all__ = ["bytes_text", "money", "run_figures", "task_cost"]


def money(cost: float, known: bool) -> str:
    if not known and cost == 0:
        return "price unknown"
    text = f"${cost:.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"
    return text if known else f"{text}+ (some prices unknown)"


def bytes_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def run_figures(run: RunSummary) -> str:
    """'cpu 12% · 85.2 MiB · 12.3k→1.2k tokens · 7 requests · $0.04': what is known, nothing made up."""
    parts: list[str] = []
    if run.cpu_percent is not None:
        parts.append(f"cpu {run.cpu_percent:.0f}%")
        parts.append(bytes_text(run.uss_bytes or run.rss_bytes))
    if run.requests:
        parts.append(f"{format_tokens(run.input_tokens)}→{format_tokens(run.output_tokens)} tokens")
        parts.append(f"{run.requests} request{'s' if run.requests != 1 else ''}")
        parts.append(money(run.cost_usd, run.cost_known))
    if run.slot_wait_seconds >= 1:
        parts.append(f"waited {age(run.slot_wait_seconds)} for a model slot")
    return " · ".join(parts)


def task_cost(task: TaskSummary) -> str:
    """The task's model use and cost against its limit: '12.3k→1.2k tokens · 7 requests · $0.42 of $5.00'."""
    if not task.requests:
        return ""
    text = money(task.cost_usd, task.cost_known)
    if task.cost_limit > 0:
        text += f" of ${task.cost_limit:.2f}"
    return (f"{format_tokens(task.input_tokens)}→{format_tokens(task.output_tokens)} tokens · "
            f"{task.requests} request{'s' if task.requests != 1 else ''} · {text}")

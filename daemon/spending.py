"""Spending limits: `[llm] max_cost_per_task` and `max_cost_per_day`, in US dollars (0 or absent: none).

Reaching a limit never overruns it silently and never kills work: the task is paused, its runs get no
new model slot, and a question asks the user to raise the limit (for this task, or for today) or to stop.
The day's total spans every task and survives restarts (the registry keeps each finished run's cost).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import QuestionKind

__all__ = ["STOP", "BudgetAsk", "DailySpend", "budget_question", "raise_to", "start_of_day"]

STOP = "stop"


def _day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(now))


def start_of_day(now: float) -> float:
    """Local midnight before `now`, as a wall-clock time: where today's spending starts."""
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


class DailySpend:
    """Dollars spent today over all tasks, and today's limit as raised by the user."""

    def __init__(self, spent_before: float = 0.0, now: float | None = None) -> None:
        self._day = _day(time.time() if now is None else now)
        self.spent = spent_before
        self.raised_to: float | None = None  # today's limit after the user raised it

    def add(self, dollars: float, now: float | None = None) -> None:
        day = _day(time.time() if now is None else now)
        if day != self._day:  # a new day starts from nothing, with the configured limit
            self._day, self.spent, self.raised_to = day, 0.0, None
        self.spent += dollars

    def limit(self, configured: float) -> float:
        return self.raised_to if self.raised_to is not None else configured


@dataclass(frozen=True, slots=True)
class BudgetAsk:
    scope: str  # "task" or "day"
    spent: float
    limit: float
    setting: str  # the config key that set the limit


def raise_to(limit: float) -> float:
    """The limit the question offers: double the current one, at least one dollar more."""
    return round(max(limit * 2, limit + 1.0), 2)


def budget_question(task_id: str, ask: BudgetAsk, number: int) -> Question:
    offer = raise_to(ask.limit)
    scope = "this task" if ask.scope == "task" else "today, over all tasks"
    prompt = (f"Spending limit reached: ${ask.spent:.2f} spent {scope}, the limit is ${ask.limit:.2f} "
              f"([llm] {ask.setting}). The task is paused. Raise the limit to ${offer:.2f} and continue, or stop "
              f"the task?")
    return Question(request_id=f"{task_id}.budget{number}", kind=QuestionKind.SELECT, prompt=prompt,
                    options=[f"raise to ${offer:.2f}", STOP], default=STOP, task=task_id, agent="yagentd",
                    details={"scope": ask.scope, "spent": round(ask.spent, 6), "limit": ask.limit,
                             "raise_to": offer, "setting": f"[llm] {ask.setting}"}, asked_at=time.time())

"""What a run has used: model requests, tokens, money, time waiting for a model slot, and the CPU and memory
of its process tree.

Usage and cost come from the run's own `llm_call_end` events (the worker prices each call: the provider's
configured price, else the catalog's list price; unknown stays unknown). CPU and memory are sampled with
psutil only when someone asks (`yagent ps`, `yagent top`), never on a timer: an idle daemon costs nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from yagent.ipc.event_data import LlmCallEnd

__all__ = ["ProcessSample", "RunUsage", "sample_tree"]


@dataclass(slots=True)
class RunUsage:
    requests: int = 0  # model calls, failed ones included
    input_tokens: int = 0  # cached input included
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # of the priced calls only
    unpriced_requests: int = 0  # successful calls whose model has no known price: cost_usd is a lower bound
    slot_wait_seconds: float = 0.0  # waiting for an in-flight request slot ([llm] max_in_flight_requests)

    def add_call(self, call: LlmCallEnd) -> float:
        """Count one finished call; returns the dollars it added."""
        self.requests += 1
        usage = call.usage
        if usage is not None:
            self.input_tokens += max(0, usage.total_input_tokens)
            self.cached_input_tokens += max(0, usage.cached_input_tokens)
            self.output_tokens += max(0, usage.output_tokens)
        if call.error:
            return 0.0
        cost = call.cost_usd
        if cost is None or not 0 <= cost < 1e6:  # nan, negative or absurd: not a price we can trust
            self.unpriced_requests += 1
            return 0.0
        self.cost_usd += cost
        return cost

    @property
    def cost_known(self) -> bool:
        """Whether `cost_usd` covers every call (False: some model's price is unknown)."""
        return self.unpriced_requests == 0


@dataclass(slots=True)
class ProcessSample:
    at: float  # monotonic time of the sample
    age: float  # seconds since the root process started
    cpu_seconds: float  # user + system, the whole tree
    rss_bytes: int
    uss_bytes: int
    processes: int

    def cpu_percent(self, before: ProcessSample | None) -> float:
        """Share of one core since the sample before, or since the process started."""
        if before is not None and self.at > before.at:
            return max(0.0, (self.cpu_seconds - before.cpu_seconds) / (self.at - before.at) * 100)
        return self.cpu_seconds / self.age * 100 if self.age > 0 else 0.0


def _descendants(pid: int) -> list[int]:
    """The process's descendants from /proc/PID/task/TID/children: a few small reads, where psutil's
    `children()` scans every process of the system (milliseconds each, for every run `yagent top` shows)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def _children_file_works() -> bool:
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def sample_tree(pid: int) -> ProcessSample | None:
    """CPU time and memory of a process and its descendants; None when it is gone. Blocks: call it in a thread."""
    try:
        root = psutil.Process(pid)
        age = max(0.0, time.time() - root.create_time())
        if _CHILDREN_FILE:
            procs = [root, *(psutil.Process(child) for child in _descendants(pid))]
        else:  # a kernel without /proc/PID/task/TID/children
            procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    cpu, rss, uss, alive = 0.0, 0, 0, 0
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                cpu += times.user + times.system
                try:
                    info = proc.memory_full_info()
                    rss += info.rss
                    uss += getattr(info, "uss", 0)
                except psutil.AccessDenied:
                    rss += proc.memory_info().rss
            alive += 1
        except psutil.Error:
            continue  # exited while we looked
    return ProcessSample(time.monotonic(), age, cpu, rss, uss, alive) if alive else None


_CHILDREN_FILE = _children_file_works()

"""Stretches of memory pages, as a warm worker reports the pages a run made its own and the daemon hands them on.

A stretch is `(first page number, number of pages)`; a set of them is kept sorted, without overlaps, and at most
`MAX_PREFAULT_PAGES` pages in all (see `yagent.workers.page_warmth`). What a worker sends is checked here before the
daemon keeps it: a forged or damaged report is refused whole, never trimmed into something else.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_PREFAULT_PAGES", "PageRuns", "merged_runs", "page_runs_of"]

# The most pages a report names and a warm worker copies in advance (32 MiB with 4 KiB pages).
MAX_PREFAULT_PAGES = 8192
# Page numbers of a 57-bit address space: a larger one is no address of this machine.
_PAGE_LIMIT = 1 << 45

PageRuns = tuple[tuple[int, int], ...]


def page_runs_of(value: object) -> PageRuns | str:
    """`value` as page stretches, sorted and merged, or why it is not one (a message for the daemon's log)."""
    if not isinstance(value, list | tuple):
        return f"page stretches must be a list, not {type(value).__name__}"
    if len(value) > MAX_PREFAULT_PAGES:
        return f"{len(value)} page stretches is more than the {MAX_PREFAULT_PAGES} a report may hold"
    runs = []
    total = 0
    for item in value:
        if not isinstance(item, list | tuple) or len(item) != 2:
            return "a page stretch must be a pair [first page, count]"
        start, count = item
        if type(start) is not int or type(count) is not int:  # not bool, not float (nan, inf)
            return "a page stretch's first page and count must be integers"
        if not 0 < start < _PAGE_LIMIT or not 0 < count <= MAX_PREFAULT_PAGES or start + count > _PAGE_LIMIT:
            return f"page stretch [{start}, {count}] is outside any address space"
        total += count
        if total > MAX_PREFAULT_PAGES:
            return f"the page stretches name more than {MAX_PREFAULT_PAGES} pages"
        runs.append((start, count))
    return merged_runs(runs)


def merged_runs(*sets: Iterable[tuple[int, int]], limit: int = MAX_PREFAULT_PAGES) -> PageRuns:
    """The union of the stretches of `sets`, sorted, overlapping and touching ones joined; past `limit` pages the
    highest addresses are left out."""
    joined: list[list[int]] = []
    for start, count in sorted(run for runs in sets for run in runs):
        end = start + count
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    kept = []
    left = limit
    for start, end in joined:
        if left <= 0:
            break
        take = min(end - start, left)
        kept.append((start, take))
        left -= take
    return tuple(kept)

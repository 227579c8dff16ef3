"""`browser_open` → `browser_snapshot` on a local test site, through the daemon's browser manager and a project's
browser host, cold (the host and Chromium start with the first call) and warm; against Playwright driving the same
Chromium directly from this process, measured in the same run; and the memory one open project's browser costs.

The manager is the daemon's own (`daemon/browser_manager.py`, a real registry and scheduler), so the route measured is
daemon → host (pipe, msgpack frames) → Playwright's driver → Chromium (DevTools pipe); the worker → daemon hop is
`bench/mcp_call.py`'s. Memory: the RSS of this process (standing in for the daemon) before and after N projects
opened a page, and the proportional set size (PSS) of each project's browser tree (host, driver, Chromium and its
children), which counts shared pages once across processes.
Usage: python bench/browser.py [WARM_ROUNDS] [PROJECTS]
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from playwright.async_api import async_playwright  # noqa: E402

from tests.browser.site import LocalSite  # noqa: E402
from yagent.daemon.browser_manager import BrowserManager  # noqa: E402
from yagent.daemon.registry import Registry  # noqa: E402
from yagent.daemon.schedule import Scheduler  # noqa: E402
from yagent.ipc.browser_settings import BrowserSettings  # noqa: E402
from yagent.workers.browser.host import LAUNCH_FLAGS  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def mib(n: float) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def tree_pss(pid: int) -> int:
    total = 0
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        try:
            total += proc.memory_full_info().pss
        except psutil.Error:
            continue
    return total


async def direct(url: str, rounds: int, chrome: str, profile: Path) -> tuple[float, list[float]]:
    """Playwright in this process: launch + open + snapshot once, then open + snapshot `rounds` times."""
    started = time.perf_counter()
    async with async_playwright() as p:
        args = [*LAUNCH_FLAGS, "--headless"]
        context = await p.chromium.launch_persistent_context(str(profile), executable_path=chrome, headless=True,
                                                             args=args, chromium_sandbox=False)
        page = await context.new_page()
        await page.goto(url, wait_until="domcontentloaded")
        await page.aria_snapshot(mode="ai")
        cold = time.perf_counter() - started
        warm = []
        for _ in range(rounds):
            t = time.perf_counter()
            await page.goto(url, wait_until="domcontentloaded")
            await page.aria_snapshot(mode="ai")
            warm.append(time.perf_counter() - t)
        await context.close()
    return cold, warm


async def routed(url: str, rounds: int, projects: int, home: Path) -> tuple[float, list[float], list[int], int]:
    settings = BrowserSettings(max_chrome=max(projects, 1))
    manager = BrowserManager(Registry(home / "state.db"), Scheduler(), lambda: settings, home)
    serving = asyncio.get_running_loop().create_task(manager.serve())
    while manager._group is None:
        await asyncio.sleep(0.01)
    me = psutil.Process()
    before = me.memory_info().rss

    async def open_and_snapshot(project: str) -> None:
        for tool, args in (("browser_open", {"url": url}), ("browser_snapshot", {})):
            reply = await manager.call(project, str(home), "bench-run", tool, args, downloads="", timeout=60)
            if reply.is_error:
                raise SystemExit(f"{tool} failed: {reply.content}")

    started = time.perf_counter()
    await open_and_snapshot("p0")
    cold = time.perf_counter() - started
    warm = []
    for _ in range(rounds):
        t = time.perf_counter()
        await open_and_snapshot("p0")
        warm.append(time.perf_counter() - t)
    for n in range(1, projects):
        await open_and_snapshot(f"p{n}")
    trees = [tree_pss(b.process.pid) for b in manager._browsers.values() if b.process is not None]
    grown = me.memory_info().rss - before
    await manager.close()
    serving.cancel()
    return cold, warm, trees, grown


async def main(rounds: int, projects: int) -> None:
    chrome = shutil.which("chromium")
    if chrome is None:
        raise SystemExit("bench/browser.py needs chromium (apt-get install chromium)")
    with LocalSite() as site, tempfile.TemporaryDirectory(prefix="yagent-bench-browser-") as tmp:
        url = site.url("/form")
        base_cold, base_warm = await direct(url, rounds, chrome, Path(tmp) / "direct-profile")
        cold, warm, trees, grown = await routed(url, rounds, projects, Path(tmp))
    p50, base_p50 = statistics.median(warm), statistics.median(base_warm)
    print(f"browser_open → browser_snapshot on {url} ({rounds} warm rounds)")
    print(f"  cold   routed {ms(cold):>10}   direct Playwright {ms(base_cold):>10}   ratio {cold / base_cold:.2f}")
    print(f"  warm   routed {ms(p50):>10}   direct Playwright {ms(base_p50):>10}   ratio {p50 / base_p50:.2f} "
          f"(p50; routed adds {ms(p50 - base_p50)})")
    print(f"memory with {projects} open project(s)")
    print(f"  daemon (this process) grew {mib(grown)}")
    for n, pss in enumerate(trees):
        print(f"  project {n}: browser tree (host, driver, Chromium) PSS {mib(pss)}")


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    projects = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    asyncio.run(main(rounds, projects))

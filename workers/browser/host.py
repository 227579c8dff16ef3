"""One project's browser: Chromium started by Playwright over the DevTools pipe (never a debugging port), its
persistent profile, the pages of each run, and the policies every page lives under.

- Every request of every page passes `UrlPolicy` (a route on the whole context): a refused one is aborted and the
  run that owns the page is told with its next result.
- Dialogs are accepted or dismissed by `[browser] dialog_policy`; a page that opens more than `MAX_DIALOGS` during
  one call is closed (an alert loop would otherwise hold the call until its deadline).
- Downloads go to the owning run's scratch directory under their own name, at most `MAX_DOWNLOAD_BYTES` each
  (a larger one is cancelled while it arrives) and `MAX_DOWNLOADS` per call.
- When Chromium goes away (killed, crashed) every call in flight ends with an error saying so and the host exits:
  the daemon starts a new one with the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from playwright.async_api import BrowserContext, Download, Page, Playwright, Request, Route, async_playwright

from .run_pages import RunPages
from .url_policy import UrlPolicy

__all__ = ["LAUNCH_FLAGS", "MAX_DIALOGS", "MAX_DOWNLOAD_BYTES", "BrowserGone", "BrowserHost", "HostOptions"]

log = logging.getLogger(__name__)

# What a daemon-owned headless Chromium needs: no GPU, no QUIC, no first-run UI, nothing fetched behind our back.
LAUNCH_FLAGS = ("--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-breakpad", "--no-default-browser-check")
MAX_DIALOGS = 20  # per page per call: past it the page is closed
MAX_DOWNLOAD_BYTES = 200 * 1024 * 1024
MAX_DOWNLOADS = 20  # per run per call
DOWNLOAD_WATCH = 0.25  # how often the size of downloads in flight is looked at
VIEWPORT = {"width": 1280, "height": 800}
CLOSE_WAIT = 5.0
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")


class BrowserGone(Exception):
    """Chromium went away (killed, crashed, disconnected)."""


@dataclass(slots=True)
class HostOptions:
    chrome: str
    project_root: Path
    profile_dir: Path
    mode: str = "headless"
    cdp_url: str = ""
    dialog_policy: str = "accept"
    allowed: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    max_output: int = 24_000
    sandbox: bool = True  # Chromium's own sandbox (off only where it cannot run: as root)
    max_download_bytes: int = MAX_DOWNLOAD_BYTES


class BrowserHost:
    def __init__(self, options: HostOptions) -> None:
        self.options = options
        self.policy = UrlPolicy(options.project_root, list(options.allowed), list(options.denied))
        self.sessions: dict[str, RunPages] = {}
        self.version = ""
        self.browser_pid = 0
        self.gone = asyncio.Event()
        self.gone_reason = ""
        self._playwright: Playwright | None = None
        self._context: BrowserContext | None = None
        self._owner: dict[Page, RunPages] = {}
        self._dialogs: dict[Page, int] = {}
        self._console: dict[Page, list[str]] = {}
        self._downloads: set[Download] = set()
        self._download_watch: asyncio.Task[None] | None = None
        self._staging = options.profile_dir.parent / "downloads"
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- life ---------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start Chromium (or attach to the configured one); raises with a message the user can act on."""
        self._playwright = await async_playwright().start()
        chromium = self._playwright.chromium
        if self.options.mode == "attach":
            browser = await chromium.connect_over_cdp(self.options.cdp_url, timeout=30_000)
            self._context = browser.contexts[0] if browser.contexts else await browser.new_context()
            self.version = browser.version
            browser.on("disconnected", lambda _b: self._lost("the browser at cdp_url disconnected"))
        else:
            self.options.profile_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._staging.mkdir(parents=True, exist_ok=True, mode=0o700)
            args = list(LAUNCH_FLAGS)
            if self.options.mode == "headless":
                args.append("--headless")
            self._context = await chromium.launch_persistent_context(
                str(self.options.profile_dir), executable_path=self.options.chrome,
                headless=self.options.mode == "headless", args=args, chromium_sandbox=self.options.sandbox,
                accept_downloads=True, downloads_path=str(self._staging), viewport=VIEWPORT, timeout=60_000,
                handle_sigint=False, handle_sigterm=False, handle_sighup=False)
            browser = self._context.browser
            self.version = browser.version if browser is not None else ""
            self.browser_pid = _browser_pid(self.options.chrome)
        self._context.on("close", lambda _c: self._lost("Chromium exited"))
        self._context.on("page", self._on_page)
        await self._context.route("**/*", self._route)
        for page in list(self._context.pages):  # the persistent context's first blank tab: nobody's
            self._watch(page)

    def _lost(self, why: str) -> None:
        if not self.gone.is_set():
            self.gone_reason = why
            self.gone.set()

    async def close(self) -> None:
        if self._download_watch is not None:
            self._download_watch.cancel()
        # Bounded: a Chromium that hangs must not keep the host (the daemon kills both groups after its grace).
        with contextlib.suppress(Exception):
            if self._context is not None and self.options.mode != "attach":
                async with asyncio.timeout(CLOSE_WAIT):
                    await self._context.close()
        with contextlib.suppress(Exception):
            if self._playwright is not None:
                async with asyncio.timeout(CLOSE_WAIT):
                    await self._playwright.stop()

    @property
    def context(self) -> BrowserContext:
        if self._context is None or self.gone.is_set():
            raise BrowserGone(self.gone_reason or "the browser is not running")
        return self._context

    # -- runs and their pages -----------------------------------------------------------------------------------

    def session(self, name: str, downloads: str) -> RunPages:
        pages = self.sessions.get(name)
        if pages is None:
            pages = self.sessions[name] = RunPages(name)
        if downloads:
            pages.downloads = Path(downloads)
        return pages

    async def release(self, name: str) -> None:
        """Run `name` ended: its pages close."""
        pages = self.sessions.pop(name, None)
        if pages is None:
            return
        for page in list(pages.pages):
            self._owner.pop(page, None)
            with contextlib.suppress(Exception):
                await page.close()

    async def new_page(self, pages: RunPages) -> Page:
        page = await self.context.new_page()
        self._adopt(page, pages, make_current=True)
        return page

    async def close_page(self, pages: RunPages, page: Page) -> None:
        pages.forget(page)
        self._owner.pop(page, None)
        await page.close()

    def begin_call(self, pages: RunPages) -> None:
        for page in pages.pages:
            self._dialogs[page] = 0

    def console_errors(self, page: Page) -> list[str]:
        return list(self._console.get(page, []))

    def _adopt(self, page: Page, pages: RunPages, *, make_current: bool) -> None:
        self._owner[page] = pages
        pages.adopt(page, make_current=make_current)
        self._watch(page)

    def _watch(self, page: Page) -> None:
        if page in self._dialogs:
            return
        self._dialogs[page] = 0
        page.on("dialog", lambda dialog: self._spawn(self._on_dialog(page, dialog)))
        page.on("download", lambda download: self._spawn(self._on_download(page, download)))
        page.on("console", lambda message: self._on_console(page, message))
        page.on("close", self._on_close)
        page.on("popup", lambda popup: self._on_popup(page, popup))

    def _on_page(self, page: Page) -> None:
        self._watch(page)

    def _on_popup(self, opener: Page, popup: Page) -> None:
        owner = self._owner.get(opener)
        if owner is not None and popup not in self._owner:
            self._adopt(popup, owner, make_current=False)
            owner.note(f"the page opened a new tab ({len(owner.pages)}): {popup.url[:200]}; browser_tabs switches "
                       "to it")

    def _on_close(self, page: Page) -> None:
        owner = self._owner.pop(page, None)
        if owner is not None:
            owner.forget(page)
        self._dialogs.pop(page, None)
        self._console.pop(page, None)

    def _on_console(self, page: Page, message: Any) -> None:
        if message.type == "error":
            kept = self._console.setdefault(page, [])
            kept.append(message.text[:300])
            del kept[:-10]

    async def _on_dialog(self, page: Page, dialog: Any) -> None:
        owner = self._owner.get(page)
        count = self._dialogs.get(page, 0) + 1
        self._dialogs[page] = count
        text = dialog.message[:200]
        if count > MAX_DIALOGS:
            with contextlib.suppress(Exception):
                await dialog.dismiss()
            if count == MAX_DIALOGS + 1:
                if owner is not None:
                    owner.note(f"the page opened more than {MAX_DIALOGS} dialogs in one call; it was closed")
                with contextlib.suppress(Exception):
                    await page.close(run_before_unload=False)
            return
        accept = self.options.dialog_policy == "accept"
        try:
            await (dialog.accept() if accept else dialog.dismiss())
        except Exception:  # the page went away meanwhile
            return
        if owner is not None:
            owner.note(f"a {dialog.type} dialog said {text!r}; it was {'accepted' if accept else 'dismissed'} "
                       "([browser] dialog_policy)")

    async def _route(self, route: Route, request: Request) -> None:
        refusal = self.policy.refusal(request.url)
        if not refusal:
            with contextlib.suppress(Exception):
                await route.fallback()
            return
        owner = None
        with contextlib.suppress(Exception):
            owner = self._owner.get(request.frame.page)
        if owner is not None:
            what = "the page" if request.is_navigation_request() else "a request"
            owner.note(f"{what} went to {request.url[:200]}, which was blocked: {refusal}")
        with contextlib.suppress(Exception):
            await route.abort("blockedbyclient")

    async def _on_download(self, page: Page, download: Download) -> None:
        owner = self._owner.get(page)
        name = _safe_name(download.suggested_filename)
        if owner is None or owner.downloads is None:
            with contextlib.suppress(Exception):
                await download.cancel()
            return
        self._downloads.add(download)
        part: Path | None = None
        if self._download_watch is None or self._download_watch.done():
            self._download_watch = asyncio.get_running_loop().create_task(self._watch_downloads())
        try:
            failure = await download.failure()
            if failure:
                owner.note(f"the download of {name} did not complete: {failure}")
                return
            part = owner.downloads / f".{name}.{id(download):x}.part"
            await download.save_as(part)
            # Renamed and announced with no await between: whoever sees the file can already read the note.
            target = _free_path(owner.downloads, name)
            os.replace(part, target)
            owner.note(f"downloaded {name} ({target.stat().st_size} bytes) to {target}")
        except Exception as exc:
            owner.note(f"the download of {name} failed: {str(exc).splitlines()[0][:200]}")
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink()
        finally:
            self._downloads.discard(download)
            with contextlib.suppress(Exception):
                await download.delete()

    async def _watch_downloads(self) -> None:
        """Cancel downloads in flight once what has arrived of them passes MAX_DOWNLOAD_BYTES (a download bomb would
        otherwise fill the disk before Playwright tells anyone it finished)."""
        while self._downloads:
            await asyncio.sleep(DOWNLOAD_WATCH)
            arrived = _tree_bytes(self._staging)
            if arrived > self.options.max_download_bytes * max(1, len(self._downloads)):
                for download in list(self._downloads):
                    owner = self._owner.get(download.page)
                    if owner is not None:
                        owner.note(f"the download of {_safe_name(download.suggested_filename)} passed "
                                   f"{self.options.max_download_bytes} bytes and was cancelled")
                    with contextlib.suppress(Exception):
                        await download.cancel()

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _browser_pid(chrome: str) -> int:
    """The pid of the Chromium Playwright's driver started for us (a child of the driver, a child of this process)."""
    me = psutil.Process()
    best: tuple[float, int] | None = None
    with contextlib.suppress(psutil.Error):
        for proc in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                parent = proc.parent()
                if (parent is not None and parent.pid != me.pid and "chrom" in proc.name().lower()
                        and parent.name().lower().startswith(("node", "playwright"))):
                    created = proc.create_time()
                    if best is None or created < best[0]:
                        best = (created, proc.pid)
    return best[1] if best else 0


def _safe_name(suggested: str) -> str:
    name = _SAFE_NAME.sub("_", os.path.basename(suggested or "")).strip(" .")[:120]
    return name or f"download-{int(time.time())}"


def _free_path(directory: Path, name: str) -> Path:
    target = directory / name
    stem, suffix = os.path.splitext(name)
    n = 1
    while target.exists():
        n += 1
        target = directory / f"{stem}-{n}{suffix}"
    return target


def _tree_bytes(root: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total

"""What each browser tool does, on the pages of the run that calls it (`RunPages`), within the call's time.

Every answer is text the model reads, bounded by `[browser] max_output_bytes`, followed by what happened meanwhile
(dialogs, blocked requests, downloads, new tabs). An element is named by its reference from the last snapshot
(`aria-ref=eN`, Playwright's own, stable while the element lives); a reference no element has any more is said at
once, never waited for. Failures are results with the reason and what to do (`is_error`), never exceptions — except
`BrowserGone`, which the host turns into its own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from .host import BrowserGone, BrowserHost
from .run_pages import RunPages
from .tool_schemas import MAX_WAIT_SECONDS

__all__ = ["ACTION_WAIT", "Outcome", "perform"]

ACTION_WAIT = 10.0  # an element must become actionable within this (or the call's time left, if shorter)
POPUP_WAIT = 5.0  # a link with target=_blank: how long its click waits for the new tab
_REF = re.compile(r"^(f\d+)?e\d+$")
MAX_SCREENSHOT_BYTES = 4 * 1024 * 1024  # a PNG over this is taken again as a JPEG
GONE_NOTICE = 1.0  # after a "closed" error: how long the browser's own end is awaited to tell the two apart
_CLOSED_WORDS = ("Target page, context or browser has been closed", "Browser has been closed",
               "Target closed", "Connection closed", "browser has disconnected")


@dataclass(slots=True)
class Outcome:
    text: str
    is_error: bool = False
    image: bytes = b""


class _Refused(Exception):
    """The call cannot be done as asked; its message is the model's answer."""


class _Call:
    def __init__(self, host: BrowserHost, pages: RunPages, tool: str, args: dict[str, Any], deadline: float) -> None:
        self.host = host
        self.pages = pages
        self.tool = tool
        self.args = args
        self.deadline = deadline

    def left(self) -> float:
        return max(0.5, self.deadline - time.monotonic())

    def ms(self, cap: float = ACTION_WAIT) -> float:
        return 1000 * min(cap, max(0.2, self.left() - 0.5))

    def text_arg(self, name: str, *, required: bool = True, limit: int = 100_000) -> str:
        value = self.args.get(name, "")
        if not isinstance(value, str) or (required and not value):
            if required:
                raise _Refused(f"{self.tool} needs {name} as text")
            return ""
        if len(value) > limit:
            raise _Refused(f"{self.tool}: {name} is {len(value)} characters; at most {limit} are taken")
        return value

    async def page(self) -> Page:
        page = self.pages.current
        if page is None or page.is_closed():
            raise _Refused(f"{self.tool}: you have no open tab; browser_open a URL first")
        return page

    async def element(self, ref_name: str = "ref", *, required: bool = True) -> Locator | None:
        ref = self.args.get(ref_name)
        if ref in (None, "") and not required:
            return None
        if not isinstance(ref, str) or not ref.strip():
            raise _Refused(f"{self.tool} needs {ref_name}: an element reference from browser_snapshot (\"e12\")")
        ref = ref.strip().removeprefix("ref=").strip("[]")
        if not _REF.match(ref):
            raise _Refused(f"{self.tool}: {ref!r} is not an element reference; they look like e12")
        locator = (await self.page()).locator(f"aria-ref={ref}")
        if await locator.count() == 0:
            raise _Refused(f"{self.tool}: no element has reference {ref} on the page now (it changed, or the "
                           "reference is from another page); take a new browser_snapshot")
        return locator.first

    def bounded(self, text: str) -> str:
        limit = self.host.options.max_output
        data = text.encode("utf-8", "replace")
        if len(data) <= limit:
            return text
        cut = data[:limit].decode("utf-8", "ignore")
        return (f"{cut}\n[cut: {len(data)} bytes, of which the first {limit} are shown ([browser] max_output_bytes); "
                "give ref to look at one part whole]")

    async def page_line(self) -> str:
        page = self.pages.current
        if page is None or page.is_closed():
            return "no tab is open"
        try:
            title = await page.title()
        except PlaywrightError:
            title = ""
        return f"page: {page.url}" + (f" — {title[:200]}" if title else "")


# -- the tools ---------------------------------------------------------------------------------------------------


async def _status(call: _Call) -> str:
    host = call.host
    lines = [f"Chromium {host.version} runs ({host.options.mode}; its sandbox "
             f"{'is on' if host.options.sandbox else 'is off: yagentd runs as root'})."]
    lines += await _tab_lines(call)
    return "\n".join(lines)


async def _tab_lines(call: _Call) -> list[str]:
    pages = call.pages.pages
    if not pages:
        return ["You have no tabs; browser_open opens one."]
    lines = []
    for n, page in enumerate(pages, 1):
        try:
            title = await page.title()
        except PlaywrightError:
            title = ""
        mark = "*" if page is call.pages.current else " "
        lines.append(f"{mark} tab {n}: {page.url}" + (f" — {title[:120]}" if title else ""))
    return lines


async def _open(call: _Call) -> str:
    url = call.text_arg("url", limit=8192).strip()
    if "://" not in url and not url.startswith(("about:", "data:")):
        url = "http://" + url if not url.startswith("/") else "file://" + url
    refusal = call.host.policy.refusal(url)
    if refusal:
        raise _Refused(f"browser_open: {url[:200]} is not opened: {refusal}")
    if call.args.get("new_tab") is True or call.pages.current is None or call.pages.current.is_closed():
        page = await call.host.new_page(call.pages)
    else:
        page = call.pages.current
    budget = min(call.left() - 1.0, 45.0)
    try:
        response = await page.goto(url, wait_until="domcontentloaded", timeout=max(500.0, 1000 * budget))
    except PlaywrightTimeout:
        if page.url in ("about:blank", "") or not page.url.startswith(url.rstrip("/")):
            raise _Refused(f"browser_open: {url[:200]} did not answer within {budget:.0f} s") from None
        return f"{await call.page_line()}\nThe page is still loading after {budget:.0f} s; browser_snapshot shows " \
               "what has arrived, browser_wait with load=true waits longer."
    except PlaywrightError as exc:
        if _closed(exc):
            raise
        raise _Refused(f"browser_open: {url[:200]} could not be opened: {_first_line(exc)}") from None
    status = f" (HTTP {response.status})" if response is not None and response.status >= 400 else ""
    return f"{await call.page_line()}{status}"


async def _snapshot(call: _Call) -> str:
    page = await call.page()
    target = await call.element(required=False)
    try:
        tree = await (target or page).aria_snapshot(mode="ai", timeout=call.ms(30.0))
    except PlaywrightTimeout:
        raise _Refused("browser_snapshot: the page did not give its tree in time (it may be huge or busy); give "
                       "ref to snapshot one part, or browser_wait first") from None
    return call.bounded(f"{await call.page_line()}\n{tree}")


_INSPECT_SCRIPT = """(el) => {
  const r = el.getBoundingClientRect(); const attrs = {};
  for (const a of Array.from(el.attributes).slice(0, 40)) attrs[a.name] = a.value.slice(0, 300);
  return {tag: el.tagName.toLowerCase(), attributes: attrs, text: (el.innerText || el.textContent || '').slice(0, 2000),
          value: ('value' in el) ? String(el.value).slice(0, 2000) : null,
          box: {x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height)},
          disabled: !!el.disabled, focused: document.activeElement === el};
}"""


async def _inspect(call: _Call) -> str:
    page = await call.page()
    target = await call.element(required=False)
    selector = call.text_arg("selector", required=False, limit=2000)
    if target is None and selector:
        target = page.locator(selector).first
        if await target.count() == 0:
            raise _Refused(f"browser_inspect: no element matches {selector!r}")
    if target is None:
        frames = [f.url for f in page.frames[1:20]]
        lines = [await call.page_line()]
        if frames:
            lines.append("frames: " + ", ".join(frames))
        errors = call.host.console_errors(page)
        if errors:
            lines.append("console errors (newest last):\n" + "\n".join(f"  {e}" for e in errors))
        return call.bounded("\n".join(lines))
    facts = await target.evaluate(_INSPECT_SCRIPT, timeout=call.ms())
    facts["visible"] = await target.is_visible()
    return call.bounded(json.dumps(facts, ensure_ascii=False, indent=1))


async def _click(call: _Call) -> str:
    target = await call.element()
    assert target is not None
    button = call.args.get("button", "left")
    if button not in ("left", "right", "middle"):
        raise _Refused("browser_click: button is left, right or middle")
    page = await call.page()
    # A link that opens a tab: the click returns once the tab is there (and announced), not a moment before.
    opens_tab = await target.evaluate("(el) => !!el.closest('a[target=_blank]')")
    popup = page.expect_popup(timeout=call.ms(POPUP_WAIT)) if opens_tab else contextlib.nullcontext()
    try:
        async with popup:
            if call.args.get("double") is True:
                await target.dblclick(button=button, timeout=call.ms())
            else:
                await target.click(button=button, timeout=call.ms())
    except PlaywrightTimeout:
        if not opens_tab:
            raise
    return f"clicked {call.args['ref']}; {await call.page_line()}"


async def _fill(call: _Call) -> str:
    target = await call.element()
    assert target is not None
    await target.fill(call.text_arg("text", required=False), timeout=call.ms())
    return f"filled {call.args['ref']}; {await call.page_line()}"


async def _type(call: _Call) -> str:
    text = call.text_arg("text", limit=20_000)
    target = await call.element(required=False)
    page = await call.page()
    if target is not None:
        await target.press_sequentially(text, timeout=call.ms(max(ACTION_WAIT, len(text) * 0.05)))
    else:
        await page.keyboard.type(text)
    if call.args.get("submit") is True:
        await (target.press("Enter", timeout=call.ms()) if target is not None else page.keyboard.press("Enter"))
    return f"typed {len(text)} characters{' and pressed Enter' if call.args.get('submit') is True else ''}; " \
           f"{await call.page_line()}"


async def _press(call: _Call) -> str:
    key = call.text_arg("key", limit=100)
    target = await call.element(required=False)
    try:
        if target is not None:
            await target.press(key, timeout=call.ms())
        else:
            await (await call.page()).keyboard.press(key)
    except PlaywrightError as exc:
        if "Unknown key" in str(exc):
            raise _Refused(f"browser_press: {key!r} is not a key name; write e.g. Enter, Tab, ArrowDown, "
                           "Control+A") from None
        raise
    return f"pressed {key}; {await call.page_line()}"


async def _scroll(call: _Call) -> str:
    target = await call.element(required=False)
    if target is not None:
        await target.scroll_into_view_if_needed(timeout=call.ms())
        return f"scrolled {call.args['ref']} into view"
    amount = call.args.get("amount", 600)
    if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= 100_000:
        raise _Refused("browser_scroll: amount is a whole number of pixels from 1 to 100000")
    direction = call.args.get("direction", "down")
    if direction not in ("up", "down"):
        raise _Refused("browser_scroll: direction is up or down")
    page = await call.page()
    await page.mouse.wheel(0, amount if direction == "down" else -amount)
    position = await page.evaluate("() => [Math.round(window.scrollY), document.documentElement.scrollHeight]")
    return f"scrolled {direction} {amount} px; now at {position[0]} of {position[1]} px"


async def _select(call: _Call) -> str:
    target = await call.element()
    assert target is not None
    values = call.args.get("values")
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values) or len(values) > 100:
        raise _Refused("browser_select needs values: a list of option values or labels")
    try:
        chosen = await target.select_option(values, timeout=call.ms())
    except PlaywrightTimeout:
        labels = await target.evaluate("(el) => Array.from(el.options || []).slice(0, 50).map(o => o.value + ' (' + "
                                       "o.label + ')')")
        raise _Refused(f"browser_select: no option {values!r}; it has: {', '.join(labels) or 'none'}") from None
    return f"selected {', '.join(chosen)} in {call.args['ref']}"


async def _tabs(call: _Call) -> str:
    action = call.args.get("action", "list")
    pages = call.pages
    index = call.args.get("index")
    if action == "new":
        await call.host.new_page(pages)
    elif action in ("switch", "close"):
        if index is None and action == "close":
            chosen = pages.current
        elif isinstance(index, int) and not isinstance(index, bool) and 1 <= index <= len(pages.pages):
            chosen = pages.pages[index - 1]
        else:
            raise _Refused(f"browser_tabs: {action} needs index, a tab number from 1 to {len(pages.pages)}")
        if chosen is None:
            raise _Refused("browser_tabs: you have no open tab")
        if action == "switch":
            pages.current = chosen
            await chosen.bring_to_front()
        else:
            await call.host.close_page(pages, chosen)
    elif action != "list":
        raise _Refused("browser_tabs: action is list, switch, close or new")
    return "\n".join(await _tab_lines(call))


async def _wait(call: _Call) -> str:
    seconds = call.args.get("seconds", 10.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise _Refused("browser_wait: seconds is a number from 0.1 to 60")
    seconds = min(max(float(seconds), 0.1), MAX_WAIT_SECONDS, call.left() - 0.5)
    page = await call.page()
    ms = 1000 * seconds
    text = call.text_arg("text", required=False, limit=1000)
    gone = call.text_arg("text_gone", required=False, limit=1000)
    selector = call.text_arg("selector", required=False, limit=2000)
    target = await call.element(required=False)
    try:
        if text:
            await page.get_by_text(text).first.wait_for(state="visible", timeout=ms)
            what = f"{text!r} is on the page"
        elif gone:
            await page.get_by_text(gone).first.wait_for(state="hidden", timeout=ms)
            what = f"{gone!r} is gone"
        elif target is not None or selector:
            await (target or page.locator(selector).first).wait_for(state="visible", timeout=ms)
            what = "the element is visible"
        elif call.args.get("load") is True:
            await page.wait_for_load_state("load", timeout=ms)
            what = "the page has loaded"
        else:
            await page.wait_for_timeout(ms)
            what = f"waited {seconds:g} s"
    except PlaywrightTimeout:
        raise _Refused(f"browser_wait: not within {seconds:g} s; browser_snapshot shows the page as it is") from None
    return f"{what}; {await call.page_line()}"


async def _screenshot(call: _Call) -> Outcome:
    page = await call.page()
    target = await call.element(required=False)
    full = call.args.get("full_page") is True
    shoot: Callable[..., Awaitable[bytes]] = target.screenshot if target is not None else page.screenshot
    options: dict[str, Any] = {"timeout": call.ms(30.0)}
    if target is None:
        options["full_page"] = full
    image = await shoot(type="png", **options)
    kind = "png"
    if len(image) > MAX_SCREENSHOT_BYTES:
        image = await shoot(type="jpeg", quality=60, **options)
        kind = "jpeg"
        if len(image) > MAX_SCREENSHOT_BYTES and target is None:
            options["full_page"] = False
            image = await shoot(type="jpeg", quality=50, **options)
    what = f"element {call.args['ref']}" if target is not None else ("the whole page" if full else "the viewport")
    return Outcome(f"screenshot of {what} ({kind}, {len(image)} bytes); {await call.page_line()}", image=image)


async def _eval(call: _Call) -> str:
    expression = call.text_arg("expression", limit=100_000)
    page = await call.page()
    try:
        value = await page.evaluate(expression)
    except PlaywrightError as exc:
        if _closed(exc):
            raise
        raise _Refused(f"browser_eval: the expression failed: {_first_line(exc)}") from None
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        shown = repr(value)
    return call.bounded(shown)


_TOOLS: dict[str, Callable[[_Call], Awaitable[str | Outcome]]] = {
    "browser_status": _status, "browser_open": _open, "browser_snapshot": _snapshot, "browser_inspect": _inspect,
    "browser_click": _click, "browser_fill": _fill, "browser_type": _type, "browser_press": _press,
    "browser_scroll": _scroll, "browser_select": _select, "browser_tabs": _tabs, "browser_wait": _wait,
    "browser_screenshot": _screenshot, "browser_eval": _eval,
}


async def perform(host: BrowserHost, pages: RunPages, tool: str, args: dict[str, Any], deadline: float) -> Outcome:
    """Carry out `tool` for the run; `BrowserGone` when Chromium went away under it."""
    handler = _TOOLS.get(tool)
    if handler is None:
        return Outcome(f"{tool} is not a browser tool ({', '.join(_TOOLS)})", is_error=True)
    call = _Call(host, pages, tool, args if isinstance(args, dict) else {}, deadline)
    host.begin_call(pages)
    pages.last_action = tool
    try:
        answer = await handler(call)
        outcome = answer if isinstance(answer, Outcome) else Outcome(answer)
    except _Refused as refused:
        outcome = Outcome(str(refused), is_error=True)
    except PlaywrightTimeout as exc:
        outcome = Outcome(f"{tool}: timed out ({_first_line(exc)}); take a browser_snapshot to see the page as it "
                          "is now", is_error=True)
    except PlaywrightError as exc:
        if not _closed(exc):
            outcome = Outcome(f"{tool} failed: {_first_line(exc)}", is_error=True)
        else:  # the tab, or the whole browser? Chromium's end reaches the host a moment after the call's error
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(GONE_NOTICE):
                    await host.gone.wait()
            if host.gone.is_set():
                raise BrowserGone(host.gone_reason) from None
            outcome = Outcome(f"{tool}: the tab closed during the call", is_error=True)
    notes = pages.take_notes()
    if notes:
        outcome.text += "\n" + "\n".join(f"note: {n}" for n in notes)
    return outcome


def _closed(exc: BaseException) -> bool:
    return any(word in str(exc) for word in _CLOSED_WORDS)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:300]

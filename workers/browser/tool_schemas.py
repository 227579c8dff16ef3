"""The fourteen browser tools as both sides declare them: the worker registers static tools of these names and
parameters (`workers/tools/browser_tools.py`), the browser host carries them out (`workers/browser/actions.py`).
One table, so the two never disagree. Plain data: importing it loads nothing else (no Playwright).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_WAIT_SECONDS", "TOOLS", "TOOL_NAMES", "BrowserTool"]

MAX_WAIT_SECONDS = 60.0  # browser_wait waits this long at most, whatever it is asked


class BrowserTool:
    __slots__ = ("brief", "description", "mutates", "name", "parameters")

    def __init__(
        self, name: str, description: str, parameters: dict[str, Any], brief: str, *, mutates: bool = True
    ) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.brief = brief
        self.mutates = mutates  # it changes the page (or the tabs); every browser tool runs one at a time anyway


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or []}


_REF = {"type": "string", "description": 'The element\'s reference from the last browser_snapshot, e.g. "e12".'}
_OPT_REF = {"type": "string", "description": 'Optional: an element reference from browser_snapshot ("e12").'}

TOOLS: tuple[BrowserTool, ...] = (
    BrowserTool(
        "browser_status",
        "Show the browser's state: whether Chromium runs, its version and sandbox, your tabs with their URLs and "
        "which one is current. Starts nothing.",
        _schema({}),
        "the browser's state and your tabs",
        mutates=False,
    ),
    BrowserTool(
        "browser_open",
        "Open a URL in your current tab (a new tab with new_tab=true; the first call opens one). http(s) pages and "
        "file:// pages inside the project are allowed, within [browser] allowed_domains / denied_domains. Returns "
        "the page's title and URL once its document has loaded (a page still loading says so).",
        _schema(
            {
                "url": {"type": "string", "description": "The address, e.g. http://127.0.0.1:5173/login."},
                "new_tab": {"type": "boolean", "description": "Open it in a new tab that becomes current."},
            },
            ["url"],
        ),
        "open a URL",
    ),
    BrowserTool(
        "browser_snapshot",
        "The current page as an accessibility tree (roles, names, states) where each element you can act on has "
        "a reference [ref=eN] that browser_click, browser_fill, browser_type, browser_select, browser_press, "
        "browser_scroll, browser_inspect and browser_screenshot take. Take a new snapshot after the page changed. "
        "A large page is cut: give ref to see one part of it whole.",
        _schema({"ref": _OPT_REF}),
        "the page's elements with references",
        mutates=False,
    ),
    BrowserTool(
        "browser_inspect",
        "Details of one element (tag, attributes, text, value, whether visible and enabled, where it is), or, "
        "without ref or selector, of the page (URL, title, frames, recent console errors and dialogs).",
        _schema(
            {
                "ref": _OPT_REF,
                "selector": {"type": "string", "description": "Optional: a CSS selector instead of a ref."},
            }
        ),
        "details of an element or the page",
        mutates=False,
    ),
    BrowserTool(
        "browser_click",
        "Click an element (waits until it is visible, enabled and still). Returns what changed: the URL, a new "
        "tab, a dialog.",
        _schema(
            {
                "ref": _REF,
                "double": {"type": "boolean", "description": "Double-click."},
                "button": {
                    "type": "string",
                    "enum": ["left", "right", "middle"],
                    "description": "The mouse button (left when not given).",
                },
            },
            ["ref"],
        ),
        "click an element",
    ),
    BrowserTool(
        "browser_fill",
        "Replace the value of a text field, text area or editable element with the text (no key events per "
        "character; use browser_type for that).",
        _schema({"ref": _REF, "text": {"type": "string", "description": "The new value."}}, ["ref", "text"]),
        "set a field's value",
    ),
    BrowserTool(
        "browser_type",
        "Type text key by key into an element (or the focused one), as a user would; submit=true presses Enter "
        "afterwards.",
        _schema(
            {
                "text": {"type": "string", "description": "What to type."},
                "ref": _OPT_REF,
                "submit": {"type": "boolean", "description": "Press Enter after the text."},
            },
            ["text"],
        ),
        "type text key by key",
    ),
    BrowserTool(
        "browser_press",
        'Press a key or a combination ("Enter", "Tab", "Escape", "ArrowDown", "Control+A") on an element '
        "or the focused one.",
        _schema(
            {
                "key": {"type": "string", "description": "A key name or combination, e.g. Enter or Control+A."},
                "ref": _OPT_REF,
            },
            ["key"],
        ),
        "press a key",
    ),
    BrowserTool(
        "browser_scroll",
        "Scroll an element into view (ref), or the page by an amount in pixels (direction up or down, 600 when "
        "not given).",
        _schema(
            {
                "ref": _OPT_REF,
                "direction": {"type": "string", "enum": ["up", "down"], "description": "Which way to scroll the page."},
                "amount": {"type": "integer", "description": "Pixels, 1 to 100000."},
            }
        ),
        "scroll the page or to an element",
    ),
    BrowserTool(
        "browser_select",
        "Choose options of a <select> by their values or labels.",
        _schema(
            {
                "ref": _REF,
                "values": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The option values or labels to choose.",
                },
            },
            ["ref", "values"],
        ),
        "choose options of a select",
    ),
    BrowserTool(
        "browser_tabs",
        "Your tabs: list them, switch to one (index), close one (index; the current one when not given), or open "
        "a new empty one.",
        _schema(
            {
                "action": {
                    "type": "string",
                    "enum": ["list", "switch", "close", "new"],
                    "description": "What to do with the tabs.",
                },
                "index": {"type": "integer", "description": "The tab's number as browser_tabs lists it."},
            },
            ["action"],
        ),
        "list, switch, close or open tabs",
    ),
    BrowserTool(
        "browser_wait",
        "Wait until text appears on the page (text), disappears (text_gone), an element is visible (ref or "
        "selector), the page has loaded (load), or a number of seconds has passed (seconds); at most 60 s.",
        _schema(
            {
                "text": {"type": "string", "description": "Text to wait for."},
                "text_gone": {"type": "string", "description": "Text to wait to disappear."},
                "ref": _OPT_REF,
                "selector": {"type": "string", "description": "A CSS selector to wait for."},
                "load": {"type": "boolean", "description": "Wait for the page's load event."},
                "seconds": {"type": "number", "description": "How long to wait at most (0.1 to 60)."},
            }
        ),
        "wait for text, an element or the load",
        mutates=False,
    ),
    BrowserTool(
        "browser_screenshot",
        "Take a screenshot of the page (or of one element, ref; the whole page with full_page=true). It is stored "
        "as an artifact of the task whose path the result names, and shown to you where the model accepts images.",
        _schema(
            {"ref": _OPT_REF, "full_page": {"type": "boolean", "description": "The whole page, not only the viewport."}}
        ),
        "a screenshot, stored as an artifact",
        mutates=False,
    ),
    BrowserTool(
        "browser_eval",
        "Evaluate a JavaScript expression in the page and return its value as JSON (a function body may use "
        '`return` inside an arrow function: "(() => { ...; return x })()"). Needs the user\'s authorisation '
        "unless the run is --yolo: it can read and do anything the page can.",
        _schema({"expression": {"type": "string", "description": "The JavaScript expression."}}, ["expression"]),
        "run JavaScript in the page",
    ),
)

TOOL_NAMES = tuple(t.name for t in TOOLS)

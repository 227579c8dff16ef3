"""The browser tools: `browser_status` … `browser_eval`, static tools of the Browser agent (`Effect.BROWSER`), whose
calls the project's browser carries out through the daemon (`ToolContext.browser`, the worker's channel).

Declared from the browser's own table (`workers/browser/tool_schemas.py`), so the worker and the browser host never
disagree on a name or a parameter. A screenshot comes back as PNG bytes: it is stored as an artifact of the task
(`artifacts/{id}.png`), its path is in the result and in the event the attached client prints. `browser_eval` asks
the user unless the run is --yolo (it can do anything the page can). When the browser is unavailable (no Chromium,
`[browser] enabled = false`) the tools stay on the surface and their descriptions say why (`Surface.annotate`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from yagent.ipc import event_data
from yagent.ipc.messages import BrowserCallResult
from yagent.ipc.vocabulary import EventType
from yagent.workers.browser.tool_schemas import TOOLS

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Executor, Frequency, Invocation, ToolSpec, Truncation

__all__ = ["BROWSER_TOOL_NAMES", "BrowserPort", "ScreenshotShelf"]

BROWSER_TOOL_NAMES = tuple(t.name for t in TOOLS)


class BrowserPort(Protocol):
    """The run's way to its project's browser (the worker's daemon channel implements it)."""

    async def call_browser(self, tool: str, arguments: dict[str, Any], *, call_id: str) -> BrowserCallResult: ...


@runtime_checkable
class ScreenshotShelf(Protocol):
    """Where screenshots are kept: the task's artifacts (`workers/board.TaskBoard` implements it)."""

    def put_image(self, data: bytes, suffix: str) -> str: ...  # the stored file's path


def _executor(tool: str) -> Executor:
    async def execute(inv: Invocation) -> ToolResult:
        port = inv.ctx.browser
        if port is None:
            return ToolResult.error(f"{tool}: this run has no connection to a browser")
        reply = await port.call_browser(tool, dict(inv.args), call_id=inv.call_id)
        data: dict[str, Any] = {"url": reply.url}
        text = reply.content
        if reply.image:
            shelf = inv.ctx.board
            suffix = ".jpg" if reply.image[:3] == b"\xff\xd8\xff" else ".png"
            path = ""
            if not isinstance(shelf, ScreenshotShelf):
                text += "\nThe screenshot was not stored: this run has no task board"
            else:
                try:
                    path = shelf.put_image(reply.image, suffix)
                except OSError as exc:
                    text += f"\nThe screenshot could not be stored: {exc}"
            if path:
                data["artifact"] = path
                text += f"\nStored as {path}"
        inv.ctx.emit(EventType.BROWSER_PAGE, event_data.browser_page(
            tool, reply.url, artifact=str(data.get("artifact", "")), is_error=reply.is_error))
        # The stored screenshot goes to a model that reads images as an image (`workers/llm/_images.py`).
        images = (data["artifact"],) if data.get("artifact") else ()
        return ToolResult(content=text, is_error=reply.is_error, data=data, images=images)

    execute.__name__ = f"execute_{tool}"
    return execute


for _tool in TOOLS:
    register(ToolSpec(
        name=_tool.name,
        description=_tool.description,
        parameters=_tool.parameters,
        effects=Effect.BROWSER,
        executor=_executor(_tool.name),
        frequency=Frequency.HOT,
        # One page, one user: the run's browser calls go one at a time, in the order the model gave them.
        mutates=_tool.mutates,
        serial=True,
        auth=AuthPolicy.DANGEROUS if _tool.name == "browser_eval" else AuthPolicy.NEVER,
        truncation=Truncation.LATE if _tool.name in ("browser_snapshot", "browser_inspect") else Truncation.EARLY,
        brief=_tool.brief,
    ))

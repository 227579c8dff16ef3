"""Pure rendering of the TUI's surfaces to lines of exactly `width` cells.

Nothing here touches prompt_toolkit's application: `layout.py` hands these lines to the screen, and
tests call the same functions at every size. The conversation log is rendered per entry and cached
by (width, entry version, expansion); a streaming reply only re-wraps its last line per chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import RunStatus, TaskState

from ..cells import Line, clean, fit, pad_line, text_width, truncate, wrap, wrap_fragments, wrap_spans
from ..confinement_text import unconfined_text
from ..humanize import format_tokens
from ..theme import agent_style
from ..thought_filter import visible_reply
from .markdown import style_markdown_line, wrap_styled
from .state import AnswerShown, DelegationEnd, DelegationStart, Entry, PlanEntry, TaskView, TurnEnd

__all__ = [
    "LogRenderer",
    "format_duration",
    "format_tokens",
    "plans_window",
    "render_plans",
    "render_status",
    "render_title",
    "status_height",
]

INDENT = 2
MAX_EXPANDED_RESULT_LINES = 400


def format_duration(seconds: float) -> str:
    s = int(max(0.0, seconds))
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _blank(width: int) -> Line:
    return [("", " " * width)]


def _indented(text_lines: Sequence[str], width: int, indent: int, style: str) -> list[Line]:
    return [pad_line([("", " " * indent), (style, t)], width) for t in text_lines]


def _wrapped(prefix: Line, text: str, width: int, indent: int, style: str) -> list[Line]:
    """`prefix` then `text` wrapped; continuation lines are indented to `indent` cells (a hanging indent)."""
    first_budget = max(1, width - sum(text_width(t) for _s, t in prefix))
    rest_w = max(1, width - indent)
    paragraphs = clean(text).split("\n")
    first = paragraphs[0]
    spans = wrap_spans(first, first_budget)
    head = first[spans[0][0]:spans[0][1]]
    rest: list[str] = []
    if len(spans) > 1:
        remainder = first[spans[1][0]:]
        rest.extend(remainder[a:b] for a, b in wrap_spans(remainder, rest_w))
    for para in paragraphs[1:]:
        rest.extend(para[a:b] for a, b in wrap_spans(para, rest_w))
    return [pad_line([*prefix, (style, head)], width), *_indented(rest, width, indent, style)]


class _GrowingBody:
    """Styled, wrapped lines of an append-only Markdown reply, re-rendering only its last source line.

    Lines before the last newline never change once rendered; the fence state at the start of the last
    source line is all that carries over.
    """

    __slots__ = ("consumed", "fence", "indent", "replaced", "stable", "tail", "tail_start", "width")

    def __init__(self, width: int, indent: int, replaced: int = 0) -> None:
        self.width = width
        self.replaced = replaced
        self.indent = indent
        self.stable: list[Line] = []
        self.tail: list[Line] = []
        self.tail_start = 0  # where the last source line starts in the text
        self.fence = False  # inside a fenced code block at `tail_start`
        self.consumed = -1

    def update(self, text: str) -> None:
        if len(text) < self.consumed:  # replaced, not appended: start over
            self.stable, self.tail, self.tail_start, self.fence = [], [], 0, False
        if len(text) == self.consumed:
            return
        body_w = max(1, self.width - self.indent)
        rule_w = min(body_w, 40)
        sources = text[self.tail_start:].split("\n")
        for source in sources[:-1]:
            styled = style_markdown_line(source, self.fence, rule_w)
            self.stable.extend(self._pad(wrap_styled(styled, body_w)))
            self.fence = styled.in_fence
            self.tail_start += len(source) + 1
        self.tail = self._pad(wrap_styled(style_markdown_line(sources[-1], self.fence, rule_w), body_w))
        self.consumed = len(text)

    def _pad(self, lines: list[Line]) -> list[Line]:
        pad = ("", " " * self.indent)
        return [pad_line([pad, *line], self.width) for line in lines]

    def lines(self) -> list[Line]:
        return [*self.stable, *self.tail]


@dataclass(slots=True)
class _Cached:
    key: tuple[int, int, bool]
    lines: list[Line]
    body: _GrowingBody | None = None


class LogRenderer:
    """Renders the conversation log; keeps per-entry caches across frames."""

    def __init__(self) -> None:
        self._cache: dict[Entry, _Cached] = {}

    def reset(self) -> None:
        self._cache.clear()

    def entry_lines(self, entry: Entry, width: int, expanded: bool, first: bool = False) -> list[Line]:
        key = (width, entry.version, expanded and entry.kind in ("tool", "thinking"))
        cached = self._cache.get(entry)
        if cached is not None and cached.key == key:
            return cached.lines
        if entry.kind == "text":
            visible = visible_reply(entry.text, final=entry.final)
            if not visible:  # a reply that so far holds only its thought block: the plans view shows it
                self._cache[entry] = _Cached(key, [])
                return []
            body = cached.body if cached is not None else None
            if body is None or body.width != width or body.replaced != entry.replaced:
                body = _GrowingBody(width, INDENT, entry.replaced)
            body.update(visible)
            header = pad_line([("", " "), (agent_style(entry.agent), f"● {entry.agent or 'agent'}")], width)
            lines = [_blank(width), header, *body.lines()]
            self._cache[entry] = _Cached(key, lines, body)
            return lines
        lines = _render_entry(entry, width, key[2])
        self._cache[entry] = _Cached(key, lines)
        return lines

    def window(self, view: TaskView, width: int, height: int, expanded: bool,
               top: int | None = None) -> tuple[list[Line], int, int]:
        """The visible lines, the total line count and the top line shown.

        `top=None` follows the tail. Only entries that reach into the window are rendered when
        following; a scrolled view needs every entry's height (all cached after the first frame).
        """
        entries = view.entries
        if not entries:
            return [], 0, 0
        if top is None:
            collected: list[list[Line]] = []
            count = 0
            for entry in reversed(entries):
                lines = self.entry_lines(entry, width, expanded)
                collected.append(lines)
                count += len(lines)
                if count >= height:
                    break
            flat = [line for lines in reversed(collected) for line in lines]
            visible = flat[-height:] if height > 0 else []
            return visible, -1, -1
        all_lines = [line for entry in entries for line in self.entry_lines(entry, width, expanded)]
        total = len(all_lines)
        top = max(0, min(top, max(0, total - height)))
        return all_lines[top:top + height], total, top


def _render_entry(entry: Entry, width: int, expanded: bool) -> list[Line]:
    d = entry.data
    kind = entry.kind
    if kind == "user":
        return [_blank(width), *_wrapped([("class:user.prefix", "› ")], entry.text, width, INDENT, "class:user")]
    if kind == "thinking":
        count = len(wrap(entry.text, max(1, width - 4))) if entry.text else 0
        head = pad_line([("", "  "), ("class:thinking", f"✻ {entry.agent} thinking · {count} lines")], width)
        if not expanded:
            return [head]
        return [head, *_indented(wrap(entry.text, max(1, width - 4)), width, 4, "class:thinking")]
    if kind == "tool" and isinstance(d, dict):
        return _render_tool(entry, d, width, expanded)
    if isinstance(d, DelegationStart):
        prefix: Line = [("", "  "), ("class:delegation", "→ "), (agent_style(entry.agent), entry.agent),
                        ("class:delegation", " ")]
        return [pad_line([*prefix, ("class:dim", truncate(d.input, width))], width)]
    if isinstance(d, DelegationEnd):
        detail = f"{d.status} ({d.stop_reason}) · {format_duration(d.elapsed)}"
        if d.error:
            detail += f": {d.error}"
        prefix = [("", "  "), ("class:delegation", "← "), (agent_style(entry.agent), entry.agent), ("", " ")]
        ok = d.status == RunStatus.DONE
        return _wrapped(prefix, detail, width, 6, "class:delegation" if ok else "class:error")
    if kind == "notice":
        return _wrapped([("", "  "), ("class:notice", "· ")], entry.text, width, 4, "class:notice")
    if kind == "diff":
        return [line for text in entry.text.split("\n") for line in _wrapped([("", "  ")], text, width, 4,
                                                                               _diff_style(text))]
    if kind == "error":
        return _wrapped([("", "  "), ("class:error", "! ")], entry.text, width, 4, "class:error")
    if isinstance(d, Question):
        return _wrapped([("", "  "), ("class:question", "? ")], f"{entry.agent} asks: {d.prompt}",
                        width, 4, "class:question")
    if isinstance(d, AnswerShown):
        by = f" (by {d.by})" if d.by else ""
        return _wrapped([("", "  "), ("class:answer", "✓ ")], f"answered: {d.value}{by}", width, 4,
                        "class:answer")
    if isinstance(d, TurnEnd):
        text = f"■ turn {d.turn} {d.status} · {format_duration(d.elapsed)}"
        if d.status != RunStatus.DONE:
            err = f": {d.error}" if d.error else ""
            return [_blank(width), *_wrapped([("", "  ")], f"{text} ({d.stop_reason}){err}", width, 4,
                                             "class:error")]
        return [_blank(width), pad_line([("", "  "), ("class:dim", text)], width)]
    return _wrapped([("", "  ")], entry.text, width, 2, "class:dim")


def _diff_style(line: str) -> str:
    body = line.lstrip(" ")
    if body.startswith(("+++", "---", "diff --git", "sub-task", "undo ", "undid ")):
        return "class:diff.head"
    if body.startswith("+"):
        return "class:diff.add"
    if body.startswith("-"):
        return "class:diff.del"
    if body.startswith("@@"):
        return "class:diff.hunk"
    if body.startswith("you changed"):
        return "class:error"
    return "class:dim"


def _render_tool(entry: Entry, d: dict[str, Any], width: int, expanded: bool) -> list[Line]:
    if not d.get("done"):
        mark, mark_style = "…", "class:tool.running"
    elif d.get("is_error"):
        mark, mark_style = f"✗ {format_duration(float(d.get('duration') or 0))}", "class:tool.err"
    else:
        mark, mark_style = f"✓ {format_duration(float(d.get('duration') or 0))}", "class:tool.ok"
    left: Line = [("", "  "), ("class:tool", "⚙ "), (agent_style(entry.agent), entry.agent), ("", " "),
                  ("class:tool", str(d.get("name", "?")))]
    brief = str(d.get("brief") or "")
    right = f" {mark}"
    budget = width - sum(text_width(t) for _s, t in left) - text_width(right)
    if brief and budget > 2:
        left.append(("class:dim", " " + truncate(brief, budget - 1)))
    used = sum(text_width(t) for _s, t in left)
    if used + text_width(right) <= width:
        head = [*left, ("", " " * (width - used - text_width(right))), (mark_style, right)]
    else:
        head = pad_line(left, width)
    lines = [pad_line(head, width)]
    content = str(d.get("content") or "")
    if not d.get("done") or not content:
        return lines
    style = "class:tool.err" if d.get("is_error") else "class:dim"
    body = wrap(content, max(1, width - 6))
    if not expanded:
        first = truncate(content.strip().splitlines()[0] if content.strip() else "", max(1, width - 20))
        more = f" (+{len(body) - 1} lines)" if len(body) > 1 else ""
        lines.append(pad_line([("", "    "), ("class:dim", "└ "), (style, first), ("class:dim", more)], width))
        return lines
    shown = body[:MAX_EXPANDED_RESULT_LINES]
    lines.extend(_indented(shown, width, 6, style))
    if len(body) > len(shown):
        lines.append(pad_line([("", "      "), ("class:dim", f"… {len(body) - len(shown)} more lines")], width))
    return lines


# -- title row ---------------------------------------------------------------------------------------

def render_title(view: TaskView, width: int, hints: Sequence[tuple[str, str]]) -> Line:
    """Left: where we are; right: key hints (the only place outside dialogs that shows keys)."""
    name = view.project.rstrip("/").rsplit("/", 1)[-1] if view.project else ""
    left_text = f" yagent · {name}" if name else " yagent"
    task = f" · {view.task}" if view.task else " · new session"
    title = f" · {view.title}" if view.title else ""
    hint_frags: Line = []
    for i, (key, what) in enumerate(hints):
        if i:
            hint_frags.append(("class:title.hint", " · "))
        hint_frags += [("class:title.key", key), ("class:title.hint", f" {what}")]
    # Drop hints from the end until the essentials fit; the location is never dropped below 12 cells.
    while hint_frags and sum(text_width(t) for _s, t in hint_frags) + 1 > width - min(width, 24):
        hint_frags = hint_frags[:-3] if len(hint_frags) > 3 else []
    hint_w = sum(text_width(t) for _s, t in hint_frags) + (1 if hint_frags else 0)
    left_budget = width - hint_w - (2 if hint_frags else 0)  # a truncated title never touches the hints
    left = truncate(left_text + task + title, left_budget)
    name_len = min(len(left), len(left_text))
    frags: Line = [("class:title.name", left[:name_len]), ("class:title", left[name_len:])]
    used = text_width(left)
    frags.append(("class:title", " " * max(0, width - used - hint_w)))
    frags.extend(hint_frags)
    if hint_frags:
        frags.append(("class:title", " "))
    return pad_line(frags, width, "class:title")


# -- status line -------------------------------------------------------------------------------------

# Keyed by `TaskView.display_state`: a task state, or one of the client's own words for a task.
_STATE_STYLE = {TaskState.RUNNING: "running", "waiting for you": "waiting", TaskState.PAUSED: "paused",
                TaskState.DONE: "done", TaskState.IDLE: "idle", "new": "idle", TaskState.FAILED: "failed",
                TaskState.CANCELLED: "failed", TaskState.INTERRUPTED: "failed", TaskState.BACKGROUND: "running"}


def status_height(view: TaskView, rows: int) -> int:
    """How many rows the status area takes; the layout and `render_status` both use it."""
    if rows < 20:
        return 1
    tree = [r for _d, r in view.live_runs()]
    if len(tree) < 2:
        return 1
    return 1 + min(4, len(tree))


def render_status(view: TaskView, width: int, rows: int, now: float, *, model_override: str = "",
                  lines_below: int = 0) -> list[Line]:
    """Task state, elapsed, runs, tokens, compression, model — no key caps (those live in the title row).

    `lines_below` > 0: the conversation is scrolled back and does not follow the stream; said second, so it
    is the last thing a narrow terminal drops."""
    state = view.display_state
    badge = f" {state} "
    segments: list[str] = []  # in priority order; dropped from the end when narrow
    segments.append(format_duration(view.elapsed(now)))
    unconfined = sorted({r.unconfined for _d, r in view.live_runs() if r.unconfined and r.status in (
        RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.STARTING)})
    if unconfined:  # said first after the time: the one thing a narrow terminal must not drop
        segments.append("NOT CONFINED: " + ", ".join(unconfined_text(u) for u in unconfined))
    if lines_below > 0:
        segments.append(f"↓ {lines_below} lines below")
    runs = view.live_runs()
    live = [r for _d, r in runs if r.status in (RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.STARTING)]
    if runs:
        names: dict[str, int] = {}
        for r in live:
            names[r.agent] = names.get(r.agent, 0) + 1
        if live:
            summary = ", ".join(f"{a}×{n}" if n > 1 else a for a, n in names.items())
            segments.append(f"runs: {summary}")
            waiting = [r for r in live if r.slot_limit]
            if waiting:  # the limit is shared by every project: say why nothing moves
                segments.append(f"{len(waiting)} waiting for a model slot (max {waiting[0].slot_limit} at once)")
        else:
            segments.append(f"runs: {len(runs)} finished")
    u = view.usage
    if u.calls:
        cached = f" (cached {format_tokens(u.cached_tokens)})" if u.cached_tokens else ""
        approx = "~" if u.estimated else ""
        segments.append(f"tokens ↑{approx}{format_tokens(u.input_tokens)}{cached} ↓{format_tokens(u.output_tokens)}")
    c = view.compression
    segments.append(f"⧉ {c.count} −{format_tokens(c.saved)} ({c.percent}%)")
    gauge = view.gauge()
    if gauge is not None and gauge.threshold > 0:
        who = "" if gauge.run == view.root_run else f"{gauge.agent} "
        window = f" of {format_tokens(gauge.window)}" if gauge.window else ""
        segments.append(f"ctx {who}{format_tokens(gauge.used)}/{format_tokens(gauge.threshold)}{window}")
    model = model_override or view.model
    if model:
        segments.append(f"model {model}" + (" (override)" if model_override else ""))
    badge_style = f"class:status.state.{_STATE_STYLE.get(state, 'idle')}"
    budget = width - text_width(badge)
    while segments and sum(text_width(s) + 3 for s in segments) > budget:
        segments.pop()
    frags: Line = [(badge_style, truncate(badge, width))]
    for seg in segments:
        frags += [("class:status.sep", " │ "), ("class:status", seg)]
    lines = [pad_line(frags, width, "class:status")]
    extra = status_height(view, rows) - 1
    if extra:
        tree_lines: list[Line] = []
        for depth, r in runs:
            took = format_duration((r.ended_at or now) - r.started_at) if r.started_at else ""
            wait = " · waiting for a model slot" if r.slot_limit else ""
            page = f" · {r.browser}" if r.browser and not r.ended_at else ""  # a Browser run: where it is
            text = f"{'  ' * depth}└ {r.agent} {r.status} {took}{wait}{page}".rstrip()
            tree_lines.append(pad_line([("class:status.tree", " " + text)], width, "class:status"))
        if len(tree_lines) > extra:
            hidden = len(tree_lines) - extra + 1
            more = pad_line([("class:status.tree", f"   … {hidden} more runs")], width, "class:status")
            tree_lines = [*tree_lines[:extra - 1], more]
        lines.extend(tree_lines)
        while len(lines) < 1 + extra:
            lines.append(pad_line([], width, "class:status"))
    return lines


# -- thinklink plans ---------------------------------------------------------------------------------

_PLAN_MARK = {"done": ("✓", "class:plan.done"), "doing": ("▸", "class:plan.doing"), "todo": ("○", "class:plan.todo")}


def plan_agents(plans: Sequence[PlanEntry]) -> list[str]:
    seen: list[str] = []
    for p in plans:
        if p.agent not in seen:
            seen.append(p.agent)
    return seen


def render_plans(plans: Sequence[PlanEntry], width: int, height: int, agent_filter: str | None,
                 scroll: int = 0) -> list[Line]:
    """The thinklink view: every `<thought>` plan (all agents, or one), newest last, `height` lines."""
    return plans_window(plans, width, height, agent_filter, scroll)[0]


def plans_window(plans: Sequence[PlanEntry], width: int, height: int, agent_filter: str | None,
                 scroll: int = 0) -> tuple[list[Line], int]:
    """`render_plans` and the scroll it used: `scroll` lines back from the newest, at most up to the oldest."""
    agents = plan_agents(plans)
    label = agent_filter or "all agents"
    header = pad_line([("class:title.name", " thinklink plans"), ("class:title", f" · {label} · "),
                       ("class:title.key", "f"), ("class:title.hint", " filter · "),
                       ("class:title.key", "esc"), ("class:title.hint", " close")], width, "class:title")
    body: list[Line] = []
    shown = [p for p in plans if agent_filter is None or p.agent == agent_filter]
    if not shown:
        body.append(pad_line([("class:dim", "  no plans yet" + (f" from {agent_filter}" if agent_filter else "")
                               + (f" (agents with plans: {', '.join(agents)})" if agents else ""))], width))
    for p in shown:
        body.append(_blank(width))
        body.append(pad_line([("", " "), (agent_style(p.agent), p.agent), ("class:dim", " · goal: "),
                              ("", p.goal)], width))
        if p.step:
            body.extend(wrap_lines_styled([("class:dim", "   step: "), ("", p.step)], width))
        if p.reason:
            body.extend(wrap_lines_styled([("class:dim", "   why: "), ("class:dim", p.reason)], width))
        for status, text in p.plan:
            mark, style = _PLAN_MARK.get(status, ("·", "class:dim"))
            body.extend(wrap_lines_styled([("", "   "), (style, f"{mark} {text}")], width))
        if p.problems:
            body.extend(wrap_lines_styled([("class:message.error", "   out of shape: " + "; ".join(p.problems))],
                                          width))
    room = max(0, height - 1)
    scroll = max(0, min(scroll, len(body) - room))
    end = len(body) - scroll
    start = max(0, end - room)
    out = [header, *body[start:end]]
    while len(out) < height:
        out.append(_blank(width))
    return out[:height], scroll


def wrap_lines_styled(line: Line, width: int) -> list[Line]:
    return [pad_line(part, width) for part in wrap_fragments(line, width)]


def message_line(text: str, width: int, *, error: bool = False) -> Line:
    style = "class:message.error" if error else "class:message"
    return [(style, fit(" " + text, width))]

"""Markdown in replies: styled line by line, identical whether streamed in chunks or rendered whole."""

from __future__ import annotations

import pytest
from prompt_toolkit.utils import get_cwidth

from yagent.client.tui.markdown import CODE, TEXT, style_markdown_line
from yagent.client.tui.render import LogRenderer, render_title
from yagent.client.tui.state import Entry, TaskView

REPLY = """## What it does

**main.py** prints a greeting; the project is one `main()` function, and *nothing* else:

```python
def main():
    print("**not bold** in code")
```

- a bullet that is long enough to wrap at every width under test, so its continuation lines get \
the hanging indent of the bullet text 並且包含中文字符
- 2 * 3 * 4 and snake_case_names stay as written; **an unclosed marker too
  1. a nested numbered item

> a quoted note with `code`

---
日本語 **テキスト** 終わり"""


def _shown(line) -> str:
    return "".join(text for _style, text in line)


def test_line_styles() -> None:
    heading = style_markdown_line("## What it does", False, 40)
    assert heading.fragments == [("class:md.heading", "What it does")]
    spans = style_markdown_line("**main.py** has `main()` and *one* job", False, 40).fragments
    assert spans == [(f"{TEXT} class:md.bold", "main.py"), (TEXT, " has "), (CODE, "main()"), (TEXT, " and "),
                     (f"{TEXT} class:md.italic", "one"), (TEXT, " job")]
    assert _shown(style_markdown_line("2 * 3 * 4, a*b, **open", False, 40).fragments) == "2 * 3 * 4, a*b, **open"
    bullet = style_markdown_line("  - item", False, 40)
    assert _shown(bullet.fragments) == "  • item" and bullet.indent == 4
    ordered = style_markdown_line("12. item", False, 40)
    assert _shown(ordered.fragments) == "12. item" and ordered.indent == 4
    assert _shown(style_markdown_line("> note", False, 40).fragments) == "│ note"
    assert _shown(style_markdown_line("---", False, 10).fragments) == "─" * 10
    opening = style_markdown_line("```python", False, 40)
    assert opening.fragments is None and opening.in_fence
    inside = style_markdown_line("# a comment, not a heading", True, 40)
    assert inside.fragments == [(CODE, "# a comment, not a heading")] and inside.in_fence
    assert not style_markdown_line("```", True, 40).in_fence


@pytest.mark.parametrize("width", [40, 57, 80, 120, 240])
def test_a_streamed_reply_renders_as_the_whole_reply_does_at_exact_width(width: int) -> None:
    whole = Entry("text", agent="director", run="r", text=REPLY)
    expected = LogRenderer().entry_lines(whole, width, False)
    streamed = Entry("text", agent="director", run="r")
    renderer = LogRenderer()
    for start in range(0, len(REPLY), 7):  # chunks cut through markers, fences and wide characters
        streamed.append(REPLY[start:start + 7])
        renderer.entry_lines(streamed, width, False)
    assert renderer.entry_lines(streamed, width, False) == expected
    assert all(sum(get_cwidth(t) for _s, t in line) == width for line in expected)
    text = "\n".join(_shown(line).rstrip() for line in expected)
    assert '    print("**not bold** in code")' in text  # code is shown as written
    prose = text.replace('print("**not bold** in code")', "").replace("**an unclosed", "")
    assert "**" not in prose and "`" not in prose and "```" not in text and "## " not in text
    shown = [_shown(line) for line in expected]
    first = next(i for i, line in enumerate(shown) if line.startswith("  • a bullet"))
    if width < 160:  # the bullet wraps: continuation lines hang under its text
        assert shown[first + 1].startswith("    ") and shown[first + 1][4] != " "


def test_a_truncated_title_keeps_a_gap_before_the_key_hints() -> None:
    view = TaskView()
    view.project, view.task, view.title = "/home/u/proj", "t0f9901a56", "What does this project do, in detail?"
    hints = [("ctrl+q", "detach"), ("ctrl+o", "tools"), ("ctrl+t", "plans"), ("/help", "help")]
    for width in range(40, 121):
        shown = _shown(render_title(view, width, hints))
        if "…" in shown and "ctrl+q" in shown:
            assert "…  ctrl+q" in shown, shown

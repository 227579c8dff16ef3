"""Key bindings of the main screen. Every mode's keys are filtered by that mode, so a mode owns the
keyboard without owning the event stream.

The input editor is always live, so its modal keys carry a modifier (ctrl+o, ctrl+t, ctrl+q, f2);
bare letters only act where no text field is active (question dialogs without a field, plans view).
"""

from __future__ import annotations

from collections.abc import Callable

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from .controller import TuiController

__all__ = ["DIALOG_KEYS", "build_key_bindings"]

# Keys a dialog receives by name; printable characters arrive as ("text", char) or as the char itself.
DIALOG_KEYS = ("up", "down", "left", "right", "tab", "s-tab", "enter", "escape", "backspace", "delete",
               "home", "end", "c-u")


def build_key_bindings(c: TuiController, buffer: Buffer, scroll: Callable[[int], None],
                       plan_scroll: Callable[[int], None], scroll_edge: Callable[[bool], None]) -> KeyBindings:
    kb = KeyBindings()
    main = Condition(lambda: c.mode == "main")
    dialog = Condition(lambda: c.dialog is not None and c.mode == "main")
    typing = main & ~dialog
    plans = Condition(lambda: c.mode == "plans")
    not_setup = Condition(lambda: c.mode != "setup")
    lost = Condition(lambda: c.connection == "lost")

    @kb.add("enter", filter=typing)
    def _send(event: KeyPressEvent) -> None:
        state = buffer.complete_state
        if state is not None:
            chosen = state.current_completion
            if chosen is None and len(state.completions) == 1 and buffer.text.startswith("/"):
                chosen = state.completions[0]  # the only command that fits what was typed
            if chosen is not None and chosen.text != buffer.document.get_word_before_cursor(WORD=True):
                buffer.apply_completion(chosen)
                if not chosen.text.startswith("/"):
                    return  # a completed argument is shown first; a completed command runs at once
        text = buffer.text
        if c.submit_line(text):
            buffer.append_to_history()
            buffer.reset()

    @kb.add("escape", "enter", filter=typing)
    def _newline(event: KeyPressEvent) -> None:
        buffer.insert_text("\n")

    @kb.add("c-c", filter=typing)
    def _interrupt(event: KeyPressEvent) -> None:
        if buffer.text:
            buffer.reset()
        else:
            c.detach()

    @kb.add("c-q", filter=not_setup)
    def _detach(event: KeyPressEvent) -> None:
        c.detach()

    @kb.add("c-o", filter=not_setup)
    def _tools(event: KeyPressEvent) -> None:
        c.toggle_tools()

    @kb.add("c-t", filter=not_setup)
    def _plans(event: KeyPressEvent) -> None:
        c.toggle_plans()

    @kb.add("f2", filter=main)
    def _questions(event: KeyPressEvent) -> None:
        c.reopen_questions()

    @kb.add("c-r", filter=not_setup & lost)
    def _reconnect(event: KeyPressEvent) -> None:
        c.reconnect()

    @kb.add("pageup", filter=main)
    def _page_up(event: KeyPressEvent) -> None:
        scroll(-1)

    @kb.add("pagedown", filter=main)
    def _page_down(event: KeyPressEvent) -> None:
        scroll(1)

    @kb.add("c-home", filter=main)
    def _log_top(event: KeyPressEvent) -> None:
        scroll_edge(False)

    @kb.add("c-end", filter=main)
    def _log_bottom(event: KeyPressEvent) -> None:
        scroll_edge(True)

    # `end` keeps its editor meaning while there is text after the cursor; at the end of the text (or on an
    # empty line) it takes a scrolled-back conversation back to following the stream.
    at_text_end = Condition(lambda: buffer.cursor_position >= len(buffer.text))
    scrolled = Condition(lambda: c.scroll_top is not None)

    @kb.add("end", filter=typing & scrolled & at_text_end)
    def _follow(event: KeyPressEvent) -> None:
        scroll_edge(True)

    # -- dialogs -----------------------------------------------------------------------------------

    for name in DIALOG_KEYS:
        kb.add(name, filter=dialog)(_forward(c, name))

    @kb.add(Keys.Any, filter=dialog)
    def _dialog_char(event: KeyPressEvent) -> None:
        data = event.data
        if c.dialog is not None and c.dialog.takes_text:
            c.dialog_key("text", data)
        else:
            c.dialog_key(data)

    @kb.add(Keys.BracketedPaste, filter=dialog)
    def _dialog_paste(event: KeyPressEvent) -> None:
        c.dialog_key("paste", event.data)

    # -- plans view --------------------------------------------------------------------------------

    @kb.add("f", filter=plans)
    def _filter(event: KeyPressEvent) -> None:
        c.next_plan_filter()

    @kb.add("escape", filter=plans)
    @kb.add("q", filter=plans)
    def _close_plans(event: KeyPressEvent) -> None:
        c.toggle_plans()

    @kb.add("pageup", filter=plans)
    def _plans_up(event: KeyPressEvent) -> None:
        plan_scroll(1)

    @kb.add("pagedown", filter=plans)
    def _plans_down(event: KeyPressEvent) -> None:
        plan_scroll(-1)

    @kb.add(Keys.Any, filter=plans)
    def _swallow(event: KeyPressEvent) -> None:
        """Other keys do nothing in the plans view (they must not leak into the hidden input)."""

    return kb


def _forward(c: TuiController, name: str) -> Callable[[KeyPressEvent], None]:
    def handler(event: KeyPressEvent) -> None:
        c.dialog_key(name)

    return handler

"""Slash commands: the one table the input line, the completer and `/help` all read.

A line starting with `/` is a command or an error, never text and never a search: an unknown
command is reported with the list of known ones. A message that must start with a slash is
written with two (`//etc/hosts is odd` sends `/etc/hosts is odd`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

__all__ = ["COMMANDS", "Command", "Parsed", "SlashCompleter", "parse_input"]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    argument: str = ""


COMMANDS: tuple[Command, ...] = (
    Command("pause", "pause every run of this task at its next step"),
    Command("continue", "continue a paused task"),
    Command("cancel", "cancel the current turn (the task stays and can take another message)"),
    Command("compact", "compact the running turn's context now: its history is summarised before the next model call"),
    Command("context", "show what the last model request held, part by part, in tokens"),
    Command("resume", "pick an earlier task of this project and attach to it"),
    Command("new", "start a new session in this project with your next message"),
    Command("model", "choose the provider for the next turns", "[PROVIDER|default]"),
    Command("diff", "show what this task's agents changed in the project, per sub-task and file"),
    Command("undo", "take back the last sub-task's changes (N: back to checkpoint N), after showing them",
            "[N] [--force]"),
    Command("blueprint", "show the project's modules and import edges, and what Repo runs noted of them", "[MODULE]"),
    Command("mcp", "show the MCP servers yagentd runs for this project: state, tools, errors"),
    Command("skills", "show the skills agents see, where each comes from and what was not read"),
    Command("setup", "open the setup wizard (providers and preferences)"),
    Command("detach", "leave; the task keeps running in the daemon"),
    Command("help", "list commands and keys"),
)

_BY_NAME = {c.name: c for c in COMMANDS}


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a submitted input line is: text to send, a command, or a mistake to report."""

    kind: str  # text | command | unknown | empty
    text: str = ""
    name: str = ""
    argument: str = ""


def parse_input(raw: str) -> Parsed:
    text = raw.strip()
    if not text:
        return Parsed("empty")
    if text.startswith("//"):
        return Parsed("text", text=raw.strip()[1:])
    if not text.startswith("/"):
        return Parsed("text", text=raw.strip())
    head, _sep, rest = text[1:].partition(" ")
    name = head.strip().lower()
    if name in _BY_NAME:
        return Parsed("command", name=name, argument=rest.strip())
    return Parsed("unknown", name=head)


class SlashCompleter(Completer):
    """Completes command names after `/`, and provider names after `/model `."""

    def __init__(self, providers: Callable[[], Iterable[str]] = lambda: ()) -> None:
        self.providers = providers

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or text.startswith("//") or "\n" in text:
            return
        if " " not in text:
            word = text[1:].lower()
            for cmd in COMMANDS:
                if cmd.name.startswith(word):
                    yield Completion(f"/{cmd.name}", start_position=-len(text), display=f"/{cmd.name}",
                                     display_meta=cmd.summary)
            return
        head, _sep, arg = text.partition(" ")
        if head == "/model" and " " not in arg:
            for name in [*self.providers(), "default"]:
                if name.startswith(arg):
                    yield Completion(name, start_position=-len(arg), display_meta="provider"
                                     if name != "default" else "drop the override")

"""One task's board as a run sees it: the `Board` port its tools use and the index its loop shows.

Board scope = the task (every turn and every delegation of a task share one board; board id = task id).
Every method asks the kill switches first (`ipc.board_switches`), so `YAGENT_BLACKBOARD=0` stops every
read, write and index at once, and `YAGENT_ARTIFACT_DISABLE=1` keeps every deliverable inline. A board
that cannot write (disk full, a damaged directory) never fails a delegation: the parent gets the
child's result as it came, and the run's log says why no note was kept.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yagent.ipc.board_settings import BoardSettings
from yagent.ipc.board_switches import artifacts_enabled, blackboard_enabled
from yagent.ipc.messages import RunOutcome
from yagent.ipc.state_layout import artifacts_dir, notes_dir
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.context.tokens import count_tokens
from yagent.workers.llm import Message
from yagent.workers.tools.context import DelegationRecord
from yagent.workers.tools.handoff import BLUEPRINT_ACCOUNT, delegation_status

from .artifact_store import ArtifactStore, artifact_summary
from .board_index import IndexEntry, IndexLines, IndexOptions, build_index, format_index_line, render_index
from .context_refs import resolve_refs
from .count_cap import enforce_count_cap
from .handoff_parse import Handoff, parse_handoff, render_handoff
from .note_store import NoteRef, NoteStore, agent_dir_name

__all__ = ["TaskBoard"]

log = logging.getLogger(__name__)

_OFF = ("the blackboard is switched off (YAGENT_BLACKBOARD=0): there are no notes to read. Work from the "
        "delegation results in your conversation.")
_ARTIFACTS_OFF = "artifacts are switched off (YAGENT_ARTIFACT_DISABLE=1): deliverables stay in the results."
# A child stopped by a pause or the daemon going away has left no deliverable yet: recovery accounts for it.
_NO_NOTE_STOPS = (StopReason.PAUSED, StopReason.CANCELLED, StopReason.INTERRUPTED)


class TaskBoard:
    def __init__(self, home: Path, task: str, settings: BoardSettings,
                 environ: Mapping[str, str] | None = None) -> None:
        self.task = task
        self.settings = settings
        self.notes = NoteStore(notes_dir(home, task))
        self.artifacts = ArtifactStore(artifacts_dir(home, task))
        self._environ = environ
        self._options = IndexOptions.from_settings(settings)
        self._lines = IndexLines()

    @property
    def enabled(self) -> bool:
        return blackboard_enabled(self._environ)

    # -- the index ----------------------------------------------------------------------------------

    def index_text(self) -> str:
        if not self.enabled:
            return ""
        return render_index(build_index(self.notes, self._options), self._options, self._lines)

    def index_messages(self) -> list[Message]:
        """The index as the extra message of one model call (none when the board is empty or off)."""
        try:
            text = self.index_text()
        except OSError as exc:  # a board the disk cannot read costs the call its index, not the run
            log.warning("board index of task %s left out of this call: %s", self.task, exc)
            return []
        return [Message.user(text)] if text else []

    # -- writing --------------------------------------------------------------------------------------

    def record_delegation(self, outcome: RunOutcome, task: str) -> DelegationRecord:
        """Write the delegation's note (and artifact); never raises for a board that cannot be written."""
        if not self.enabled or not _leaves_a_note(outcome):
            return DelegationRecord(outcome)
        try:
            return self._record(outcome, task)
        except OSError as exc:
            log.warning("no note kept for %s's result in %s: %s", outcome.agent, self.notes.root, exc)
            return DelegationRecord(outcome)

    def _record(self, outcome: RunOutcome, task: str) -> DelegationRecord:
        body = outcome.output or (f"(no output) {outcome.error}" if outcome.error else "")
        account = outcome.data.get(BLUEPRINT_ACCOUNT) if isinstance(outcome.data, dict) else None
        if isinstance(account, str) and account:  # the same line the parent read: it survives its compaction
            body += f"\n\n> [blueprint] {account}"
        handoff = _note_handoff(outcome)
        exit_summary = (outcome.data.get("exit") or {}).get("summary") if isinstance(outcome.data, dict) else None
        summary = artifact_summary(handoff, str(exit_summary or "") or body, self.settings.summary_max_runes)
        artifact = ""
        budget = self.settings.artifact_budget_tokens
        if artifacts_enabled(self._environ) and budget > 0 and outcome.output and count_tokens(outcome.output) > budget:
            artifact = self.artifacts.put(outcome.output)
        status = _parent_status(outcome)
        ref = self.notes.write(outcome.agent or "agent", handoff, body, task=task,
                               artifacts=(artifact,) if artifact else (), summary="" if handoff else summary,
                               status="" if handoff else status.value)
        enforce_count_cap(self.notes, self.settings.max_notes_per_board)
        if not artifact:
            return DelegationRecord(outcome, note=ref.handle)
        tokens = count_tokens(outcome.output)
        shown = (f"{summary}\n\n[The full deliverable ({tokens} tokens) is stored as artifact:{artifact}. Read it "
                 f"with read_artifact(id=\"{artifact}\"), page by page; its note is {ref.handle}.]")
        return DelegationRecord(dataclasses.replace(outcome, output=shown), note=ref.handle, artifact=artifact)

    def delegation_task(self, task: str, refs: list[str]) -> tuple[str, str]:
        """(the child's task with the index and the stressed refs before it, the header for the result)."""
        if not self.enabled:
            return task, ("[context_refs ignored: the blackboard is switched off]" if refs else "")
        pack = resolve_refs(refs, self.notes, self.artifacts if artifacts_enabled(self._environ) else None)
        prefix = [part for part in (self.index_text(), pack.text) if part]
        if not prefix:
            return task, pack.header()
        return "\n\n".join([*prefix, "Your task:\n" + task]), pack.header()

    # -- reading ----------------------------------------------------------------------------------------

    def _ref(self, ref: str) -> NoteRef:
        text = ref.strip().removeprefix("note:")
        agent, _, stem = text.rpartition("/")
        found = [r for r in self.notes.refs() if r.stem == stem and (not agent or r.agent == agent_dir_name(agent))]
        if not found:
            raise LookupError(f"no note {ref!r} on this task's board; list_notes shows the refs there are")
        return found[-1]

    def read_note(self, ref: str, offset: int = 0, limit: int = 8_000) -> str:
        if not self.enabled:
            raise LookupError(_OFF)
        note_ref = self._ref(ref)
        note = self.notes.read(note_ref)
        if note is None:
            raise LookupError(f"the note {ref!r} cannot be read (it is gone or not a regular file)")
        lines = [f"{note.ref.handle} — by {note.ref.agent}" + (f"; task: {_one_line(note.task, 300)}" if note.task
                                                               else ""),
                 render_handoff(note.handoff)]
        if note.artifacts:
            lines.append("Artifacts: " + ", ".join(f"artifact:{a}" for a in note.artifacts))
        if note.damaged:
            lines.append(f"(this note is damaged: {note.damaged})")
        body = note.body
        start = min(max(offset, 0), len(body))
        page = body[start: start + max(limit, 1)]
        end = start + len(page)
        lines.append(f"--- body, characters {start}–{end} of {len(body)} ---")
        lines.append(page)
        if end < len(body):
            lines.append(f"[more: read_note(ref=\"{note.ref.handle}\", offset={end})]")
        return "\n".join(lines)

    def list_notes(self) -> str:
        if not self.enabled:
            raise LookupError(_OFF)
        lines = []
        for ref in self.notes.refs():
            note = self.notes.read(ref, head_only=True)
            if note is not None:
                brief = dataclasses.replace(note.handoff, facts=())
                lines.append(format_index_line(IndexEntry(ref, brief, note.artifacts), self._options.line_chars))
        if not lines:
            return "This task's board has no notes yet (a note is written when a delegation returns)."
        return f"{len(lines)} notes on this task's board, oldest first:\n" + "\n".join(lines)

    def put_image(self, data: bytes, suffix: str) -> str:
        """A screenshot kept among the task's artifacts; its file's path."""
        return str(self.artifacts.put_image(data, suffix))

    def read_artifact(self, artifact_id: str, offset: int = 0, limit: int = 8_000) -> str:
        if not self.enabled:
            raise LookupError(_OFF)
        if not artifacts_enabled(self._environ):
            raise LookupError(_ARTIFACTS_OFF)
        page = self.artifacts.read(artifact_id, offset, limit)
        if page is None:
            raise LookupError(f"no artifact {artifact_id!r} in this task (an id looks like 20261203-173000-1a2b3c4d; "
                              "list_notes shows the artifacts notes point to)")
        end = page.offset + len(page.text)
        more = (f"\n[more: read_artifact(id=\"{page.artifact_id}\", offset={page.next_offset})]"
                if page.next_offset is not None else "")
        return f"artifact:{page.artifact_id}, characters {page.offset}–{end} of {page.total}\n{page.text}{more}"


def _leaves_a_note(outcome: RunOutcome) -> bool:
    """A finished or failed child leaves a note; one paused or stopped before it produced anything does not."""
    if outcome.status in (RunStatus.DONE, RunStatus.FAILED) and outcome.stop_reason not in _NO_NOTE_STOPS:
        return bool(outcome.output or outcome.error or outcome.handoff)
    return False


def _note_handoff(outcome: RunOutcome) -> Handoff | None:
    """The child's hand-off with the status its parent reads; None when it left no usable one."""
    raw: Any = outcome.handoff
    if not isinstance(raw, dict):
        return None
    handoff = parse_handoff({"schema": 2, "handoff": raw})
    if handoff.degraded:
        return None
    return dataclasses.replace(handoff, status=_parent_status(outcome))


def _parent_status(outcome: RunOutcome) -> HandoffStatus:
    """The status the parent reads (tools/handoff.delegation_status); a child stopped short is partial."""
    status = delegation_status(outcome)
    return HandoffStatus.PARTIAL if status is HandoffStatus.STOPPED else status


def _one_line(text: str, cap: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= cap else text[: cap - 1] + "…"

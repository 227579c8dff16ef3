"""The hand-off board: one note per delegation, artifacts for long deliverables, and the index every
model call of the task sees. See README.md in this folder for the boundary and the invariants."""

from .artifact_store import ARTIFACT_ID, ArtifactPage, ArtifactStore, artifact_summary
from .board_index import INDEX_HEADER, IndexEntry, IndexOptions, build_index, format_index_line, render_index
from .context_refs import MAX_REFS, ContextPack, resolve_refs
from .count_cap import enforce_count_cap
from .handoff_parse import DEGRADED_ABSENT, DEGRADED_V1, Fact, Handoff, parse_handoff, render_handoff
from .note_store import NOTE_SUFFIX, TMP_SUFFIX, Note, NoteRef, NoteStore
from .task_board import TaskBoard

__all__ = [
    "ARTIFACT_ID",
    "DEGRADED_ABSENT",
    "DEGRADED_V1",
    "INDEX_HEADER",
    "MAX_REFS",
    "NOTE_SUFFIX",
    "TMP_SUFFIX",
    "ArtifactPage",
    "ArtifactStore",
    "ContextPack",
    "Fact",
    "Handoff",
    "IndexEntry",
    "IndexOptions",
    "Note",
    "NoteRef",
    "NoteStore",
    "TaskBoard",
    "artifact_summary",
    "build_index",
    "enforce_count_cap",
    "format_index_line",
    "parse_handoff",
    "render_handoff",
    "render_index",
    "resolve_refs",
]

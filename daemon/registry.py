"""The daemon's durable registry: projects, tasks, turns and runs in SQLite (WAL).

Only the daemon writes it, from its event-loop thread, so there is one connection and no locking
beyond SQLite's own. It survives restarts; on start, whatever a previous daemon left in flight is
marked interrupted (`mark_interrupted`). Its file format — identity, version, migrations and the checks
at open — lives in `registry_schema`; what its failures mean for the user, in `registry_errors`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.vocabulary import RunStatus, StopReason, SubagentState, TaskState

from .deferred_writes import DeferredWrites
from .registry_errors import RegistryUnreadable
from .registry_schema import open_registry
from .run_accounting import RunUsage

__all__ = ["MAX_LIST_LIMIT", "CheckpointRow", "Interrupted", "LeftoverMcpServer", "LeftoverRun", "ProjectRow",
           "Registry", "RegistryUnreadable", "RunRow", "SubagentRow",
           "TaskRow", "TurnRow", "new_run_id", "new_subagent_id", "new_task_id", "project_id_for"]

MAX_LIST_LIMIT = 1000  # tasks one `list_tasks` returns at most
_LIVE_RUN = (RunStatus.QUEUED.value, RunStatus.STARTING.value, RunStatus.RUNNING.value)
_LIVE_TASK = (TaskState.RUNNING.value, TaskState.PAUSED.value, TaskState.WAITING.value, TaskState.BACKGROUND.value)


def project_id_for(path: Path) -> str:
    """A filesystem-safe, stable id: the folder name plus a short hash of the absolute path."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.name or "root").strip("-")[:40] or "root"
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{name}-{digest}"


def new_task_id() -> str:
    # Fixed length: the id is the PUB topic, and SUB matches topics by prefix.
    return "t" + uuid.uuid4().hex[:9]


def new_run_id() -> str:
    return "r" + uuid.uuid4().hex[:11]


def new_subagent_id() -> str:
    return "a" + uuid.uuid4().hex[:9]


@dataclass(slots=True)
class ProjectRow:
    id: str
    path: str


@dataclass(slots=True)
class TaskRow:
    id: str
    project_id: str
    project_path: str
    title: str
    state: str
    created_at: float
    updated_at: float
    last_seq: int


@dataclass(slots=True)
class RunRow:
    id: str
    task_id: str
    turn: int
    parent_run: str | None
    agent: str
    status: str
    stop_reason: str
    pid: int
    created_at: float
    started_at: float
    ended_at: float
    usage: RunUsage = field(default_factory=RunUsage)  # recorded when the run ended
    unconfined: str = ""  # why the kernel did not confine the run ("" when it did, or before it started)


@dataclass(slots=True)
class TurnRow:
    task_id: str
    turn: int
    text: str
    state: str
    root_run: str
    output: str
    created_at: float
    ended_at: float
    agent: str = ""  # the root run's agent kind ("" before turns recorded it)
    yolo: str = "none"
    resumes: int = 0  # the interrupted turn this one continues; 0 for a turn of its own
    model_override: str = ""  # the provider the turn was started on (`/model`), "" for the configured one


@dataclass(slots=True)
class SubagentRow:
    """One continuable sub-agent of a task: who owns it (the sub-agent that delegated to it, "" for the task's
    root agent), what configuration its conversation was written under, where it stands and its newest run."""

    id: str
    task_id: str
    owner: str
    agent: str
    reuse_key: str
    signature: str
    state: str
    last_run: str
    task: str
    conclusion: str
    handoff: str  # JSON of its newest hand-off, cut to a budget ("" for none)
    background: str  # a TurnEndChoice while its newest run works in the background ("" otherwise)
    unread: bool  # a background result no turn has been handed yet
    interrupted: bool  # a background run a stopped daemon interrupted: a resumed turn starts it again
    created_at: float
    updated_at: float


@dataclass(slots=True)
class LeftoverRun:
    """A run a previous daemon started and never saw end: its worker's pid and process start time."""

    id: str
    pid: int
    worker_started_at: float  # 0: recorded before start times were (the pid alone proves nothing)


@dataclass(slots=True)
class LeftoverMcpServer:
    """An MCP server process a daemon started and did not see end: what identifies it and its group."""

    project_id: str
    name: str
    pid: int  # also its process group and session id: it was started in a session of its own
    pid_started_at: float
    marker: str  # the value of YAGENT_MCP_SERVER in its environment (and its children's)


@dataclass(slots=True)
class InterruptedRun:
    id: str
    task_id: str
    agent: str
    parent_run: str | None
    call_id: str


@dataclass(slots=True)
class InterruptedTurn:
    task_id: str
    turn: int
    root_run: str


@dataclass(slots=True)
class CheckpointRow:
    """One git checkpoint yagent made for a task: the commit is the truth, the ref keeps git from collecting it."""

    task_id: str
    number: int
    project_id: str
    turn: int
    run_id: str
    agent: str
    kind: str  # a CheckpointKind
    label: str
    ref: str
    commit: str
    common_dir: str  # the repository it lives in
    head: str  # where HEAD was
    skipped: dict[str, str]  # files not read into it: path -> why
    created_at: float
    undoes: str = ""  # a safety checkpoint made by `yagent undo`: the run whose changes that undo took back


@dataclass(slots=True)
class Interrupted:
    """What `mark_interrupted` changed, so followers of those tasks can be told their turn ended."""

    runs: list[InterruptedRun]
    turns: list[InterruptedTurn]

    def __bool__(self) -> bool:
        return bool(self.runs or self.turns)


# How long a write waits for a lock held by another process (a backup, an `sqlite3` shell) before it
# fails. Every registry call runs on the event loop, so this is also how long the daemon can stall.
BUSY_TIMEOUT = 1.0

log = logging.getLogger(__name__)


class Registry:
    def __init__(self, db_path: Path) -> None:
        self.path = db_path
        self._db = open_registry(db_path, BUSY_TIMEOUT)  # checked, identified and migrated, or refused
        self._db.row_factory = sqlite3.Row
        self.deferred = DeferredWrites(self._db, db_path)

    def close(self) -> None:
        if self.deferred:
            self.deferred.flush(force=True)
        if self.deferred:
            log.error("%d registry updates could not be written to %s before exit; the next start marks the "
                      "runs they concern as interrupted", len(self.deferred), self.path)
        self._db.close()

    # -- projects -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """Statements that take effect all together or not at all (the connection commits each one alone)."""
        self._db.execute("BEGIN")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled back itself (a full disk): nothing left to undo
                self._db.execute("ROLLBACK")
            raise

    def ensure_project(self, path: Path) -> ProjectRow:
        row = self._db.execute("SELECT id, path FROM projects WHERE path = ?", (str(path),)).fetchone()
        if row:
            return ProjectRow(row["id"], row["path"])
        pid = project_id_for(path)
        self._db.execute("INSERT INTO projects(id, path, created_at) VALUES (?, ?, ?)", (pid, str(path), time.time()))
        return ProjectRow(pid, str(path))

    # -- tasks --------------------------------------------------------------------------------------

    def create_task(self, project: ProjectRow, title: str) -> TaskRow:
        now = time.time()
        tid = new_task_id()
        self._db.execute(
            "INSERT INTO tasks(id, project_id, title, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (tid, project.id, title, TaskState.IDLE.value, now, now),
        )
        return TaskRow(tid, project.id, project.path, title, TaskState.IDLE.value, now, now, 0)

    def _task_from(self, row: sqlite3.Row) -> TaskRow:
        return TaskRow(row["id"], row["project_id"], row["path"], row["title"], row["state"],
                       row["created_at"], row["updated_at"], row["last_seq"])

    def get_task(self, task_id: str) -> TaskRow | None:
        row = self._db.execute(
            "SELECT t.*, p.path FROM tasks t JOIN projects p ON p.id = t.project_id WHERE t.id = ?", (task_id,)
        ).fetchone()
        return self._task_from(row) if row else None

    def find_tasks_by_prefix(self, prefix: str) -> list[str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._db.execute(
            "SELECT id FROM tasks WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 10", (escaped + "%",)
        ).fetchall()
        return [r["id"] for r in rows]

    def task_ids_in_states(self, states: Iterable[str]) -> set[str]:
        wanted = [str(state) for state in states]
        rows = self._db.execute(f"SELECT id FROM tasks WHERE state IN ({', '.join('?' * len(wanted))})",
                                wanted).fetchall()
        return {row["id"] for row in rows}

    def list_tasks(self, project_path: str | None = None, limit: int = 50) -> list[TaskRow]:
        sql = "SELECT t.*, p.path FROM tasks t JOIN projects p ON p.id = t.project_id"
        args: list[Any] = []
        if project_path is not None:
            sql += " WHERE p.path = ?"
            args.append(project_path)
        sql += " ORDER BY t.updated_at DESC LIMIT ?"
        args.append(max(1, min(limit, MAX_LIST_LIMIT)))
        return [self._task_from(r) for r in self._db.execute(sql, args).fetchall()]

    def set_task_state(self, task_id: str, state: str) -> None:
        self.deferred.record("UPDATE tasks SET state = ?, updated_at = ? WHERE id = ?", (state, time.time(), task_id))

    def task_seq_floor(self, task_id: str) -> int:
        """The task's last seq as recorded, 0 if unknown; never raises (publishing must not depend on it)."""
        try:
            row = self._db.execute("SELECT last_seq FROM tasks WHERE id = ?", (task_id,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("cannot read task %s's last seq from %s (%s); its seq continues from its event log",
                        task_id, self.path, exc)
            return 0
        return row["last_seq"] if row else 0

    def set_task_last_seq(self, task_id: str, seq: int) -> None:
        self.deferred.record("UPDATE tasks SET last_seq = ? WHERE id = ? AND last_seq < ?", (seq, task_id, seq))

    # -- turns --------------------------------------------------------------------------------------

    def add_turn(self, task_id: str, text: str, *, agent: str = "", yolo: str = "none", resumes: int = 0,
                 model_override: str = "") -> int:
        row = self._db.execute("SELECT COALESCE(MAX(idx), 0) AS n FROM turns WHERE task_id = ?", (task_id,)).fetchone()
        idx = int(row["n"]) + 1
        self._db.execute(
            "INSERT INTO turns(task_id, idx, text, state, created_at, agent, yolo, resumes, model_override) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (task_id, idx, text, TaskState.RUNNING.value, time.time(), agent, yolo, resumes, model_override),
        )
        return idx

    def set_turn_root(self, task_id: str, idx: int, run_id: str) -> None:
        self.deferred.record("UPDATE turns SET root_run = ? WHERE task_id = ? AND idx = ?", (run_id, task_id, idx))

    def finish_turn(self, task_id: str, idx: int, state: str, output: str) -> None:
        self.deferred.record(
            "UPDATE turns SET state = ?, output = ?, ended_at = ? WHERE task_id = ? AND idx = ?",
            (state, output, time.time(), task_id, idx),
        )

    def last_turn(self, task_id: str) -> int | None:
        row = self._db.execute("SELECT MAX(idx) AS n FROM turns WHERE task_id = ?", (task_id,)).fetchone()
        return row["n"]

    def turns(self, task_id: str) -> list[TurnRow]:
        rows = self._db.execute("SELECT * FROM turns WHERE task_id = ? ORDER BY idx", (task_id,)).fetchall()
        return [TurnRow(task_id, r["idx"], r["text"], r["state"], r["root_run"], r["output"], r["created_at"],
                        r["ended_at"], r["agent"], r["yolo"], r["resumes"], r["model_override"]) for r in rows]

    # -- runs ---------------------------------------------------------------------------------------

    def add_run(self, run_id: str, task_id: str, turn: int, parent: str | None, agent: str, call_id: str,
                text: str) -> None:
        self._db.execute(
            "INSERT INTO runs(id, task_id, turn, parent_run, agent, status, call_id, input, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, task_id, turn, parent, agent, RunStatus.QUEUED.value, call_id, text, time.time()),
        )

    def run_started(self, run_id: str, pid: int, worker_started_at: float, unconfined: str = "") -> None:
        """The run's worker process exists: its pid and its start time (which tells it from a later process
        reusing the pid), and why the kernel does not confine it ("" when it does)."""
        self.deferred.record("UPDATE runs SET status = ?, pid = ?, worker_started_at = ?, started_at = ?, "
                             "unconfined = ? WHERE id = ?",
                             (RunStatus.STARTING.value, pid, worker_started_at, time.time(), unconfined, run_id))

    def run_running(self, run_id: str) -> None:
        self.deferred.record("UPDATE runs SET status = ? WHERE id = ?", (RunStatus.RUNNING.value, run_id))

    def finish_run(self, run_id: str, status: str, stop_reason: str, output: str, error: str,
                   usage: RunUsage | None = None, cpu_seconds: float = 0.0) -> None:
        u = usage or RunUsage()
        self.deferred.record(
            "UPDATE runs SET status = ?, stop_reason = ?, output = ?, error = ?, ended_at = ?, requests = ?, "
            "input_tokens = ?, cached_input_tokens = ?, output_tokens = ?, cost_usd = ?, unpriced_requests = ?, "
            "slot_wait_seconds = ?, cpu_seconds = ? WHERE id = ?",
            (status, stop_reason, output, error, time.time(), u.requests, u.input_tokens, u.cached_input_tokens,
             u.output_tokens, u.cost_usd, u.unpriced_requests, u.slot_wait_seconds, cpu_seconds, run_id),
        )

    def spent_since(self, since: float) -> float:
        """Dollars the runs that ended since `since` (wall-clock time) cost; 0 when the registry cannot say."""
        try:
            row = self._db.execute("SELECT COALESCE(SUM(cost_usd), 0) AS spent FROM runs WHERE ended_at >= ?",
                                   (since,)).fetchone()
        except sqlite3.DatabaseError as exc:
            log.error("cannot add up today's spending from %s: %s; the day's limit counts from now", self.path, exc)
            return 0.0
        return float(row["spent"])

    def run_for_call(self, task_id: str, parent_run: str, call_id: str) -> str | None:
        """The newest run `parent_run` started for its tool call `call_id` (what a replay of that call continues)."""
        row = self._db.execute("SELECT id FROM runs WHERE task_id = ? AND parent_run = ? AND call_id = ? "
                               "ORDER BY created_at DESC LIMIT 1", (task_id, parent_run, call_id)).fetchone()
        return row["id"] if row is not None else None

    def runs_of(self, task_id: str, turn: int | None = None) -> list[RunRow]:
        sql, args = "SELECT * FROM runs WHERE task_id = ?", [task_id]
        if turn is not None:
            sql += " AND turn = ?"
            args.append(turn)
        rows = self._db.execute(sql + " ORDER BY created_at", args).fetchall()
        return [_run_from(r) for r in rows]

    def runs_by_id(self, run_ids: Iterable[str]) -> list[RunRow]:
        ids = list(run_ids)
        if not ids:
            return []
        rows = self._db.execute(f"SELECT * FROM runs WHERE id IN ({', '.join('?' * len(ids))}) ORDER BY created_at",
                                ids).fetchall()
        return [_run_from(r) for r in rows]

    # -- sub-agents ---------------------------------------------------------------------------------

    def add_subagent(self, row: SubagentRow) -> None:
        self._db.execute(
            "INSERT INTO subagents(id, task_id, owner, agent, reuse_key, signature, state, last_run, task, "
            "conclusion, handoff, background, unread, interrupted, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, row.task_id, row.owner, row.agent, row.reuse_key, row.signature, row.state, row.last_run,
             row.task, row.conclusion, row.handoff, row.background, int(row.unread), int(row.interrupted),
             row.created_at, row.updated_at))

    def subagent(self, task_id: str, subagent_id: str) -> SubagentRow | None:
        row = self._db.execute("SELECT * FROM subagents WHERE task_id = ? AND id = ?",
                               (task_id, subagent_id)).fetchone()
        return _subagent_from(row) if row is not None else None

    def subagents_of(self, task_id: str, owner: str | None = None) -> list[SubagentRow]:
        """The task's sub-agents (of one owner when given), oldest first."""
        sql, args = "SELECT * FROM subagents WHERE task_id = ?", [task_id]
        if owner is not None:
            sql += " AND owner = ?"
            args.append(owner)
        return [_subagent_from(r) for r in self._db.execute(sql + " ORDER BY created_at, id", args).fetchall()]

    def update_subagent(self, row: SubagentRow) -> None:
        """Write what changed of a sub-agent: a progress write, kept and retried while state.db is busy."""
        self.deferred.record(
            "UPDATE subagents SET reuse_key = ?, signature = ?, state = ?, last_run = ?, conclusion = ?, handoff = ?, "
            "background = ?, unread = ?, interrupted = ?, updated_at = ? WHERE id = ?",
            (row.reuse_key, row.signature, row.state, row.last_run, row.conclusion, row.handoff, row.background,
             int(row.unread), int(row.interrupted), row.updated_at, row.id))

    def forget_subagents(self, ids: Iterable[str]) -> None:
        for subagent_id in ids:
            self._db.execute("DELETE FROM subagents WHERE id = ?", (subagent_id,))

    def run_row(self, run_id: str) -> RunRow | None:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run_from(row) if row is not None else None

    def run_result(self, run_id: str) -> tuple[str, str, str, str] | None:
        """(status, stop reason, output, error) a run ended with, as recorded."""
        row = self._db.execute("SELECT status, stop_reason, output, error FROM runs WHERE id = ?", (run_id,)).fetchone()
        return (row["status"], row["stop_reason"], row["output"], row["error"]) if row is not None else None

    # -- recovery -----------------------------------------------------------------------------------

    def unfinished_runs(self) -> list[LeftoverRun]:
        """Runs recorded as started and not ended: at start, those a dead predecessor left behind."""
        self.deferred.flush(force=True)
        marks = ",".join("?" * len(_LIVE_RUN))
        rows = self._db.execute(f"SELECT id, pid, worker_started_at FROM runs WHERE status IN ({marks}) AND pid > 0 "
                                "ORDER BY created_at", _LIVE_RUN).fetchall()
        return [LeftoverRun(r["id"], r["pid"], r["worker_started_at"]) for r in rows]

    def mark_interrupted(self) -> Interrupted:
        """Runs, turns and tasks a previous daemon left in flight become interrupted; returns what changed."""
        # Deferred updates are older than this mark: written after it, a stale "running" would undo it.
        self.deferred.flush(force=True)
        now = time.time()
        marks = ",".join("?" * len(_LIVE_RUN))
        tmarks = ",".join("?" * len(_LIVE_TASK))
        runs = [InterruptedRun(r["id"], r["task_id"], r["agent"], r["parent_run"], r["call_id"] or "")
                for r in self._db.execute(
                    f"SELECT id, task_id, agent, parent_run, call_id FROM runs WHERE status IN ({marks}) "
                    "ORDER BY created_at", _LIVE_RUN).fetchall()]
        turns = [InterruptedTurn(r["task_id"], r["idx"], r["root_run"] or "")
                 for r in self._db.execute(
                     f"SELECT task_id, idx, root_run FROM turns WHERE state IN ({tmarks})", _LIVE_TASK).fetchall()]
        with self._transaction():
            self._db.execute(
                f"UPDATE runs SET status = ?, stop_reason = ?, ended_at = ? WHERE status IN ({marks})",
                (RunStatus.INTERRUPTED.value, StopReason.INTERRUPTED.value, now, *_LIVE_RUN),
            )
            self._db.execute(
                f"UPDATE turns SET state = ?, ended_at = ? WHERE state IN ({tmarks})",
                (TaskState.INTERRUPTED.value, now, *_LIVE_TASK),
            )
            self._db.execute(
                f"UPDATE tasks SET state = ?, updated_at = ? WHERE state IN ({tmarks})",
                (TaskState.INTERRUPTED.value, now, *_LIVE_TASK),
            )
            # A background sub-agent that was working is stopped, and marked for the resumed turn to start again.
            self._db.execute(
                "UPDATE subagents SET state = ?, interrupted = (background != ''), updated_at = ? WHERE state = ?",
                (SubagentState.STOPPED.value, now, SubagentState.WORKING.value))
        return Interrupted(runs, turns)

    # -- git checkpoints --------------------------------------------------------------------------------

    def next_checkpoint_number(self, task_id: str) -> int:
        row = self._db.execute("SELECT MAX(number) FROM checkpoints WHERE task_id = ?", (task_id,)).fetchone()
        return int(row[0] or 0) + 1

    def add_checkpoint(self, row: CheckpointRow) -> None:
        self._db.execute(
            "INSERT INTO checkpoints(task_id, number, project_id, turn, run_id, agent, kind, label, undoes, ref, "
            "commit_id, common_dir, head, skipped, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.task_id, row.number, row.project_id, row.turn, row.run_id, row.agent, row.kind, row.label,
             row.undoes, row.ref, row.commit, row.common_dir, row.head, json.dumps(row.skipped), row.created_at))

    def checkpoints(self, task_id: str) -> list[CheckpointRow]:
        """The task's checkpoints, oldest first."""
        rows = self._db.execute("SELECT * FROM checkpoints WHERE task_id = ? ORDER BY number", (task_id,)).fetchall()
        return [_checkpoint_from(r) for r in rows]

    def checkpoints_before(self, when: float) -> list[CheckpointRow]:
        """Every task's checkpoints made before `when` (for the retention prune)."""
        rows = self._db.execute("SELECT * FROM checkpoints WHERE created_at < ? ORDER BY task_id, number",
                                (when,)).fetchall()
        return [_checkpoint_from(r) for r in rows]

    def forget_checkpoints(self, rows: Iterable[CheckpointRow]) -> None:
        tasks = set()
        for row in rows:
            self._db.execute("DELETE FROM checkpoints WHERE task_id = ? AND number = ?", (row.task_id, row.number))
            tasks.add(row.task_id)
        for task_id in tasks:  # noted files outlive no checkpoint that needs them
            self._db.execute("DELETE FROM checkpoint_paths WHERE task_id = ? AND NOT EXISTS "
                             "(SELECT 1 FROM checkpoints WHERE task_id = ?)", (task_id, task_id))

    def set_checkpoint_commit(self, task_id: str, number: int, commit: str) -> None:
        """Checkpoint `number` is now `commit` (the same state with the prior content of files agents wrote)."""
        self._db.execute("UPDATE checkpoints SET commit_id = ? WHERE task_id = ? AND number = ?",
                         (commit, task_id, number))

    def note_checkpoint_paths(self, task_id: str, paths: Iterable[str], since: int) -> None:
        """Files agents write inside ignored directories: read into the task's checkpoints from `since` on."""
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO checkpoint_paths(task_id, path, since) VALUES (?, ?, ?)",
                                 [(task_id, p, since) for p in paths])

    def checkpoint_paths(self, task_id: str) -> dict[str, int]:
        """The task's noted files: path -> the first checkpoint holding their state."""
        rows = self._db.execute("SELECT path, since FROM checkpoint_paths WHERE task_id = ?", (task_id,)).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    # -- MCP servers ----------------------------------------------------------------------------------

    def mcp_server_started(self, project_id: str, name: str, pid: int, pid_started_at: float, marker: str) -> None:
        """An MCP server process exists: recorded before anything else is asked of it, so a crash of the daemon
        from here on leaves a record its successor acts on."""
        self.deferred.record(
            "INSERT OR REPLACE INTO mcp_servers(project_id, name, pid, pid_started_at, marker, spawned_at) "
            "VALUES (?, ?, ?, ?, ?, ?)", (project_id, name, pid, pid_started_at, marker, time.time()))

    def mcp_server_gone(self, project_id: str, name: str, pid: int) -> None:
        self.deferred.record("DELETE FROM mcp_servers WHERE project_id = ? AND name = ? AND pid = ?",
                             (project_id, name, pid))

    def mcp_leftovers(self) -> list[LeftoverMcpServer]:
        rows = self._db.execute("SELECT project_id, name, pid, pid_started_at, marker FROM mcp_servers").fetchall()
        return [LeftoverMcpServer(r["project_id"], r["name"], r["pid"], r["pid_started_at"], r["marker"]) for r in rows]

    def forget_mcp_leftovers(self, leftovers: Iterable[LeftoverMcpServer]) -> None:
        for left in leftovers:
            self._db.execute("DELETE FROM mcp_servers WHERE project_id = ? AND name = ? AND pid = ?",
                             (left.project_id, left.name, left.pid))

    def task_approvals(self, task_id: str) -> list[str]:
        """The approval keys the user allowed for the task's session, oldest first."""
        rows = self._db.execute("SELECT grant_key FROM task_approvals WHERE task_id = ? ORDER BY granted_at, rowid",
                                (task_id,)).fetchall()
        return [r["grant_key"] for r in rows]

    def add_task_approvals(self, task_id: str, keys: Iterable[str]) -> None:
        """Add `keys` to them, all or none."""
        now = time.time()
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO task_approvals(task_id, grant_key, granted_at) "
                                 "VALUES (?, ?, ?)", [(task_id, key, now) for key in keys])

    def mcp_approvals(self, project_id: str) -> dict[str, str]:
        """The project's approved .mcp.json servers: name -> the fingerprint approved."""
        rows = self._db.execute("SELECT name, fingerprint FROM mcp_approvals WHERE project_id = ?",
                                (project_id,)).fetchall()
        return {r["name"]: r["fingerprint"] for r in rows}

    def set_mcp_approval(self, project_id: str, name: str, fingerprint: str | None) -> None:
        """Approve `name` as `fingerprint` describes it, or withdraw the approval (None)."""
        if fingerprint is None:
            self._db.execute("DELETE FROM mcp_approvals WHERE project_id = ? AND name = ?", (project_id, name))
        else:
            self._db.execute("INSERT OR REPLACE INTO mcp_approvals(project_id, name, fingerprint, approved_at) "
                             "VALUES (?, ?, ?, ?)", (project_id, name, fingerprint, time.time()))


def _run_from(r: sqlite3.Row) -> RunRow:
    return RunRow(r["id"], r["task_id"], r["turn"], r["parent_run"], r["agent"], r["status"], r["stop_reason"],
                  r["pid"], r["created_at"], r["started_at"], r["ended_at"],
                  RunUsage(requests=r["requests"], input_tokens=r["input_tokens"],
                           cached_input_tokens=r["cached_input_tokens"], output_tokens=r["output_tokens"],
                           cost_usd=r["cost_usd"], unpriced_requests=r["unpriced_requests"],
                           slot_wait_seconds=r["slot_wait_seconds"]), r["unconfined"])


def _subagent_from(r: sqlite3.Row) -> SubagentRow:
    return SubagentRow(r["id"], r["task_id"], r["owner"], r["agent"], r["reuse_key"], r["signature"], r["state"],
                       r["last_run"], r["task"], r["conclusion"], r["handoff"], r["background"], bool(r["unread"]),
                       bool(r["interrupted"]), r["created_at"], r["updated_at"])


def _checkpoint_from(r: sqlite3.Row) -> CheckpointRow:
    try:
        skipped = json.loads(r["skipped"])
    except ValueError:
        skipped = {}
    return CheckpointRow(r["task_id"], r["number"], r["project_id"], r["turn"], r["run_id"], r["agent"], r["kind"],
                         r["label"], r["ref"], r["commit_id"], r["common_dir"], r["head"],
                         skipped if isinstance(skipped, dict) else {}, r["created_at"], r["undoes"])

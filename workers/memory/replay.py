"""The replay API a resume calls: load a rollout, find a delegation's child rollout, judge if it can replay.

`assess_replay` decides without running anything: every reason a replay would be unsafe is a distinct
`ReplayVerdict`, with a sentence the daemon can show the user as it is. An unsafe replay is not an error —
the caller hands the parent a degraded report instead.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.resume_switch import resume_enabled
from yagent.ipc.state_files import is_own_dir, open_state_file
from yagent.ipc.state_layout import ROLLOUT_DIR
from yagent.ipc.vocabulary import ReplayVerdict, StopReason
from yagent.workers.llm import Message

from .git_identity import GitIdentity, read_git_identity
from .rollout_reader import RolloutReadError, digest_messages, last_of, read_rollout, rebuild_messages, stop_event
from .rollout_records import RolloutRecord

__all__ = [
    "REPLAYABLE_STOPS",
    "Replay",
    "ReplayAssessment",
    "ReplayBudget",
    "ReplayVerdict",
    "assess_replay",
    "find_child_rollout",
    "first_record",
    "latest_root_rollout",
    "load_for_replay",
    "rollout_of_run",
]

# Stops a run can be picked up from as it was: a pause stops at a step boundary, a cancel or an interruption
# (the daemon went away) may stop inside a tool, which the resume repair answers as interrupted.
REPLAYABLE_STOPS = frozenset({StopReason.PAUSED, StopReason.CANCELLED, StopReason.INTERRUPTED})
_TIMEOUTS = frozenset({StopReason.IDLE_TIMEOUT, StopReason.TOTAL_TIMEOUT})
_BROWSER_AGENTS = ("browser",)


@dataclass(frozen=True, slots=True)
class ReplayBudget:
    """`[resume]` replay_max_steps / replay_max_messages: a stop past either is not replayed (0 = no limit)."""

    max_steps: int = 0
    max_messages: int = 0


@dataclass
class Replay:
    path: Path
    messages: list[Message]  # rebuilt, repaired: ready for the next model call
    checkpoint: dict[str, Any] | None
    stop_reason: StopReason | None
    meta: dict[str, Any]
    turn_context: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    compacted_at: int = 0  # the step the newest `compacted` record was written at (0: none): its messages hold less


@dataclass(frozen=True, slots=True)
class ReplayAssessment:
    replayable: bool
    verdict: ReplayVerdict
    reason: str  # a sentence for the user
    replay: Replay | None = None


def load_for_replay(path: Path) -> Replay:
    """Rebuild a rollout; raises OSError (unreadable) or RolloutReadError (a damaged line, named file:line)."""
    content = read_rollout(path)
    recs = content.records
    checkpoint_at = next((i for i in range(len(recs) - 1, -1, -1)
                          if recs[i]["type"] == RolloutRecord.AGENT_CHECKPOINT), None)
    stop = stop_event(recs)
    try:
        reason = StopReason(stop["stop_reason"]) if stop else None
    except ValueError:
        reason = None
        content.problems.append(f"{path}: unknown stop reason {stop['stop_reason']!r}")
    return Replay(path=path, messages=rebuild_messages(recs),
                  checkpoint=recs[checkpoint_at]["payload"] if checkpoint_at is not None else None,
                  stop_reason=reason, meta=last_of(recs, RolloutRecord.SESSION_META) or {},
                  turn_context=last_of(recs, RolloutRecord.TURN_CONTEXT), problems=content.problems,
                  compacted_at=_whole((last_of(recs, RolloutRecord.COMPACTED) or {}).get("step")))


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def first_record(path: Path) -> dict[str, Any] | None:
    """The first record of a rollout (its `session_meta`), read alone; None when it is not one."""
    try:
        with open(open_state_file(path, os.O_RDONLY), "rb") as fh:  # a planted link or pipe is no rollout
            line = fh.readline(1 << 20)
        rec = json.loads(line)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("payload"), dict) else None


def find_child_rollout(task_dir: Path, delegation_id: str, parent_run: str | None = None) -> Path | None:
    """The newest child rollout whose `session_meta` names `delegation_id` (the parent's tool call id) and, when
    given, `parent_run` (Meta hands its own call id on to the custom agent it starts: two runs share it);
    `parent_run=""` names no run, so nothing matches."""
    if not delegation_id or not resume_enabled():
        return None
    found: Path | None = None
    try:
        candidates = sorted(_rollout_dir(task_dir).glob("*.jsonl"))
    except OSError:
        return None
    for path in candidates:
        rec = first_record(path)
        if rec is None or rec.get("type") != RolloutRecord.SESSION_META:
            continue
        parent = rec["payload"].get("parent_session_id")
        if rec["payload"].get("delegation_id") == delegation_id and parent and parent_run in (None, parent):
            found = path  # names sort by time stamp: the last match is the newest
    return found


def _rollout_dir(task_dir: Path) -> Path:
    """The task's rollouts directory; an OSError when it is missing or not a directory itself: a link in its place
    (a run may write its task's directory) would hand a resume another task's conversations."""
    directory = task_dir / ROLLOUT_DIR
    if not is_own_dir(directory):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory of yagent's", str(directory))
    return directory


def rollout_of_run(task_dir: Path, run: str) -> Path | None:
    """The rollout run `run` wrote (its id is in the file name), or None — also for an id that is not one."""
    if not resume_enabled() or not run.isalnum():  # never a pattern or a path: an id is letters and digits
        return None
    try:
        names = sorted(p for p in _rollout_dir(task_dir).iterdir()
                       if p.name.endswith(".jsonl") and (f"_{run}." in p.name or f"_{run}_" in p.name))
    except OSError:
        return None
    return names[-1] if names else None


def latest_root_rollout(task_dir: Path) -> Path | None:
    """The newest rollout of a root run (a Director turn) of the task: where a session resume starts."""
    if not resume_enabled():
        return None
    try:
        candidates = sorted(_rollout_dir(task_dir).glob("*.jsonl"), reverse=True)
    except OSError:
        return None
    for path in candidates:
        rec = first_record(path)
        if rec is not None and rec.get("type") == RolloutRecord.SESSION_META \
                and not rec["payload"].get("parent_session_id"):
            return path
    return None


def assess_replay(task_dir: Path, delegation_id: str, *, project_root: Path, max_steps: int,
                  budget: ReplayBudget = ReplayBudget(), workspace: GitIdentity | None = None,
                  parent_run: str | None = None) -> ReplayAssessment:
    """Can the child run of `delegation_id` be replayed from its stop? One verdict, the first that applies."""
    def no(verdict: ReplayVerdict, reason: str, replay: Replay | None = None) -> ReplayAssessment:
        return ReplayAssessment(False, verdict, reason, replay)

    if not resume_enabled():
        return no(ReplayVerdict.RESUME_DISABLED, "resume is switched off (YAGENT_RESUME=0): nothing is replayed")
    path = find_child_rollout(task_dir, delegation_id, parent_run)
    if path is None:
        return no(ReplayVerdict.NO_CHILD_ROLLOUT,
                  f"no rollout of the delegated run for call {delegation_id} was found under {task_dir / ROLLOUT_DIR}")
    try:
        replay = load_for_replay(path)
    except (OSError, RolloutReadError, ValueError) as exc:
        return no(ReplayVerdict.UNREADABLE, f"the delegated run's rollout cannot be read: {exc}")
    agent = str(replay.meta.get("agent") or "")
    if any(agent == b or agent.startswith(b + ":") for b in _BROWSER_AGENTS):
        return no(ReplayVerdict.BROWSER_DELEGATION,
                  "a browser delegation is not replayed: the browser's state did not survive the stop", replay)
    cp = replay.checkpoint
    if cp is None:
        return no(ReplayVerdict.NO_CHECKPOINT,
                  f"{path.name} has no checkpoint: the run stopped without writing where (killed outright)", replay)
    if replay.stop_reason in _TIMEOUTS:
        return no(ReplayVerdict.TIMED_OUT, f"the delegated run was stopped by a timeout ({replay.stop_reason})",
                  replay)
    step = int(cp.get("step") or 0)
    if replay.stop_reason == StopReason.MAX_STEPS or (max_steps > 0 and step >= max_steps):
        return no(ReplayVerdict.MAX_STEPS_REACHED,
                  f"the delegated run had used its {max_steps} steps (stopped at step {step})", replay)
    if replay.stop_reason not in REPLAYABLE_STOPS:
        return no(ReplayVerdict.NOT_RESUMABLE_STOP,
                  f"the delegated run ended as {replay.stop_reason or 'unknown'}, which is not replayed "
                  f"(only {', '.join(sorted(REPLAYABLE_STOPS))} are)", replay)
    if int(cp.get("message_count") or -1) != len(replay.messages):
        return no(ReplayVerdict.MESSAGE_COUNT_MISMATCH,
                  f"the checkpoint counts {cp.get('message_count')} messages, the rollout rebuilds "
                  f"{len(replay.messages)}", replay)
    if cp.get("digest") != digest_messages(replay.messages):
        return no(ReplayVerdict.DIGEST_MISMATCH,
                  "the rollout's messages do not match its checkpoint's digest (the file changed after the stop)",
                  replay)
    if (budget.max_steps and step > budget.max_steps) or (budget.max_messages
                                                         and len(replay.messages) > budget.max_messages):
        return no(ReplayVerdict.OVER_BUDGET,
                  f"the stop (step {step}, {len(replay.messages)} messages) is over the replay budget "
                  f"([resume] replay_max_steps = {budget.max_steps}, replay_max_messages = {budget.max_messages})",
                  replay)
    then = GitIdentity.from_dict(cp.get("git"))
    now = workspace if workspace is not None else read_git_identity(project_root)
    if then.sha != now.sha or then.dirty != now.dirty:
        return no(ReplayVerdict.WORKSPACE_MOVED,
                  f"the workspace moved since the stop (git {then.sha[:12] or 'none'}"
                  f"{' dirty' if then.dirty else ''} then, {now.sha[:12] or 'none'}{' dirty' if now.dirty else ''} "
                  "now)", replay)
    return ReplayAssessment(True, ReplayVerdict.REPLAYABLE, f"replayable from step {step}", replay)

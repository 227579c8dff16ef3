"""The checkpoint a run writes on its way out: where it stopped, fingerprinted by the reader's own rules.

The digest is never computed from what the writer holds in memory, nor over the bytes written so far:
the writer is drained first, then the file is read back and rebuilt exactly as a resume will rebuild it
(the `compacted` rule and last-wins pairing included), and that rebuild is digested. A run that compacted
its history therefore matches its own checkpoint on resume. Written on termination paths only.
"""

from __future__ import annotations

from dataclasses import dataclass

from yagent.ipc.vocabulary import StopReason

from .git_identity import GitIdentity
from .rollout_reader import RolloutReadError, digest_messages, read_rollout, rebuild_messages
from .rollout_records import agent_checkpoint
from .rollout_writer import RolloutWriter

__all__ = ["CheckpointFacts", "write_checkpoint"]

DRAIN_TIMEOUT = 5.0  # a disk this slow on the way out: the checkpoint is left out rather than wrong


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    step: int
    model: str
    tier: str
    git: GitIdentity
    delegation_id: str | None
    stop_reason: StopReason


def write_checkpoint(writer: RolloutWriter, facts: CheckpointFacts) -> str:
    """Drain, read back, digest, enqueue the checkpoint; "" when written, else why not (never raises)."""
    if not writer.drain(DRAIN_TIMEOUT):
        return f"checkpoint left out: {writer.path} did not drain within {DRAIN_TIMEOUT:g}s"
    if writer.error:
        return f"checkpoint left out: {writer.error}"
    try:
        messages = rebuild_messages(read_rollout(writer.path).records)
    except (OSError, RolloutReadError, ValueError) as exc:
        return f"checkpoint left out: {writer.path} could not be read back ({exc})"
    writer.enqueue(agent_checkpoint(step=facts.step, digest=digest_messages(messages), message_count=len(messages),
                                    model=facts.model, tier=facts.tier, git=facts.git,
                                    delegation_id=facts.delegation_id, stop_reason=facts.stop_reason))
    return ""

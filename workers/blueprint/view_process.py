"""The short process the daemon starts for `yagent blueprint` / `/blueprint`: the daemon parses no blueprint file.

Started from the forkserver like a worker (`call_entry`), it confines itself first thing to reading what a run reads
— the project, and the project's blueprint directory, nothing else of the state home — and writing nothing
(`sandbox.policy.blueprint_view_rules`), derives the structure, reads the notes and sends the text (`BlueprintShown`,
msgpack) through the pipe the daemon gave it.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import BlueprintShown, BlueprintViewSpec
from yagent.ipc.records import encode

from .. import entry
from ..sandbox._landlock import LandlockError, restrict_self
from ..sandbox.policy import blueprint_view_rules
from .derivation import derive
from .store import BlueprintStore
from .views import human_view

__all__ = ["blueprint_view_main", "render_view"]

_MAX_TEXT = 2 * 1024 * 1024


def blueprint_view_main(key: str, reply: Connection, confinement: ConfinementSpec, spec: BlueprintViewSpec) -> None:
    entry._leave_the_forkserver()
    entry._keep_state_private()
    entry._become_run_process(f"blueprint-{key}", "blueprint")
    try:
        shown = _confined(confinement, spec)
    except Exception as exc:  # the daemon must hear why, never a silent EOF
        shown = BlueprintShown(id=0, project=spec.project_root, text="",
                               problem=f"the blueprint could not be shown: {type(exc).__name__}: {exc}")
    try:
        reply.send_bytes(encode(shown))
    finally:
        reply.close()
    os._exit(0)


def _confined(confinement: ConfinementSpec, spec: BlueprintViewSpec) -> BlueprintShown:
    if confinement.unconfined is None:
        try:
            restrict_self(confinement.abi, blueprint_view_rules(confinement))
        except (LandlockError, OSError) as exc:
            return BlueprintShown(id=0, project=spec.project_root, text="",
                                  problem=f"the blueprint's reader could not confine itself ({exc}); nothing was read")
    return BlueprintShown(id=0, project=spec.project_root, text=render_view(spec))


def render_view(spec: BlueprintViewSpec) -> str:
    text = human_view(derive(Path(spec.project_root)), BlueprintStore(Path(spec.blueprint_dir)).read(),
                      module=spec.module)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "\n[… cut]"

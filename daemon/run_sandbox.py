"""One run's confinement as the daemon sees to it: decided at launch, and the project's `.git` put back after.

Whether the run is confined, and to what, is settled before the fork (`run_confinement`); a confined run that
may write the project has its `.git` hooks and config noted at launch and, once no process of the run is left
to race it, put back as they were (`git_guard`), because a planted hook would run unconfined at the user's next
git command.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from yagent.ipc.confinement import ConfinementSpec
from yagent.ipc.messages import RunSpec
from yagent.ipc.vocabulary import Unconfined

from .git_guard import GitSnapshot, git_protection, revert_changes, snapshot, writes_project
from .run_confinement import REQUIRED_BUT_MISSING, confinement_for, why_unconfined
from .run_services import RunServices

__all__ = ["RunSandbox"]

log = logging.getLogger(__name__)


class RunSandbox:
    def __init__(self, spec: RunSpec, services: RunServices) -> None:
        self._spec = spec
        self._services = services
        self.unconfined: Unconfined | None = None  # why the kernel does not confine the run, once launched
        self._git: GitSnapshot | None = None  # the project's .git hooks and config as they were at launch

    def refusal(self) -> str:
        """Decide how the run is confined; why it must not start at all ("" when it may)."""
        services = self._services
        self.unconfined = why_unconfined(services.settings, self._spec.yolo, services.landlock_abi)
        if self.unconfined is Unconfined.LANDLOCK_MISSING and services.settings.sandbox.required:
            return REQUIRED_BUT_MISSING
        return ""

    def launch_spec(self) -> ConfinementSpec:
        """What the worker restricts itself to (its state dirs made here); notes `.git` when that is needed."""
        services, spec = self._services, self._spec
        guarded = self.unconfined is None and writes_project(spec.agent)
        confinement = confinement_for(spec, services.settings, abi=services.landlock_abi,
                                      runtime_dir=services.runtime_dir or Path(spec.home),
                                      git_namespace=guarded and services.user_namespaces)
        if guarded:  # its .git is put back after the run, even where the worker sees it read-only
            self._git = snapshot(Path(spec.project_root))
            log.info("run %s (%s): %s", spec.run, spec.agent,
                     git_protection(confinement.git_namespace))
        return confinement

    async def put_back(self) -> list[str]:
        """Undo the run's changes to `.git` hooks and config (call once its processes are gone); what changed."""
        if self._git is None:
            return []
        return await asyncio.to_thread(revert_changes, self._git)

"""`yagent blueprint`: the project's repository blueprint — its modules, files and import edges as derived from the
files now, and the notes Repo runs recorded, stale and unverifiable ones marked (`/blueprint` shows the same)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from yagent.ipc import DaemonClient
from yagent.ipc.messages import BlueprintShown, ShowBlueprint

from . import exit_codes
from .command_run import run_command as _call
from .command_run import say as _err

__all__ = ["blueprint"]


def blueprint(project: Path, module: str, as_json: bool) -> int:
    async def go() -> int:
        async with DaemonClient() as client:
            shown = await client.request(ShowBlueprint(id=0, project=str(project), module=module), BlueprintShown)
        assert isinstance(shown, BlueprintShown)
        if as_json:
            print(json.dumps(shown.to_wire(), indent=2))
        elif shown.problem:
            _err(shown.problem)
        else:
            print(shown.text)
        return exit_codes.FAILED if shown.problem else exit_codes.OK

    return _call(go())


if __name__ == "__main__":  # pragma: no cover - a convenience for `python -m`
    sys.exit(blueprint(Path.cwd(), "", False))

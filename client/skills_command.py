"""`yagent skills`: the skills the agents of a project see, with every override and problem — the account a run
reads (`yagent.ipc.skill_account`), worked out the same way from the same configuration, without the daemon."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from yagent.ipc.config import ConfigError, load_settings
from yagent.ipc.home import config_path, yagent_home
from yagent.ipc.skill_account import account_json, account_lines, load_skill_account

from . import exit_codes

__all__ = ["skills"]


def skills(project: Path, as_json: bool, home: Path | None = None, config: Path | None = None) -> int:
    """Print the account for `project` under `config` (default: the home's file); exit 2 (three lines) when the
    configuration cannot be used."""
    state_home = home if home is not None else yagent_home()
    try:
        settings = load_settings(config if config is not None else config_path(state_home), os.environ)
    except ConfigError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return exit_codes.USAGE
    account = load_skill_account(yagent_home=state_home, project_root=project, settings=settings.run_settings.skills)
    if as_json:
        print(json.dumps(account_json(account), ensure_ascii=False))
    else:
        print("\n".join(account_lines(account)))
    return exit_codes.OK

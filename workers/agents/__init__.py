"""yagent.workers.agents — the agents: Director, Coding, Repo, Chat, DevOps, Meta and custom agents.

Importing this package registers every agent kind with `yagent.workers.kinds`.
"""

from . import director, meta, subagents  # noqa: F401 - importing registers the agent kinds
from .loop import LoopConfig, LoopPolicy, run_agent_loop
from .subagents import AGENT_SPECS

__all__ = ["AGENT_SPECS", "LoopConfig", "LoopPolicy", "run_agent_loop"]

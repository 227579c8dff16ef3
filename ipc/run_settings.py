"""The settings a worker runs with, resolved from the configuration file before the run starts.

`yagent.ipc.config.settings_from_table` (the one parser of config.toml) builds a `RunSettings` next to the
daemon's own `Settings`; the daemon hands it to every run in `RunSpec.settings`. Workers read nothing
else of the configuration: no TOML table crosses into a worker, so a key has one parser and one
meaning. Third-party agent kinds (`[daemon] agent_modules`) read `spec.settings` the same way.

The LLM part is `provider_config.LLMConfig` itself, a record the engines take as it arrives. Keys named
by `api_key_env` are expanded for each turn from the variables the calling `yagent` sent, then from yagentd's
environment (`caller_keys.with_caller_keys`); a variable set in neither leaves `missing_key_env` named, and only a
run that calls that provider fails, saying what to export and where it was looked for.
"""

from __future__ import annotations

from dataclasses import field

from .blueprint_settings import BlueprintSettings
from .board_settings import BoardSettings
from .compression_settings import CompressionSettings
from .provider_config import LLMConfig
from .records import Record, record
from .resume_settings import DEFAULT_REPLAY_MAX_MESSAGES, DEFAULT_REPLAY_MAX_STEPS, DEFAULT_ROLLOUT_RETENTION
from .skills_settings import SkillsSettings

__all__ = [
    "DEFAULT_BREAKER_RESET",
    "DEFAULT_LANG",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PARALLEL_READONLY_TOOLS",
    "DEFAULT_STEP_RETRIES",
    "DEFAULT_TOOL_HEARTBEAT_INTERVAL",
    "OTHER_ROLE_MAX_STEPS",
    "RunSettings",
]

# `[agent] <role>_max_steps`, per agent role; a role not listed here (a third-party agent) gets OTHER_ROLE_MAX_STEPS.
DEFAULT_MAX_STEPS = {"director": 100, "coding": 150, "repo": 50, "chat": 50, "devops": 50, "browser": 200,
                     "custom": 15}
OTHER_ROLE_MAX_STEPS = 50
DEFAULT_STEP_RETRIES = 2  # `[llm] step_retries`: a failed model step is tried again this many times
DEFAULT_PARALLEL_READONLY_TOOLS = 4  # `[agent] max_parallel_readonly_tools`
# A long-running tool beats this often at most, and at least four times per `[agent] delegate_idle_timeout`.
DEFAULT_TOOL_HEARTBEAT_INTERVAL = 5.0
DEFAULT_LANG = "English"  # `[agent] lang`: the language agents answer in
DEFAULT_BREAKER_RESET = 60.0  # `[llm] circuit_breaker_reset_timeout`


@record
class RunSettings(Record):
    """What one run needs of the configuration, each value already normalised the one way it is meant."""

    max_steps: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_STEPS))  # per agent role
    step_retries: int = DEFAULT_STEP_RETRIES
    max_parallel_readonly_tools: int = DEFAULT_PARALLEL_READONLY_TOOLS  # clamped; 1 under YAGENT_CONCURRENCY=0
    tool_heartbeat_interval: float = DEFAULT_TOOL_HEARTBEAT_INTERVAL  # from `[agent] delegate_idle_timeout`
    lang: str = DEFAULT_LANG
    circuit_breaker_threshold: int = 0  # failures in a row that open a provider's breaker; 0 = no breaker
    circuit_breaker_reset: float = DEFAULT_BREAKER_RESET  # seconds an open breaker waits before one probe
    llm: LLMConfig = field(default_factory=LLMConfig)
    # `[resume]`: seconds a rollout is kept (0 = forever), and the replay budget (0 = no limit)
    rollout_retention: float = DEFAULT_ROLLOUT_RETENTION
    replay_max_steps: int = DEFAULT_REPLAY_MAX_STEPS
    replay_max_messages: int = DEFAULT_REPLAY_MAX_MESSAGES
    blackboard: BoardSettings = field(default_factory=BoardSettings)  # `[blackboard]`
    compression: CompressionSettings = field(default_factory=CompressionSettings)  # `[enhanced_commander]`
    skills: SkillsSettings = field(default_factory=SkillsSettings)  # `[skills]`, with `[sandbox] deny_read`
    codeintel: bool = True  # `[codeseek] enabled`: the code-intelligence tools are on Repo's and Coding's surfaces
    # Why the Browser agent cannot work ("" = it can): `[browser] enabled = false`, or set by the daemon when it
    # finds no Chromium. `delegate_browser` and the browser tools say it in their descriptions instead of vanishing.
    browser: str = ""
    blueprint: BlueprintSettings = field(default_factory=BlueprintSettings)  # `[blueprint]`, YAGENT_BLUEPRINT
    # Set per run by the daemon: `[git_checkpoint] enabled` and the project is a repository it can checkpoint
    # (the git_checkpoint_* tools are on a Coding run's surface only then).
    git_checkpoints: bool = False

    def max_steps_for(self, role: str) -> int:
        return self.max_steps.get(role, OTHER_ROLE_MAX_STEPS)

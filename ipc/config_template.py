"""The commented template `$YAGENT_HOME/config/config.toml` starts from, written on first use.

Every setting in it is commented out, so a new file means exactly the built-in defaults; the values shown are
those defaults (`tests/ipc/test_config_location.py` uncomments them all and checks), so the file documents
itself. `yagent setup` edits it in place and keeps the comments.
"""

from __future__ import annotations

__all__ = ["CONFIG_TEMPLATE"]

CONFIG_TEMPLATE = """\
# yagent configuration. Every setting below is commented out: the value shown is its default (the
# provider lines are an example). `yagent setup` (or /setup in the client) writes providers for you and
# keeps your comments. Durations take ms, s, m, h, d ("90s", "20m"); a key left out keeps its default.
# A key yagent does not read is reported (yagentd's log, `yagent daemon status`), never silently ignored.

# task_timeout = 0                   # a turn running longer is stopped (0 = no limit); above every [table]

# --- LLM providers --------------------------------------------------------------------------
# With no provider here, OPENAI_API_KEY / OPENAI_BASE_URL or ANTHROPIC_API_KEY in the environment of
# the shell you run yagent from is enough (YAGENT_MODEL picks the model).
#
# [global.llm]
# use_provider = "deepseek"
#
# [global.llm.providers.deepseek]
# api_base_url = "https://api.deepseek.com/v1"   # every provider needs a URL and a key:
# api_key_env = "DEEPSEEK_API_KEY"               # read from the shell you run yagent from
# model = "deepseek-chat"
# api_format = "openai"                          # or "anthropic" (Anthropic's Messages API)
#
# A different provider for one agent (director, coding, repo, chat, devops, browser, meta) or one
# LLM-backed tool (micro_agent, thinking, deepthinking, design):
# [agents.llm.coding]
# use_provider = "deepseek"

# --- Agents ----------------------------------------------------------------------------------
# [agent]
# delegate_idle_timeout = "60s"      # a sub-agent silent this long is stopped
# delegate_total_timeout = "20m"     # and one running this long
# max_parallel_delegations = 2       # sub-agents one agent runs at once (1 = one at a time)
# max_parallel_readonly_tools = 4    # read-only tool calls of one step run at once (1 = one at a time)
# lang = "English"                   # the language agents answer in
# director_max_steps = 100           # model steps per run, per agent
# coding_max_steps = 150
# repo_max_steps = 50
# chat_max_steps = 50
# devops_max_steps = 50
# custom_max_steps = 15

# --- Model requests --------------------------------------------------------------------------
# [llm]
# timeout = "600s"                   # one request, retries included
# stall_timeout = "120s"             # a response silent this long is retried
# max_retries = 5
# step_retries = 2                   # a failed model step is tried again this many times
# enable_fallback = true             # use a provider's fallback_providers when it fails
# fallback_max_retries = 2
# max_in_flight_requests = 8         # model requests at once, over every project (0 = no limit)
# max_cost_per_task = 0              # US dollars one task may spend before it pauses to ask (0 = no limit)
# max_cost_per_day = 0               # the same over every task, per day
# circuit_breaker_threshold = 0      # failed calls in a row that pause a provider (0 = no breaker)
#
# [routing]
# mode = "auto"                      # "auto": a model tier per task; "fixed": always the configured one

# --- Resuming, the board ---------------------------------------------------------------------
# [resume]
# rollout_retention = "30d"          # run transcripts unwritten this long are removed (0 = kept)
# replay_max_steps = 500             # an interrupted sub-agent past this step is not replayed (0 = no limit)
# replay_max_messages = 2000         # nor one holding more messages (0 = no limit)
#
# [blackboard]
# index_max_notes = 30               # notes in the index every model call sees (0 = no index)
# index_line_chars = 240             # characters per index line (0 = never trimmed)
# max_notes_per_board = 200          # notes one task keeps, oldest removed first
# ttl = "30d"                        # a board idle this long is removed ("0" = never)
# artifact_budget_tokens = 500       # a longer result is stored as an artifact (0 = never)
# artifact_retention = "30d"         # artifacts of a task idle this long are removed ("0" = never)

# --- Git checkpoints, the repository blueprint ------------------------------------------------
# [git_checkpoint]
# enabled = true                     # checkpoint every Coding sub-task (yagent diff / yagent undo)
# retention = "30d"                  # checkpoints older than this are removed ("0" = kept)
# squash_on_exit = false             # a turn's changes as one commit on branch <agent_branch_prefix><task>
# agent_branch_prefix = "yagent/"
# auto_merge_on_exit = false         # then fast-forward your branch to it, when nothing can be lost
#
# [blueprint]
# enable = true                      # the repository map and Repo agents' notes (yagent blueprint)
# inject_into = ["director", "repo"] # whose system prompt carries the map of modules and import edges
# index_max_tokens = 1500            # the most the map takes of a prompt (0 = nowhere)

# --- Confinement, the daemon, the client -----------------------------------------------------
# [sandbox]
# mode = "on"                        # "off": no run is confined by the kernel
# required = false                   # true: refuse runs where Landlock is missing
#
# [daemon]
# max_workers = 32                   # agent processes alive at once
# warm_workers = 2                   # agent processes forked ahead of demand, so a run starts at once (0 = none)
# event_log_retention = "30d"        # a task's event log unwritten this long is removed (0 = kept)
#
# [tui]
# yolo = "none"                      # turns sent from the full-screen client: none, yolo or full
"""

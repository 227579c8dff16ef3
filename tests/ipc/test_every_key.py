"""A test per key: changing a key's value changes what the part that reads it does (§11 pitfall 25 — a key
that loads but changes nothing is a promise nobody keeps).

`EFFECTS` holds, for every key the registry (`yagent.ipc.config_keys`) knows, two values and what they change:
seen as far down as a cheap seam reaches — the request body a worker's engine would send, the loop limits of a
worker built from the start message as it crossed the codec, the settings the daemon acts on. Where the key's
effect lives in the daemon, `acted_on` names the end-to-end test that proves the daemon does what the value says;
the ratchet checks that test exists. A key added to the registry without an entry here fails
`test_every_key_the_registry_knows_has_an_effect_test`.
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from yagent.ipc.config import Settings, settings_from_table
from yagent.ipc.config_keys import known_key_paths
from yagent.ipc.messages import RunSpec, StartRun
from yagent.ipc.records import decode, encode
from yagent.workers.agents.runtime import AgentRun
from yagent.workers.kinds import RunContext
from yagent.workers.llm import CallOptions, FallbackEngine, HTTPEngine, Message, Usage

REPO = Path(__file__).resolve().parents[2]

BASE = """
[global.llm]
use_provider = "a"

[global.llm.providers.a]
api_base_url = "http://127.0.0.1:9/v1"
api_key = "key-a"
model = "gpt-4o"

[global.llm.providers.b]
api_base_url = "http://127.0.0.1:9/b/v1"
api_key = "key-b"
model = "gpt-4o-mini"
"""
ENV = {"KEY_ONE": "sk-one", "KEY_TWO": "sk-two"}


class _Channel:
    @contextlib.asynccontextmanager
    async def hold(self):
        yield

    def emit(self, type_: str, data: dict) -> None:
        pass

    def heartbeat(self) -> None:
        pass

    async def pause_gate(self) -> None:
        pass


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def settings_of(toml: str) -> Settings:
    return settings_from_table(_merge(tomllib.loads(BASE), tomllib.loads(toml)), environ=ENV)


_TMP: list[Path] = []


def worker(role: str) -> Callable[[Settings], AgentRun]:
    """The run a worker of `role` assembles from the start message, after it crossed the codec."""

    def build(settings: Settings) -> AgentRun:
        spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(_TMP[0]), agent=role, input="x",
                       home=str(_TMP[0]), settings=settings.run_settings)
        received = decode(encode(StartRun(spec=spec)))
        assert isinstance(received, StartRun)
        return AgentRun(RunContext(received.spec, _Channel()), role)  # type: ignore[arg-type]

    return build


def on(role: str, seen: Callable[[AgentRun], Any]) -> Callable[[Settings], Any]:
    return lambda settings: seen(worker(role)(settings))


def _http(engine: Any) -> HTTPEngine:
    return engine.primary if isinstance(engine, FallbackEngine) else engine


def body(role: str = "director") -> Callable[[Settings], dict[str, Any]]:
    """The request body the role's own provider engine would send for a one-message call."""
    def seen(run: AgentRun) -> dict[str, Any]:
        engine = _http(run._factory(run.engine.configured))
        return engine.build_request([Message.system("s"), Message.user("u")], [], CallOptions())

    return on(role, seen)


def engine_of(role: str = "director") -> Callable[[Settings], Any]:
    return on(role, lambda run: run._factory(run.engine.configured))


@dataclass(frozen=True)
class Effect:
    a: str  # TOML merged over BASE
    b: str
    seen: Callable[[Settings], Any]
    acted_on: str = ""  # "tests/…py::test_name": where the daemon is shown doing what the value says
    warns: bool = False  # a seed key yagent answers with what it does instead: its effect is that warning


def _shape(role: str) -> Callable[[Settings], Any]:
    """The repository map the role's system prompt gets, in a project with one Python module."""
    def seen(run: AgentRun) -> str:
        (_TMP[0] / "pkg").mkdir(exist_ok=True)
        (_TMP[0] / "pkg" / "m.py").write_text("import os\n")
        return run.with_blueprint("")

    return on(role, seen)


def _steps(role: str) -> Callable[[Settings], Any]:
    return on(role, lambda r: r.loop_config([], None).max_steps)


P = "[global.llm.providers.a]\n"
EFFECTS: dict[tuple[str, str], Effect] = {
    ("", "task_timeout"): Effect("", 'task_timeout = "5m"', lambda s: s.task_timeout,
                                 "tests/daemon/test_watchdog.py::test_task_timeout_stops_the_whole_turn"),
    ("global.llm", "use_provider"): Effect("", '[global.llm]\nuse_provider = "b"', on("director", lambda r: (
        r.engine.configured, _http(r._factory(r.engine.configured)).headers()["Authorization"]))),
    ("global.llm.providers.*", "api_base_url"): Effect("", P + 'api_base_url = "http://127.0.0.1:9/other/v1"',
                                                       on("director", lambda r: _http(r._factory("a")).url())),
    ("global.llm.providers.*", "api_key"): Effect("", P + 'api_key = "key-changed"',
                                                  on("director", lambda r: _http(r._factory("a")).headers())),
    ("global.llm.providers.*", "api_key_env"): Effect(
        '[global.llm.providers.b]\napi_key_env = "KEY_ONE"\napi_key = ""\n[global.llm]\nuse_provider = "b"',
        '[global.llm.providers.b]\napi_key_env = "KEY_TWO"\napi_key = ""\n[global.llm]\nuse_provider = "b"',
        on("director", lambda r: _http(r._factory("b")).headers()["Authorization"])),
    ("global.llm.providers.*", "model"): Effect("", P + 'model = "gpt-4.1"', lambda s: body()(s)["model"]),
    ("global.llm.providers.*", "api_format"): Effect("", P + 'api_format = "anthropic"',
                                                     on("director", lambda r: _http(r._factory("a")).url())),
    ("global.llm.providers.*", "temperature"): Effect("", P + "temperature = 0",  # existence: 0 is greedy, sent
                                                      lambda s: body()(s).get("temperature", "absent")),
    ("global.llm.providers.*", "max_tokens"): Effect("", P + "max_tokens = 900", lambda s: body()(s).get("max_tokens")),
    # The context gauge's window (the run's engine says it; the threshold never reads it, seed pitfall 3).
    ("global.llm.providers.*", "context_window"): Effect("", P + "context_window = 262144",
                                                         on("director", lambda r: r.engine.context_window)),
    ("global.llm.providers.*", "reasoning_effort"): Effect("", P + 'reasoning_effort = "high"',
                                                           lambda s: body()(s).get("reasoning_effort")),
    ("global.llm.providers.*", "fallback_providers"): Effect("", P + 'fallback_providers = ["b"]',
                                                             lambda s: type(engine_of()(s)).__name__),
    ("global.llm.providers.*", "price"): Effect(
        P + "price = { input = 1.0, output = 2.0 }", P + "price = { input = 3.0, output = 2.0 }",
        on("director", lambda r: r.cost_of("a", "gpt-4o", Usage(total_input_tokens=1_000_000))),
        "tests/agents_e2e/test_spending_limits.py::test_a_task_at_its_limit_pauses_asks_continues_when_raised_and_"
        "stops_when_told"),
    ("agents.llm", "use_provider"): Effect("", '[agents.llm]\nuse_provider = "b"',
                                           on("coding", lambda r: r.engine.configured)),
    ("agents.llm.*", "use_provider"): Effect("", '[agents.llm.coding]\nuse_provider = "b"',
                                             lambda s: (on("coding", lambda r: r.engine.configured)(s),
                                                        on("repo", lambda r: r.engine.configured)(s))),
    ("tools.llm", "use_provider"): Effect("", '[tools.llm]\nuse_provider = "b"',
                                          on("director", lambda r: r._engine_for_tool("thinking").configured)),
    ("tools.llm.*", "use_provider"): Effect("", '[tools.llm.deepthinking]\nuse_provider = "b"',
                                            on("director", lambda r: (r._engine_for_tool("deepthinking").configured,
                                                                      r._engine_for_tool("thinking").configured))),
    ("agent", "delegate_idle_timeout"): Effect(
        '[agent]\ndelegate_idle_timeout = "2s"', '[agent]\ndelegate_idle_timeout = "10m"',
        lambda s: (s.delegate_idle_timeout, on("coding", lambda r: r.tool_ctx.heartbeat_interval)(s)),
        "tests/daemon/test_watchdog.py::test_idle_timeout_kills_a_stuck_run_and_its_children"),
    ("agent", "delegate_total_timeout"): Effect(
        "", '[agent]\ndelegate_total_timeout = "30s"', lambda s: s.delegate_total_timeout,
        "tests/daemon/test_watchdog.py::test_progress_heartbeats_keep_a_quiet_run_alive_until_the_total_timeout"),
    ("agent", "max_parallel_delegations"): Effect("", "[agent]\nmax_parallel_delegations = 1",
                                                  lambda s: s.max_parallel_delegations,
                                                  "tests/daemon/test_limits.py::test_serial_when_the_pool_is_one"),
    ("agent", "max_parallel_readonly_tools"): Effect(
        "", "[agent]\nmax_parallel_readonly_tools = 1",
        on("repo", lambda r: r.loop_config([], None).max_parallel_readonly)),
    ("agent", "lang"): Effect("", '[agent]\nlang = "German"', on("repo", lambda r: r.lang)),
    ("agent", "<role>_max_steps"): Effect(  # a third-party role's own limit travels too
        "[daemon]\nagent_modules = [\"my.agents\"]",
        "[agent]\ncoding_max_steps = 4\nreviewer_max_steps = 3\n[daemon]\nagent_modules = [\"my.agents\"]",
                                          lambda s: (_steps("coding")(s), s.run_settings.max_steps_for("reviewer"))),
    ("llm", "timeout"): Effect("", '[llm]\ntimeout = "30s"', lambda s: _http(engine_of()(s)).settings.timeout),
    ("llm", "stall_timeout"): Effect("", '[llm]\nstall_timeout = "45s"', lambda s: _http(engine_of()(s))._idle_timeout),
    ("llm", "max_retries"): Effect("", "[llm]\nmax_retries = 0", lambda s: _http(engine_of()(s)).retry.max_retries),
    ("llm", "enable_fallback"): Effect(P + 'fallback_providers = ["b"]',
                                       P + 'fallback_providers = ["b"]\n[llm]\nenable_fallback = false',
                                       lambda s: type(engine_of()(s)).__name__),
    ("llm", "fallback_max_retries"): Effect(P + 'fallback_providers = ["b"]',
                                            P + 'fallback_providers = ["b"]\n[llm]\nfallback_max_retries = 0',
                                            lambda s: engine_of()(s)._fallback_max_retries),
    ("llm", "max_in_flight_requests"): Effect(  # existence: 0 = unlimited, a missing key = 8
        "", "[llm]\nmax_in_flight_requests = 0", lambda s: s.max_in_flight_requests,
        "tests/daemon/test_limits.py::test_unlimited_leases_when_the_limit_is_zero"),
    ("llm", "max_cost_per_task"): Effect(
        "", "[llm]\nmax_cost_per_task = 1.5", lambda s: s.max_cost_per_task,
        "tests/agents_e2e/test_spending_limits.py::test_a_task_at_its_limit_pauses_asks_continues_when_raised_and_"
        "stops_when_told"),
    ("llm", "max_cost_per_day"): Effect(
        "", "[llm]\nmax_cost_per_day = 100.0", lambda s: s.max_cost_per_day,
        "tests/agents_e2e/test_spending_limits.py::test_what_runs_cost_is_kept_after_they_end_and_the_days_total_"
        "survives_a_restart"),
    ("llm", "step_retries"): Effect("", "[llm]\nstep_retries = 0", on("chat", lambda r: r.loop_config([], None)
                                                                         .step_retries)),
    ("llm", "circuit_breaker_threshold"): Effect("", "[llm]\ncircuit_breaker_threshold = 2",
                                                 on("director", lambda r: r.breakers() is not None)),
    ("llm", "circuit_breaker_reset_timeout"): Effect(
        "[llm]\ncircuit_breaker_threshold = 2", '[llm]\ncircuit_breaker_threshold = 2\ncircuit_breaker_reset_timeout = '
        '"90s"', on("director", lambda r: r.breakers().reset_timeout)),
    ("routing", "mode"): Effect("", '[routing]\nmode = "fixed"', on("repo", lambda r: r.engine.mode)),
    ("routing.baselines", "<agent>"): Effect("", '[routing.baselines]\nrepo = "fast"',
                                             on("repo", lambda r: r.engine.baseline)),
    ("daemon", "max_workers"): Effect("", "[daemon]\nmax_workers = 2", lambda s: s.max_workers,
                                      "tests/daemon/test_limits.py::test_live_worker_cap_queues_new_turns"),
    ("daemon", "warm_workers"): Effect(  # existence: 0 = none, a missing key = 2
        "", "[daemon]\nwarm_workers = 0", lambda s: s.warm_workers,
        "tests/daemon/test_warm_workers.py::test_with_warm_workers_off_every_start_forks"),
    ("daemon", "event_ring"): Effect("", "[daemon]\nevent_ring = 500", lambda s: s.event_ring),
    ("daemon", "event_ring_bytes"): Effect("", "[daemon]\nevent_ring_bytes = 1048576", lambda s: s.event_ring_bytes),
    ("daemon", "event_ring_total_bytes"): Effect("", "[daemon]\nevent_ring_total_bytes = 8388608",
                                                 lambda s: s.event_ring_total_bytes),
    ("daemon", "pub_hwm"): Effect("", "[daemon]\npub_hwm = 10", lambda s: s.pub_hwm,
                                  "tests/daemon/test_resilience.py::test_a_slow_subscriber_loses_nothing"),
    ("daemon", "stop_grace"): Effect("", '[daemon]\nstop_grace = "0.5s"', lambda s: s.stop_grace),
    ("daemon", "heartbeat_interval"): Effect("", '[daemon]\nheartbeat_interval = "2s"',
                                             lambda s: s.heartbeat_interval),
    ("daemon", "daemon_loss_timeout"): Effect("", '[daemon]\ndaemon_loss_timeout = "30s"',
                                              lambda s: s.daemon_loss_timeout),
    ("daemon", "event_log_max_bytes"): Effect(
        "", "[daemon]\nevent_log_max_bytes = 100000", lambda s: s.event_log_max_bytes,
        "tests/daemon/test_cli.py::test_a_task_log_past_its_cap_is_trimmed_and_logs_says_what_is_gone"),
    ("daemon", "event_log_retention"): Effect(  # existence: 0 = kept forever
        "", '[daemon]\nevent_log_retention = "0"', lambda s: s.event_log_retention,
        "tests/daemon/test_cli.py::test_event_logs_past_their_retention_are_deleted_and_the_task_stays_listed"),
    ("daemon", "agent_modules"): Effect("", '[daemon]\nagent_modules = ["tests.agents.scripted"]',
                                        lambda s: s.agent_modules,
                                        "tests/daemon/test_cli.py::test_run_prints_the_streamed_answer_and_exits_with_"
                                        "the_outcome"),
    ("sandbox", "mode"): Effect("", '[sandbox]\nmode = "off"', lambda s: s.sandbox.enabled,
                                "tests/sandbox/test_confinement_status.py::test_full_yolo_and_sandbox_off_run_unconfined_"
                                "and_ps_says_why_while_the_run_lives"),
    ("sandbox", "required"): Effect("", "[sandbox]\nrequired = true", lambda s: s.sandbox.required,
                                    "tests/sandbox/test_confinement_status.py::test_required_refuses_runs_where_landlock_"
                                    "is_missing_saying_what_to_do"),
    ("sandbox", "writable_roots"): Effect("", '[sandbox]\nwritable_roots = ["/opt/cache"]',
                                          lambda s: s.sandbox.expanded("/home/u")[0],
                                          "tests/sandbox/test_confinement_corpus.py::test_coding_commands_write_the_"
                                          "project_and_the_writable_roots"),
    ("sandbox", "deny_read"): Effect("", '[sandbox]\ndeny_read = ["~/.secret"]',
                                     lambda s: s.sandbox.expanded("/home/u")[1]),
    ("resume", "rollout_retention"): Effect("", '[resume]\nrollout_retention = "0"',  # existence: 0 = forever
                                            lambda s: s.run_settings.rollout_retention,
                                            "tests/memory/test_rollout_retention.py::test_old_rollouts_go_and_the_"
                                            "newest_turn_with_its_children_stays"),
    ("resume", "replay_max_steps"): Effect("", "[resume]\nreplay_max_steps = 0",
                                           lambda s: s.run_settings.replay_max_steps),
    ("resume", "replay_max_messages"): Effect("", "[resume]\nreplay_max_messages = 0",  # existence: 0 = no limit
                                              lambda s: s.run_settings.replay_max_messages),
    ("enhanced_commander", "enable_context_compression"): Effect(
        "", "[enhanced_commander]\nenable_context_compression = false",  # existence: absent = on
        lambda s: s.run_settings.compression.enabled,
        "tests/agents_e2e/test_compaction.py::test_a_long_session_compacts_and_still_knows_its_goal_plan_item_"
        "request_instructions_and_board"),
    ("enhanced_commander", "context_compression_threshold"): Effect(
        "", "[enhanced_commander]\ncontext_compression_threshold = 50000",
        lambda s: s.run_settings.compression.threshold),
    ("enhanced_commander", "tool_result_keep_tokens"): Effect(
        "", "[enhanced_commander]\ntool_result_keep_tokens = 50",
        lambda s: s.run_settings.compression.tool_result_keep_tokens),
    ("enhanced_commander", "enable_ultimate_compression"): Effect(
        "", "[enhanced_commander]\nenable_ultimate_compression = false",  # existence: absent = on
        lambda s: s.run_settings.compression.ultimate_enabled),
    ("enhanced_commander", "ultimate_compression_keep_plans"): Effect(
        "", "[enhanced_commander]\nultimate_compression_keep_plans = 3",
        lambda s: s.run_settings.compression.ultimate_keep_plans),
    ("mcp", "enabled"): Effect("", "[mcp]\nenabled = false", lambda s: s.mcp.enabled),
    ("mcp", "idle_ttl"): Effect("", '[mcp]\nidle_ttl = "1m"', lambda s: s.mcp.idle_ttl),
    ("mcp", "startup_timeout"): Effect("", '[mcp]\nstartup_timeout = "30s"', lambda s: s.mcp.startup_timeout),
    ("mcp", "call_timeout"): Effect("", '[mcp]\ncall_timeout = "30s"', lambda s: s.mcp.call_timeout),
    ("mcp", "project_files"): Effect("", "[mcp]\nproject_files = false", lambda s: s.mcp.project_files),
    ("mcp", "servers"): Effect("", '[[mcp.servers]]\nname = "tb"\ncommand = "true"',
                               lambda s: [server.name for server in s.mcp.servers],
                               "tests/agents_e2e/test_mcp_flow.py::test_the_director_loads_and_calls_an_mcp_tool_"
                               "through_the_daemon"),
    ("codeseek", "enabled"): Effect("", "[codeseek]\nenabled = false", lambda s: s.run_settings.codeintel,
                                    "tests/agents_e2e/test_code_intel_flow.py::test_the_repo_agent_asks_the_code_server_"
                                    "through_the_daemon"),
    ("codeseek", "max_file_bytes"): Effect("", "[codeseek]\nmax_file_bytes = 4096",
                                           lambda s: s.codeintel.max_file_bytes),
    ("codeseek", "max_files"): Effect("", "[codeseek]\nmax_files = 10", lambda s: s.codeintel.max_files),
    ("codeseek", "exclude"): Effect("", '[codeseek]\nexclude = ["vendor/"]', lambda s: s.codeintel.exclude),
    ("codeseek", "embeddings_url"): Effect(
        "", '[codeseek]\nembeddings_url = "http://127.0.0.1:9/v1"\nembeddings_model = "e"',
        lambda s: s.codeintel.hybrid),
    ("codeseek", "embeddings_model"): Effect(
        '[codeseek]\nembeddings_url = "http://127.0.0.1:9/v1"\nembeddings_model = "e"',
        '[codeseek]\nembeddings_url = "http://127.0.0.1:9/v1"\nembeddings_model = "f"',
        lambda s: s.codeintel.embeddings_model),
    ("codeseek", "embeddings_api_key_env"): Effect("", '[codeseek]\nembeddings_api_key_env = "KEY_ONE"',
                                                   lambda s: s.codeintel.embeddings_api_key_env),
    ("skills", "enabled"): Effect("", "[skills]\nenabled = false", lambda s: s.run_settings.skills.enabled),
    ("skills", "dirs"): Effect("", '[skills]\ndirs = ["~/team/skills"]', lambda s: s.run_settings.skills.dirs),
    ("blackboard", "index_max_notes"): Effect("", "[blackboard]\nindex_max_notes = 0",  # existence: 0 = no index
                                              on("director", lambda r: r.board.settings.index_max_notes)),
    ("blackboard", "index_line_chars"): Effect("", "[blackboard]\nindex_line_chars = 0",  # existence: 0 = no trim
                                               on("director", lambda r: r.board.settings.index_line_chars)),
    ("blackboard", "summary_max_runes"): Effect("", "[blackboard]\nsummary_max_runes = 90",
                                                on("director", lambda r: r.board.settings.summary_max_runes)),
    ("blackboard", "max_notes_per_board"): Effect("", "[blackboard]\nmax_notes_per_board = 3",
                                                  on("director", lambda r: r.board.settings.max_notes_per_board)),
    ("blackboard", "ttl"): Effect("", '[blackboard]\nttl = "0"', lambda s: s.run_settings.blackboard.ttl,
                                  "tests/board/test_daemon_prune.py::test_idle_boards_go_at_the_daemons_prune_and_a_"
                                  "resumable_tasks_board_stays"),
    ("blackboard", "artifact_budget_tokens"): Effect("", "[blackboard]\nartifact_budget_tokens = 0",
                                                     on("coding", lambda r: r.board.settings.artifact_budget_tokens)),
    ("blackboard", "artifact_retention"): Effect("", '[blackboard]\nartifact_retention = "1d"',
                                                 lambda s: s.run_settings.blackboard.artifact_retention),
    ("tui", "yolo"): Effect("", '[tui]\nyolo = "full"', lambda s: _tui_yolo(s)),
    # [browser]: the daemon acts on these when it starts a project's browser (daemon/browser_manager.py); the host is
    # started with them (test_browser_units.py::test_the_host_is_started_with_what_browser_says_and_a_failed_start_…).
    ("browser", "enabled"): Effect("", "[browser]\nenabled = false", lambda s: s.run_settings.browser,
                                   "tests/browser/test_browser_units.py::test_without_chromium_nothing_starts_and_"
                                   "every_call_says_why"),
    ("browser", "chrome_path"): Effect("", '[browser]\nchrome_path = "/nowhere/chromium"',
                                       lambda s: s.browser.chrome_path,
                                       "tests/browser/test_browser_flow.py::test_a_project_without_chromium_gets_"
                                       "the_status_text_and_the_tools_say_why"),
    ("browser", "mode"): Effect("", '[browser]\nmode = "headful"', lambda s: s.browser.mode),
    ("browser", "cdp_url"): Effect('[browser]\nmode = "attach"\ncdp_url = "http://127.0.0.1:9222"',
                                   '[browser]\nmode = "attach"\ncdp_url = "http://127.0.0.1:9333"',
                                   lambda s: s.browser.cdp_url),
    ("browser", "idle_ttl"): Effect("", '[browser]\nidle_ttl = "1s"', lambda s: s.browser.idle_ttl,
                                    "tests/browser/test_browser_flow.py::test_a_projects_browser_stops_once_the_"
                                    "project_was_idle_past_idle_ttl"),
    ("browser", "max_chrome"): Effect("", "[browser]\nmax_chrome = 1", lambda s: s.browser.max_chrome),
    ("browser", "command_timeout"): Effect("", '[browser]\ncommand_timeout = "5s"',
                                           lambda s: s.browser.command_timeout),
    ("browser", "dialog_policy"): Effect("", '[browser]\ndialog_policy = "dismiss"',
                                         lambda s: s.browser.dialog_policy,
                                         "tests/browser/test_browser_units.py::test_the_host_is_started_with_what_"
                                         "browser_says_and_a_failed_start_is_the_state"),
    ("browser", "allowed_domains"): Effect("", '[browser]\nallowed_domains = ["localhost"]',
                                           lambda s: s.browser.allowed_domains),
    ("browser", "denied_domains"): Effect("", '[browser]\ndenied_domains = ["example.com"]',
                                          lambda s: s.browser.denied_domains),
    ("browser", "max_output_bytes"): Effect("", "[browser]\nmax_output_bytes = 2048",
                                            lambda s: s.browser.max_output_bytes),
    ("browser", "profile_dir"): Effect("", '[browser]\nprofile_dir = "/tmp/profiles"', lambda s: s.browser.profile_dir),
    ("browser", "workspace_ttl"): Effect("", '[browser]\nworkspace_ttl = "0"', lambda s: s.browser.workspace_ttl,
                                         "tests/browser/test_browser_units.py::test_a_profile_unused_past_workspace_"
                                         "ttl_is_deleted_when_the_daemon_starts"),
    ("git_checkpoint", "enabled"): Effect("", "[git_checkpoint]\nenabled = false", lambda s: s.checkpoints.enabled,
                                          "tests/agents_e2e/test_checkpoints.py::test_checkpoints_turned_off_make_no_"
                                          "ref_offer_no_tool_and_diff_says_why"),
    ("git_checkpoint", "retention"): Effect("", '[git_checkpoint]\nretention = "0"',  # existence: 0 = kept
                                            lambda s: s.checkpoints.retention),
    ("git_checkpoint", "squash_on_exit"): Effect("", "[git_checkpoint]\nsquash_on_exit = true",
                                                 lambda s: s.checkpoints.squash_on_exit,
                                                 "tests/agents_e2e/test_checkpoints.py::test_a_coding_sub_task_is_"
                                                 "checkpointed_and_diff_and_undo_take_it_back_but_never_over_the_users_"
                                                 "edit"),
    ("git_checkpoint", "agent_branch_prefix"): Effect("", '[git_checkpoint]\nagent_branch_prefix = "ai/"',
                                                      lambda s: s.checkpoints.agent_branch_prefix),
    ("git_checkpoint", "generate_commit_message"): Effect(
        "", "[git_checkpoint]\ngenerate_commit_message = false", lambda s: s.checkpoints.generate_commit_message),
    ("git_checkpoint", "auto_merge_on_exit"): Effect("", "[git_checkpoint]\nauto_merge_on_exit = true",
                                                     lambda s: s.checkpoints.auto_merge_on_exit),
    ("git_checkpoint", "cleanup_agent_branch"): Effect("", "[git_checkpoint]\ncleanup_agent_branch = true",
                                                       lambda s: s.checkpoints.cleanup_agent_branch),
    **{("git_checkpoint", key): Effect("", f"[git_checkpoint]\n{key} = true", lambda s: s.warnings, warns=True)
       for key in ("stash_dirty_worktree", "checkpoint_tag_prefix", "cleanup_checkpoint_tags")},
    ("blueprint", "enable"): Effect("", "[blueprint]\nenable = false",
                                    on("repo", lambda r: "read_blueprint" in r.surface.names()),
                                    "tests/agents_e2e/test_blueprint_flow.py::test_a_repo_run_writes_the_blueprint_and_"
                                    "the_next_turn_sees_it"),
    ("blueprint", "inject_into"): Effect("", '[blueprint]\ninject_into = ["coding"]', _shape("coding")),
    ("blueprint", "index_max_tokens"): Effect("", "[blueprint]\nindex_max_tokens = 0",  # existence: 0 = nowhere
                                              _shape("director")),
    ("blueprint", "prose_budget_tokens"): Effect("", "[blueprint]\nprose_budget_tokens = 300",
                                                 on("repo", lambda r: r.blueprint.settings.prose_budget_tokens)),
}


def _tui_yolo(settings: Settings) -> str:
    from yagent.client.tui.config_facts import read_config_facts

    path = _TMP[0] / "tui.toml"
    path.write_text(f'[tui]\nyolo = "{settings.table.get("tui", {}).get("yolo", "")}"\n')
    return read_config_facts(path, {}, _TMP[0], None).yolo


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path):
    _TMP[:] = [tmp_path]
    yield
    _TMP.clear()


@pytest.mark.parametrize("key", sorted(EFFECTS), ids=lambda k: f"[{k[0]}] {k[1]}")
def test_changing_the_key_changes_what_its_reader_does(key: tuple[str, str]) -> None:
    effect = EFFECTS[key]
    a, b = settings_of(effect.a), settings_of(effect.b)
    if effect.warns:  # taken, and answered with what yagent does instead
        said = f"[git_checkpoint] {key[1]} is not acted on: "
        assert a.warnings == () and len(b.warnings) == 1 and said in b.warnings[0]
    else:
        assert a.warnings == b.warnings == (), (a.warnings, b.warnings)  # both values are ones the key takes
    seen_a, seen_b = effect.seen(a), effect.seen(b)
    assert seen_a != seen_b, (key, seen_a)


def test_every_key_the_registry_knows_has_an_effect_test() -> None:
    known = set(known_key_paths()) | {("agent", "<role>_max_steps"), ("routing.baselines", "<agent>")}
    assert known - set(EFFECTS) == set(), "a key with no test of its effect"
    assert set(EFFECTS) - known == set(), "a test for a key the registry does not know"


@pytest.mark.parametrize("key", sorted(k for k, e in EFFECTS.items() if e.acted_on))
def test_the_end_to_end_proof_named_for_a_key_exists(key: tuple[str, str]) -> None:
    path, name = EFFECTS[key].acted_on.split("::")
    assert re.search(rf"^def {re.escape(name)}\(", (REPO / path).read_text(encoding="utf-8"), re.M), \
        EFFECTS[key].acted_on

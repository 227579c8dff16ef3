"""Keys come from the `yagent` command that sends the turn, and a zero-config start needs nothing but its
environment: real daemon, real workers, real HTTP to the fake provider.

- The caller's key reaches every run of its turn (delegations included) and nothing the daemon and its workers
  wrote — files, logs, the registry, events — nor any other process's environment or command line holds it.
- A forged submit cannot put other variables into a turn, nor huge or NUL-bearing values.
- With no provider configured, OPENAI_BASE_URL in the caller's environment is enough: the model is the first chat
  model the server lists (asked once), YAGENT_MODEL overrides it per turn, and what was picked is said once.
- With no provider usable at all, the client says so once, exits 2, and starts nothing.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, llm_config
from tests.daemon_harness import DaemonProcess, arun, submit
from tests.fake_provider import FakeProvider, Step, ToolCallSpec
from yagent.ipc import daemon_listening
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import Submit, Submitted
from yagent.ipc.runtime_dir import runtime_paths
from yagent.ipc.vocabulary import ErrorCode
from yagent.ipc.zero_config import ZERO_CONFIG_VARIABLES

pytestmark = pytest.mark.e2e

KEY_VARIABLE = "YAGENT_E2E_CALLER_KEY"
NO_ZERO_CONFIG = dict.fromkeys(ZERO_CONFIG_VARIABLES, "")  # set but empty counts as unset: yagentd offers none


def _caller_env(daemon: DaemonProcess, **extra: str) -> dict[str, str]:
    """The environment of a `yagent` started from another shell than yagentd: no zero-config variable of the
    test runner's own, plus `extra`."""
    env = {k: v for k, v in daemon.env.items() if k not in ZERO_CONFIG_VARIABLES and k != KEY_VARIABLE}
    return env | extra


def _yagent(daemon: DaemonProcess, env: dict[str, str], *args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "yagent.client.cli", *args], env=env, text=True, cwd=str(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _holding(needle: bytes, skip: set[int], home: Path) -> tuple[list[str], int]:
    """Processes of this user whose environment or command line holds `needle`, and how many processes of the
    daemon at `home` were looked at — yagentd, its forkserver, its workers (a scan that saw none proves nothing)."""
    found, ours = [], 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ours += f"YAGENT_HOME={home}".encode() + b"\0" in environ
        if needle in environ or needle in cmdline:
            found.append(f"{entry}: {cmdline[:80]!r}")
    return found, ours


def _files_holding(needle: bytes, *roots: Path) -> list[str]:
    found = []
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = Path(dirpath, name)
                try:
                    if not path.is_symlink() and path.is_file() and needle in path.read_bytes():
                        found.append(str(path))
                except OSError:
                    continue
    return found


def test_the_callers_key_reaches_every_run_of_its_turn_and_is_written_nowhere(
        fake: FakeProvider, make_daemon, project: Path) -> None:
    config = llm_config(fake).replace('api_key = "fake-key"', f'api_key_env = "{KEY_VARIABLE}"')
    daemon = make_daemon(config, env=NO_ZERO_CONFIG)  # yagentd's own environment does not have the variable
    secret = f"sk-caller-{secrets.token_hex(12)}"
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "Say hello."}, id="call_chat")]),
        Step(text="The chat agent said hello."),
    ])
    # The chat agent's answer takes a while, so its worker is alive while every process is looked at.
    chat = fake.script("chat", MARKERS["chat"], [Step(text="Hello.", latency=0.3, chunk_size=1000, tool_calls=[
        ToolCallSpec("agent_exit", {"summary": "hello", "handoff": {"conclusion": "hello", "status": "ok"}})])])

    client = _yagent(daemon, _caller_env(daemon, **{KEY_VARIABLE: secret}), "-p", "Ask chat to say hello.",
                     cwd=project)
    fake.wait_for_requests(1, timeout=60, identity="chat")
    holders, looked_at = _holding(secret.encode(), {client.pid, os.getpid()}, daemon.home)
    out, err = client.communicate(timeout=90)
    assert client.returncode == 0, err
    assert holders == [] and looked_at >= 4, (holders, looked_at)  # yagentd, forkserver, director and chat workers
    chat.wait_consumed(1, timeout=5)
    assert {r.headers["authorization"] for r in fake.requests} == {f"Bearer {secret}"}
    assert {r.identity for r in fake.requests} == {"director", "chat"}

    # Everything yagentd and its workers wrote: state.db, rollouts, event logs, notes, logs, the runtime directory.
    listed = daemon.cli("--json", "ps").stdout + daemon.cli("--json", "logs", "--since", "0",
                                                           _task_of(daemon)).stdout
    assert secret not in listed
    assert _files_holding(secret.encode(), daemon.root, daemon.runtime) == []

    # A later turn from a shell without the key fails naming the variable and both places it was looked for.
    fake.script("director", MARKERS["director"], [Step(text="unused")])
    later = _yagent(daemon, _caller_env(daemon), "-c", "-p", "Again.", cwd=project)
    out, err = later.communicate(timeout=90)
    assert later.returncode == 1 and (f"{KEY_VARIABLE} is set neither in the environment of the `yagent` command "
                                      "that sent this turn nor in yagentd's own") in out, (out, err)
    assert (out + err).count("yagent setup") == 0 and "restart yagentd" not in out + err

    # Forged submits: variables the configuration does not name, huge or NUL-bearing values — refused, never used.
    async def forged(env: dict) -> RemoteError:
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as caught:
                await c.request(Submit(id=0, project=str(project), text="x", agent="director", env=env), Submitted)
            return caught.value

    for env, said in (({"LD_PRELOAD": "/tmp/x.so"}, "env names LD_PRELOAD"),
                      ({"PYTHONPATH": "/tmp"}, "env names PYTHONPATH"),
                      ({KEY_VARIABLE: "k" * 100_000}, "longer than 16 KiB"),
                      ({KEY_VARIABLE: "sk-\x00-x"}, "holds a control character")):
        error = arun(forged(env), 30)
        assert error.code == ErrorCode.BAD_REQUEST and said in str(error), (env.keys(), error)
    assert daemon.status().pid == daemon.proc.pid  # still serving


def _task_of(daemon: DaemonProcess) -> str:
    import json

    return json.loads(daemon.cli("--json", "ps").stdout)[0]["task"]


def test_with_no_provider_configured_the_callers_openai_base_url_is_enough(
        fake: FakeProvider, make_daemon, project: Path) -> None:
    daemon = make_daemon("", env=NO_ZERO_CONFIG)  # no provider at all
    fake.models = ["nomic-embed-text", "chat-a", "chat-b"]
    fake.script("director", MARKERS["director"], [Step(text=f"answer {i}") for i in range(12)])
    env = _caller_env(daemon, OPENAI_BASE_URL=fake.openai_base_url)

    first = _yagent(daemon, env, "-p", "Hi.", cwd=project)
    _, err = first.communicate(timeout=90)
    assert first.returncode == 0, err
    picked = [line for line in err.splitlines() if "no provider is configured" in line]
    assert picked == [f"yagent: no provider is configured, so yagent uses the OpenAI-compatible endpoint "
                      f"{fake.openai_base_url} (OPENAI_BASE_URL, no key; from your environment) with model chat-a "
                      "(the first chat model the server lists; YAGENT_MODEL picks another); `yagent setup` makes a "
                      "provider permanent"], err
    chats = [r for r in fake.requests if r.method == "POST"]
    assert {r.body["model"] for r in chats} == {"chat-a"} and {r.headers["authorization"] for r in chats} == {
        "Bearer none"}  # the placeholder key a local server ignores

    second = _yagent(daemon, env | {"YAGENT_MODEL": "chat-b"}, "-c", "-p", "Again.", cwd=project)
    _, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert {r.body["model"] for r in fake.requests[len(chats) + 1:] if r.method == "POST"} == {"chat-b"}
    assert [r.path for r in fake.requests if r.method == "GET"] == ["/v1/models"]  # asked once
    assert "restart" not in err
    fake.assert_no_problems()


def test_with_no_provider_usable_at_all_the_client_says_so_once_exits_2_and_starts_nothing(
        tmp_path: Path, project: Path) -> None:
    daemon = DaemonProcess(tmp_path / "d", "")
    try:
        result = subprocess.run([sys.executable, "-m", "yagent.client.cli", "-p", "Hi."], env=_caller_env(daemon),
                                text=True, capture_output=True, timeout=60, cwd=str(project))
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.splitlines() == [
            f"yagent: no LLM provider is configured in {daemon.home / 'config' / 'config.toml'}, and none is in your "
            "environment: run `yagent setup`, or export OPENAI_API_KEY (OPENAI_BASE_URL alone for a local server "
            "such as Ollama, llama.cpp or vLLM) or ANTHROPIC_API_KEY in the shell you run yagent from"]
        assert not (daemon.runtime.exists() and daemon_listening(runtime_paths(daemon.runtime)))
        assert not (daemon.home / "state.db").exists()  # no task recorded
    finally:
        daemon.close()


def test_a_zero_config_variable_in_yagentds_own_environment_serves_a_caller_without_one(
        fake: FakeProvider, make_daemon, project: Path) -> None:
    daemon = make_daemon("", env={"OPENAI_BASE_URL": fake.openai_base_url, "YAGENT_MODEL": "daemon-model"})
    fake.script("director", MARKERS["director"], [Step(text=f"answer {i}") for i in range(6)])

    async def turn() -> Submitted:
        async with daemon.client() as c:
            assert c.hello is not None and c.hello.env_provider == "openai"
            return await submit(c, project, "Hi.", agent="director")

    sub = arun(turn(), 30)
    assert "from yagentd's environment" in sub.notice and "daemon-model" in sub.notice
    fake.wait_for_requests(1, timeout=60, identity="director")
    assert fake.requests[0].body["model"] == "daemon-model"

"""The built-in code server as the MCP manager starts it: one `McpServerConfig` per project in use, made from
`[codeseek]`, `[sandbox]` and the Landlock ABI the daemon probed, never from anything a project holds.

The program is this interpreter running `python -m yagent.workers.codeintel` (the daemon never imports it). It gets
the project root, its index directory (`$YAGENT_HOME/data/codeintel/{project}`, made here, 0700), what it must never
read (the state home, the runtime directory, `deny_read`) and how to confine itself; the embeddings key, when one is
configured, reaches it in its environment (`EMBEDDINGS_KEY_ENV`), never in its arguments. Everything else about it —
supervision, restarts, idle TTL, `yagent mcp` — is the manager's, as for any server.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from yagent.ipc.codeintel_settings import (
    CODE_SERVER_MODULE,
    CODE_SERVER_NAME,
    CODE_SERVER_SOURCE,
    EMBEDDINGS_KEY_ENV,
)
from yagent.ipc.config import Settings
from yagent.ipc.mcp_settings import McpServerConfig
from yagent.ipc.private_files import make_private_dirs
from yagent.ipc.state_layout import codeintel_dir

__all__ = ["code_server_config", "is_code_server"]

_PASSED_ENV = ("PYTHONPATH",)  # where the daemon found yagent, so the server finds the same one


def code_server_config(settings: Settings, *, project_id: str, root: Path, home: Path, runtime_dir: Path, abi: int,
                       environ: Mapping[str, str], user_home: str | None = None) -> McpServerConfig | None:
    """The built-in server for the project `root`, None when `[codeseek] enabled = false`. OSError when its index
    directory cannot be made."""
    code = settings.codeintel
    if not code.enabled:
        return None
    index = codeintel_dir(home, project_id)
    make_private_dirs(index)
    _writable, deny = settings.sandbox.expanded(user_home or str(Path.home()))
    args = ["-m", CODE_SERVER_MODULE, f"--root={root}", f"--index={index}", f"--home={home}",
            f"--runtime-dir={runtime_dir}", f"--max-file-bytes={code.max_file_bytes}", f"--max-files={code.max_files}"]
    args += [f"--deny-read={path}" for path in deny]
    args += [f"--exclude={pattern}" for pattern in code.exclude]
    if not settings.sandbox.enabled:
        args += ["--landlock-abi=0", '--unconfined-reason=[sandbox] mode = "off"']
    else:
        args.append(f"--landlock-abi={abi}")
        if abi < 1:
            args.append("--unconfined-reason=this kernel has no Landlock")
        if settings.sandbox.required:
            args.append("--sandbox-required")
    env = {k: environ[k] for k in _PASSED_ENV if environ.get(k)}
    if code.hybrid:
        args += [f"--embeddings-url={code.embeddings_url}", f"--embeddings-model={code.embeddings_model}"]
        key = environ.get(code.embeddings_api_key_env, "") if code.embeddings_api_key_env else ""
        if key:
            env[EMBEDDINGS_KEY_ENV] = key
    return McpServerConfig(name=CODE_SERVER_NAME, command=sys.executable, args=tuple(args), env=env,
                           source=CODE_SERVER_SOURCE, projects=(str(root),),
                           startup_timeout=settings.mcp.startup_timeout, call_timeout=settings.mcp.call_timeout)


def is_code_server(config: McpServerConfig) -> bool:
    return config.source == CODE_SERVER_SOURCE


"""`[codeseek]`: the built-in code server (code intelligence), read by the config's one parser.

    [codeseek]
    enabled = true                 # false: no code server starts and its tools leave every surface
    max_file_bytes = 1048576       # a source file larger than this is skipped (and counted) as generated
    max_files = 200000             # files indexed at most in one project; the rest are counted, not read
    exclude = ["vendor/", "*.pb.go"]   # more ignore patterns (.gitignore syntax) beside the project's own
    embeddings_url = ""            # an OpenAI-compatible base URL ("http://127.0.0.1:11434/v1"): hybrid ranking
    embeddings_model = ""          # the model that endpoint embeds with (required with embeddings_url)
    embeddings_api_key_env = ""    # a variable in yagentd's environment holding its key (never logged)

The table keeps the seed's name. The daemon starts the server for each project in use (`daemon/codeintel_server.py`)
like any MCP server; workers learn only whether the tools are on (`RunSettings.codeintel`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = ["CODESEEK_KEYS", "CODE_SERVER_MODULE", "CODE_SERVER_NAME", "CODE_SERVER_SOURCE", "DEFAULT_MAX_FILES",
           "DEFAULT_MAX_FILE_BYTES", "EMBEDDINGS_KEY_ENV", "CodeIntelSettings", "parse_codeintel"]

CODE_SERVER_NAME = "codeintel"  # its name in `yagent mcp` and on the wire; no configured server may take it
CODE_SERVER_MODULE = "yagent.workers.codeintel"  # what the daemon runs, `python -m`, in a process of its own
CODE_SERVER_SOURCE = "built-in"  # where `yagent mcp` says it comes from
EMBEDDINGS_KEY_ENV = "YAGENT_CODEINTEL_EMBEDDINGS_KEY"  # the embeddings key reaches the server here, never in argv

CODESEEK_KEYS = ("enabled", "max_file_bytes", "max_files", "exclude", "embeddings_url", "embeddings_model",
                 "embeddings_api_key_env")
DEFAULT_MAX_FILE_BYTES = 1024 * 1024
DEFAULT_MAX_FILES = 200_000
_FILE_BYTES_RANGE = (1024, 64 * 1024 * 1024)
_FILES_RANGE = (1, 2_000_000)
_MAX_PATTERNS = 256
_MAX_TEXT = 4096
_MAX_MODEL = 256
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@record
class CodeIntelSettings(Record):
    """The resolved `[codeseek]` table."""

    enabled: bool = True
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_files: int = DEFAULT_MAX_FILES
    exclude: list[str] = field(default_factory=list)
    embeddings_url: str = ""
    embeddings_model: str = ""
    embeddings_api_key_env: str = ""

    @property
    def hybrid(self) -> bool:
        return bool(self.embeddings_url)


def parse_codeintel(table: Mapping[str, Any]) -> CodeIntelSettings:
    """The `[codeseek]` table; ValueError saying what is wrong and how to write it."""
    section = table.get("codeseek", {})
    if not isinstance(section, Mapping):
        raise ValueError("[codeseek] must be a table")
    # An unknown key is the key registry's to warn about (`config_keys`), as in every table.
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"[codeseek] enabled must be true or false, got {shown_value(enabled)}")
    exclude = section.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(p, str) for p in exclude):
        raise ValueError('[codeseek] exclude must be a list of patterns in .gitignore syntax, e.g. ["vendor/"]')
    if len(exclude) > _MAX_PATTERNS:
        raise ValueError(f"[codeseek] exclude lists {len(exclude)} patterns; at most {_MAX_PATTERNS} are taken")
    for pattern in exclude:
        if not pattern.strip() or "\x00" in pattern or "\n" in pattern or len(pattern) > _MAX_TEXT:
            raise ValueError(f"[codeseek] exclude: {shown_value(pattern)} must be one non-empty line of at most "
                             f"{_MAX_TEXT} characters")
    url = _text(section, "embeddings_url", _MAX_TEXT)
    if url and not url.startswith(("http://", "https://")):
        raise ValueError(f"[codeseek] embeddings_url must start with http:// or https://, got {shown_value(url)}")
    model = _text(section, "embeddings_model", _MAX_MODEL)
    if url and not model:
        raise ValueError("[codeseek] embeddings_url is set but embeddings_model is not: name the model the endpoint "
                         'embeds with, e.g. embeddings_model = "nomic-embed-text"')
    key_env = _text(section, "embeddings_api_key_env", _MAX_MODEL)
    if key_env and not _ENV_NAME.match(key_env):
        raise ValueError(f"[codeseek] embeddings_api_key_env must name an environment variable, got "
                         f"{shown_value(key_env)}")
    return CodeIntelSettings(
        enabled=enabled,
        max_file_bytes=_whole(section, "max_file_bytes", DEFAULT_MAX_FILE_BYTES, _FILE_BYTES_RANGE),
        max_files=_whole(section, "max_files", DEFAULT_MAX_FILES, _FILES_RANGE),
        exclude=list(exclude), embeddings_url=url.rstrip("/"), embeddings_model=model,
        embeddings_api_key_env=key_env)


def _whole(section: Mapping[str, Any], key: str, default: int, bounds: tuple[int, int]) -> int:
    value = section.get(key, default)
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"[codeseek] {key} must be a whole number from {low} to {high}, got {shown_value(value)}")
    return value


def _text(section: Mapping[str, Any], key: str, limit: int) -> str:
    value = section.get(key, "")
    if not isinstance(value, str) or "\x00" in value or "\n" in value or len(value) > limit:
        raise ValueError(f"[codeseek] {key} must be one line of text of at most {limit} characters, got "
                         f"{shown_value(value)}")
    return value.strip()

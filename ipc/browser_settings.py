"""`[browser]`: the Browser agent's Chromium, read by the config's one parser.

    [browser]
    enabled = true              # false: no browser starts; delegate_browser says it is off
    chrome_path = ""            # the Chromium (or Chrome) to run; "" = the first of chromium, chromium-browser,
                                #   google-chrome, google-chrome-stable on PATH
    mode = "headless"           # headless | headful (needs a display) | attach (to the browser at cdp_url)
    cdp_url = ""                # attach only: http://127.0.0.1:9222 or a ws:// DevTools URL of a browser you run
    idle_ttl = "15m"            # a project's browser stops this long after its last task went idle
    max_chrome = 2              # browsers (one per project) running at once; the least recently used idle one
                                #   makes room
    command_timeout = "75s"     # the longest one browser tool call may take
    dialog_policy = "accept"    # what happens to alert/confirm/prompt dialogs: accept | dismiss
    allowed_domains = []        # when not empty: only these hosts (and their subdomains) may be loaded
    denied_domains = []         # these hosts (and their subdomains) are never loaded; wins over allowed_domains
    max_output_bytes = 24000    # the most text one browser tool hands the model (a snapshot is cut there)
    profile_dir = ""            # where per-project browser profiles live; "" = $YAGENT_HOME/data/browser
    workspace_ttl = "72h"       # a project's browser profile unused this long is deleted; "0" = kept

Where `0` means something (`workspace_ttl = "0"`: kept forever) the key's existence decides. The seed's CLI keys
that only made sense for its external driver (`binary_path`, `cdp_port_base`, `cdp_timeout`, `workspace_root`) are
removed keys the registry names in a warning; so are the older `headless` and `browser_path`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from .provider_config import shown_value
from .records import Record, record

__all__ = [
    "BROWSER_HOST_MODULE",
    "BROWSER_KEYS",
    "BROWSER_MODES",
    "BROWSER_OFF",
    "DIALOG_POLICIES",
    "BrowserSettings",
    "domain_allowed",
    "parse_browser",
]

BROWSER_KEYS = ("enabled", "chrome_path", "mode", "cdp_url", "idle_ttl", "max_chrome", "command_timeout",
                "dialog_policy", "allowed_domains", "denied_domains", "max_output_bytes", "profile_dir",
                "workspace_ttl")
BROWSER_HOST_MODULE = "yagent.workers.browser"  # what the daemon runs, `python -m`, for a project's browser
BROWSER_OFF = "[browser] enabled = false in the configuration; set it to true to use the Browser agent"
BROWSER_MODES = ("headless", "headful", "attach")
DIALOG_POLICIES = ("accept", "dismiss")
DEFAULT_IDLE_TTL = 15 * 60.0
DEFAULT_COMMAND_TIMEOUT = 75.0
DEFAULT_WORKSPACE_TTL = 72 * 3600.0
DEFAULT_MAX_OUTPUT = 24_000
_MAX_CHROME = (1, 64)
_OUTPUT_RANGE = (1024, 4 * 1024 * 1024)
_MAX_DOMAINS = 512
_MAX_TEXT = 4096
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$|^\[[0-9A-Fa-f:.]+\]$")
_DAY = 86400.0


@record
class BrowserSettings(Record):
    """The resolved `[browser]` table; the daemon acts on all of it, the host on what it is started with."""

    enabled: bool = True
    chrome_path: str = ""
    mode: str = "headless"
    cdp_url: str = ""
    idle_ttl: float = DEFAULT_IDLE_TTL
    max_chrome: int = 2
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    dialog_policy: str = "accept"
    allowed_domains: list[str] = field(default_factory=list)
    denied_domains: list[str] = field(default_factory=list)
    max_output_bytes: int = DEFAULT_MAX_OUTPUT
    profile_dir: str = ""
    workspace_ttl: float = DEFAULT_WORKSPACE_TTL  # 0 = profiles are kept


def domain_allowed(host: str, allowed: list[str], denied: list[str]) -> bool:
    """Whether `host` may be loaded: not under a denied name, and under an allowed one when any is listed. A name
    covers itself and its subdomains (`example.com` covers `docs.example.com`; `*.example.com` only the latter)."""
    host = host.lower().rstrip(".")
    if any(_covers(name, host) for name in denied):
        return False
    return not allowed or any(_covers(name, host) for name in allowed)


def _covers(name: str, host: str) -> bool:
    name = name.lower().rstrip(".")
    if name.startswith("*."):
        return host.endswith(name[1:])
    return host == name or host.endswith("." + name)


def parse_browser(table: Mapping[str, Any], duration: Callable[[Any, str], float]) -> BrowserSettings:
    """The `[browser]` table; ValueError saying what is wrong and how to write it. `duration` is the config's own
    duration parser (finite, bounded)."""
    section = table.get("browser", {})
    if not isinstance(section, Mapping):
        raise ValueError("[browser] must be a table")
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"[browser] enabled must be true or false, got {shown_value(enabled)}")
    mode = section.get("mode", "headless")
    if mode not in BROWSER_MODES:
        raise ValueError(f"[browser] mode must be one of {', '.join(BROWSER_MODES)}, got {shown_value(mode)}")
    cdp_url = _text(section, "cdp_url")
    if cdp_url and not cdp_url.startswith(("http://", "https://", "ws://", "wss://")):
        raise ValueError(f"[browser] cdp_url must be an http:// or ws:// DevTools address, got {shown_value(cdp_url)}")
    if mode == "attach" and not cdp_url:
        raise ValueError('[browser] mode = "attach" needs cdp_url, the DevTools address of the browser to drive, '
                         'e.g. cdp_url = "http://127.0.0.1:9222"')
    policy = section.get("dialog_policy", "accept")
    if policy not in DIALOG_POLICIES:
        raise ValueError(f"[browser] dialog_policy must be accept or dismiss, got {shown_value(policy)}")
    timings: dict[str, float] = {}
    if "idle_ttl" in section:
        timings["idle_ttl"] = _positive(duration(section["idle_ttl"], "[browser] idle_ttl"), "idle_ttl", 30 * _DAY)
    if "command_timeout" in section:
        timings["command_timeout"] = _positive(duration(section["command_timeout"], "[browser] command_timeout"),
                                               "command_timeout", 3600.0)
    if "workspace_ttl" in section:  # existence: "0" keeps profiles forever
        timings["workspace_ttl"] = duration(section["workspace_ttl"], "[browser] workspace_ttl")
    return BrowserSettings(
        enabled=enabled, chrome_path=_text(section, "chrome_path"), mode=mode, cdp_url=cdp_url,
        max_chrome=_whole(section, "max_chrome", 2, _MAX_CHROME),
        dialog_policy=policy, allowed_domains=_domains(section, "allowed_domains"),
        denied_domains=_domains(section, "denied_domains"),
        max_output_bytes=_whole(section, "max_output_bytes", DEFAULT_MAX_OUTPUT, _OUTPUT_RANGE),
        profile_dir=_text(section, "profile_dir"), **timings)


def _positive(seconds: float, key: str, maximum: float) -> float:
    if not math.isfinite(seconds) or not 0 < seconds <= maximum:
        raise ValueError(f"[browser] {key} must be more than 0 and at most {maximum:g} seconds, got {seconds:g}")
    return seconds


def _whole(section: Mapping[str, Any], key: str, default: int, bounds: tuple[int, int]) -> int:
    value = section.get(key, default)
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"[browser] {key} must be a whole number from {low} to {high}, got {shown_value(value)}")
    return value


def _text(section: Mapping[str, Any], key: str) -> str:
    value = section.get(key, "")
    if not isinstance(value, str) or "\x00" in value or "\n" in value or len(value) > _MAX_TEXT:
        raise ValueError(f"[browser] {key} must be one line of text of at most {_MAX_TEXT} characters, got "
                         f"{shown_value(value)}")
    return value.strip()


def _domains(section: Mapping[str, Any], key: str) -> list[str]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise ValueError(f'[browser] {key} must be a list of host names, e.g. {key} = ["localhost", "example.com"]')
    if len(value) > _MAX_DOMAINS:
        raise ValueError(f"[browser] {key} lists {len(value)} hosts; at most {_MAX_DOMAINS} are taken")
    for host in value:
        if not _HOST.match(host.strip()):
            raise ValueError(f"[browser] {key}: {shown_value(host)} is not a host name; write a name like "
                             '"example.com" (its subdomains too), "*.example.com" (only them) or "127.0.0.1"')
    return [h.strip().lower() for h in value]

"""Which addresses the project's browser may load: http(s) within `[browser] allowed_domains` / `denied_domains`,
`file://` only inside the project (by real path: a link out of the project is outside), and the browser's own
harmless schemes (`about:blank`, `data:`, `blob:`). Everything else (`chrome://`, `javascript:` typed as an
address, `view-source:`, `ftp:`) is refused.

The host asks this for every request the page makes (a route on the whole context) and before `browser_open`, so a
script or a link that sends the page somewhere refused ends as a blocked request, not a loaded page.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from yagent.ipc.browser_settings import domain_allowed

__all__ = ["UrlPolicy"]

_QUIET_SCHEMES = ("about", "data", "blob")


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    project_root: Path
    allowed: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)

    def refusal(self, url: str) -> str:
        """"" when `url` may be loaded, else why not (one sentence the model reads)."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return f"{url[:200]!r} is not an address"
        scheme = parts.scheme.lower()
        if scheme in ("http", "https", "ws", "wss"):
            host = parts.hostname or ""
            if not host:
                return f"{url[:200]} names no host"
            if not domain_allowed(host, self.allowed, self.denied):
                which = "denied_domains" if not domain_allowed(host, [], self.denied) else "allowed_domains"
                return f"{host} is not allowed by [browser] {which}"
            return ""
        if scheme == "file":
            return self._file_refusal(parts.netloc, unquote(parts.path))
        if scheme in _QUIET_SCHEMES:
            return ""
        return f"{scheme or 'an address without a scheme'}: pages are not opened by yagent's browser (http, https " \
               "and file:// inside the project are)"

    def _file_refusal(self, host: str, path: str) -> str:
        if host not in ("", "localhost"):
            return f"file://{host} is another machine's file"
        try:
            real = Path(os.path.realpath(path))
            root = Path(os.path.realpath(self.project_root))
        except (OSError, ValueError):
            return f"file://{path[:200]} cannot be resolved"
        if real != root and root not in real.parents:
            return f"file://{path[:200]} is outside the project ({root}); only the project's files may be opened"
        return ""

"""httpx and httpcore log every request at INFO: the method, the URL as configured and the status.

That is one line per model request of every worker, and the URL is written out whole: a `user:password@` or a key
in the query of `api_base_url` (corporate proxies, some gateways) would land in yagentd.log in clear. Both the
daemon and its workers keep those loggers at WARNING; only a DEBUG log, chosen on purpose (`yagentd --log-level
debug`, `YAGENT_LOG_LEVEL=debug`), lets the daemon's speak.
"""

from __future__ import annotations

import logging

__all__ = ["quiet_request_lines"]

_HTTP_LOGGERS = ("httpx", "httpcore", "httpx2")


def quiet_request_lines(root_level: int) -> None:
    """Hold the HTTP client loggers at WARNING unless `root_level` asks for DEBUG."""
    level = logging.NOTSET if root_level <= logging.DEBUG else logging.WARNING
    for name in _HTTP_LOGGERS:
        logging.getLogger(name).setLevel(level)

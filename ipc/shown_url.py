"""A configured URL as yagent writes it into a message, an event or a log line.

`api_base_url` may carry a credential: `https://user:password@proxy.corp/v1` for a proxy with basic
authentication, `?key=...` for a gateway that takes its key in the query. Error texts name the URL so the user can
see which address failed, and those texts travel far: into events and rollouts, to a parent agent's model as a
tool result, to another provider with it. The password and the values of key-like query parameters are replaced
by `***`; the rest of the URL is kept, since it is what the user needs to check.
"""

from __future__ import annotations

import re

__all__ = ["shown_url"]

MASK = "***"
# `scheme://user:password@host`: the password runs from the first ':' after '//' to the last '@' before the path
# (as URL parsers split it: a raw '@' in a password must not leave its tail shown).
_USERINFO = re.compile(r"(//[^/?#@:\s]*:)[^/?#\s]*@")
# Query parameters whose value is a credential by their name (case does not matter; '-' and '_' alike).
_SECRET_PARAM = re.compile(
    r"([?&](?:key|api[-_]?key|apikey|access[-_]?token|token|secret|password|sig|signature|code)=)[^&#\s]*",
    re.IGNORECASE)


def shown_url(url: str) -> str:
    """`url` with its password and its key-like query values replaced by `***`; never raises."""
    if not isinstance(url, str):
        return repr(url)
    return _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, _USERINFO.sub(lambda m: m.group(1) + MASK + "@", url))

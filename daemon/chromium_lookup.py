"""Which Chromium the project browsers run: `[browser] chrome_path`, else the first of the usual names on PATH.

A missing one is a state, not an error: `find_chromium` says what is wrong and how to fix it, `yagent daemon status`
and the Browser agent's tool descriptions carry that text, and nothing is started.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from yagent.ipc.browser_settings import BrowserSettings

__all__ = ["CHROMIUM_NAMES", "INSTALL_HINT", "find_chromium"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "install chromium (Debian/Ubuntu: apt-get install chromium); delegate_browser is unavailable until then"


def find_chromium(settings: BrowserSettings, environ: Mapping[str, str]) -> tuple[str, str]:
    """(the executable, "") or ("", why there is none and what to do). Attaching needs no executable."""
    if settings.mode == "attach":
        return "", ""
    if settings.chrome_path:
        path = os.path.expanduser(settings.chrome_path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path, ""
        return "", f"[browser] chrome_path = {settings.chrome_path} is not an executable file: {INSTALL_HINT}, or " \
                   "point chrome_path at it"
    search = environ.get("PATH", os.defpath)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name, path=search)
        if found:
            return found, ""
    return "", f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)}): {INSTALL_HINT}, or set " \
               "[browser] chrome_path"

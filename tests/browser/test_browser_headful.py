"""`[browser] mode = "headful"`: a Chromium with a window, on a real X server (Xvfb, which `.ci/run` installs),
and the clear problem when there is no display at all. Real Chromium, real host process."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.browser.host_client import HostClient
from tests.browser.site import LocalSite
from tests.daemon_harness import wait_until

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None,
                                reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")


@pytest.fixture
def display() -> Iterator[str]:
    """A private X server on a display number it picks itself (`-displayfd`: no race for a free number)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("needs Xvfb (apt-get install xvfb; .ci/run installs it)")
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 60)
        number = os.read(read_end, 64).decode().strip() if ready else ""
        assert number.isdigit(), "Xvfb did not report its display"
        yield f":{number}"
    finally:
        os.close(read_end)
        proc.kill()
        proc.wait()


def _host_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(extra)
    return env


def test_a_headful_host_runs_a_windowed_chromium_on_the_display_and_drives_it(display: str, tmp_path: Path) -> None:
    with LocalSite() as site:
        host = HostClient("--chrome", shutil.which("chromium") or "", "--mode", "headful", "--root", str(tmp_path),
                          "--profile", str(tmp_path / "profile"), env=_host_env(DISPLAY=display))
        try:
            ready = host.ready()
            assert not ready.problem and ready.browser_pid > 0, ready
            command = psutil.Process(ready.browser_pid).cmdline()
            assert not any(arg.startswith("--headless") for arg in command), command
            assert psutil.Process(ready.browser_pid).environ().get("DISPLAY") == display
            opened = host.call("browser_open", url=site.url("/form"))
            assert not opened.is_error and "Form" in opened.content
            shot = host.call("browser_screenshot")
            assert shot.image.startswith(b"\x89PNG")
        finally:
            assert host.close() == 0
    wait_until(lambda: not _alive(ready.browser_pid), 30, "the windowed Chromium to leave with its host")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_headful_without_a_display_is_a_problem_that_says_so(tmp_path: Path) -> None:
    host = HostClient("--chrome", shutil.which("chromium") or "", "--mode", "headful", "--root", str(tmp_path),
                      "--profile", str(tmp_path / "profile"), env=_host_env())
    ready = host.ready()
    assert '[browser] mode = "headful" needs a display (DISPLAY is not set)' in ready.problem
    host.close()

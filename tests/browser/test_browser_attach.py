"""`[browser] mode = "attach"`: the host drives a Chromium somebody else started (with its own debugging
endpoint), never closes it, and says so when it goes away. Real Chromium, real host process."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.browser.host_client import HostClient
from tests.browser.site import LocalSite
from tests.daemon_harness import wait_until
from yagent.workers.browser.serve import EXIT_BROWSER_GONE

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None,
                                reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")

_LISTENING = re.compile(rb"DevTools listening on ws://127\.0\.0\.1:(\d+)/")


@pytest.fixture
def users_chromium(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A Chromium the user started with a debugging port (on a port the kernel picks), and its http endpoint."""
    args = [shutil.which("chromium") or "", "--headless", f"--user-data-dir={tmp_path / 'users-profile'}",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--no-first-run", "about:blank"]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium's sandbox cannot run as root
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    seen, deadline = b"", time.monotonic() + 60
    try:
        while not _LISTENING.search(seen):
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(proc.stderr.fileno(), 65536) if ready else b""
            assert chunk, f"Chromium did not open its debugging port: {seen[-2000:]!r}"
            seen += chunk
        port = int(_LISTENING.search(seen).group(1))  # type: ignore[union-attr]
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_an_attached_host_drives_the_users_chromium_leaves_it_running_and_says_when_it_is_gone(
        users_chromium: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    proc, endpoint = users_chromium
    project = tmp_path / "project"
    project.mkdir()
    with LocalSite() as site:
        host = HostClient("--mode", "attach", "--cdp-url", endpoint, "--root", str(project),
                          "--profile", str(tmp_path / "unused-profile"))
        ready = host.ready()
        assert not ready.problem, ready
        opened = host.call("browser_open", url=site.url("/form"))
        assert not opened.is_error and "Form" in opened.content
        assert 'textbox "Name"' in host.call("browser_snapshot").content
        # The page is in the user's Chromium: its own endpoint lists it.
        wait_until(lambda: site.url("/form") in _targets(endpoint), 10, "the user's Chromium to list the page")
        assert not (tmp_path / "unused-profile").exists()  # attach keeps no profile of its own
        # Closing the host leaves the user's browser running (and its own tabs open).
        assert host.close() == 0
        assert proc.poll() is None and psutil.pid_exists(proc.pid)

        again = HostClient("--mode", "attach", "--cdp-url", endpoint, "--root", str(project),
                           "--profile", str(tmp_path / "unused-profile"))
        assert not again.ready().problem
        os.killpg(proc.pid, signal.SIGKILL)  # the user closes their browser under a run
        proc.wait()
        # The host ends saying the browser is gone (the daemon then tells the run and starts a host next time).
        ended = wait_until(lambda: again.proc.poll() is not None, 30, "the attached host to notice its browser went")
        assert ended and again.proc.returncode == EXIT_BROWSER_GONE


def test_attaching_to_nothing_is_a_problem_naming_the_cdp_url(tmp_path: Path) -> None:
    with LocalSite() as site:  # a port that speaks HTTP but is no browser
        url = site.url("/")
    host = HostClient("--mode", "attach", "--cdp-url", url, "--root", str(tmp_path), "--profile",
                      str(tmp_path / "p"))
    ready = host.ready()
    assert f"cannot attach to the browser at [browser] cdp_url = {url}" in ready.problem
    host.close()


def _targets(endpoint: str) -> str:
    try:
        return httpx.get(f"{endpoint}/json/list", timeout=5).text
    except httpx.HTTPError:
        return ""

"""The browser host against real headless Chromium and a local site on 127.0.0.1: every tool, and the pages an
attacker serves. One host (one Chromium) for the module; each test works in a run session of its own."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.host_client import HostClient
from tests.browser.site import LocalSite
from tests.daemon_harness import wait_until

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None,
                                reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")

MAX_OUTPUT = 6000
MAX_DOWNLOAD = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    with LocalSite() as served:
        yield served


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser-project")
    (root / "index.html").write_text('<title>Project</title><a href="file:///etc/passwd">passwords</a>'
                                     '<iframe src="file:///etc/hostname"></iframe>')
    (root / "out.html").symlink_to("/etc/hostname")  # a link out of the project
    return root


@pytest.fixture(scope="module")
def host(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostClient]:
    profile = tmp_path_factory.mktemp("browser-profile") / "profile"
    client = HostClient("--chrome", shutil.which("chromium") or "", "--root", str(project), "--profile", str(profile),
                        "--deny", "localhost", "--max-output", str(MAX_OUTPUT),
                        "--max-download-bytes", str(MAX_DOWNLOAD))
    ready = client.ready()
    assert not ready.problem and ready.browser_pid > 0, ready
    yield client
    assert client.close() == 0


def ref_of(snapshot: str, role: str, name: str) -> str:
    found = re.search(rf'- {role} "{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', snapshot)
    assert found, f"no {role} {name!r} in:\n{snapshot}"
    return found.group(1)


def test_a_form_is_filled_selected_typed_and_submitted_by_reference(host: HostClient, site: LocalSite) -> None:
    opened = host.call("browser_open", url=site.url("/form"))
    assert not opened.is_error and opened.url == site.url("/form") and "Form" in opened.content
    snap = host.call("browser_snapshot").content
    name, colour, send = ref_of(snap, "textbox", "Name"), ref_of(snap, "combobox", "Colour"), ref_of(snap, "button",
                                                                                                      "Send")
    assert not host.call("browser_fill", ref=name, text="Ann").is_error
    assert "selected g" in host.call("browser_select", ref=colour, values=["Green"]).content
    assert not host.call("browser_click", ref=send).is_error
    after = host.call("browser_snapshot").content
    assert "Hello Ann in g" in after
    search = ref_of(after, "textbox", "Search")
    typed = host.call("browser_type", ref=search, text="abc", submit=True)
    assert "typed 3 characters and pressed Enter" in typed.content
    assert host.call("browser_wait", text="keys: 3").is_error is False  # a key event per character
    assert not host.call("browser_press", key="Tab").is_error
    assert "is not a key name" in host.call("browser_press", key="NoSuchKey").content
    inspected = host.call("browser_inspect", ref=name).content
    assert '"tag": "input"' in inspected and '"value": "Ann"' in inspected
    assert "scrolled down 300 px" in host.call("browser_scroll", direction="down", amount=300).content
    assert host.call("browser_eval", expression="document.title").content == '"Form"'
    shot = host.call("browser_screenshot")
    assert shot.image.startswith(b"\x89PNG") and "screenshot of the viewport" in shot.content
    stale = host.call("browser_click", ref="e999")
    assert stale.is_error and "take a new browser_snapshot" in stale.content


def test_a_late_page_is_waited_for_and_a_second_tab_and_an_alert_are_reported(host: HostClient,
                                                                               site: LocalSite) -> None:
    host.call("browser_open", url=site.url("/late"), session="run-late")
    assert "Ready now" not in host.call("browser_snapshot", session="run-late").content
    assert not host.call("browser_wait", text="Ready now", seconds=10, session="run-late").is_error
    assert 'button "Ready now"' in host.call("browser_snapshot", session="run-late").content

    host.call("browser_open", url=site.url("/form"), session="run-tabs")
    snap = host.call("browser_snapshot", session="run-tabs").content
    clicked = host.call("browser_click", ref=ref_of(snap, "link", "Open second"), session="run-tabs")
    assert "the page opened a new tab (2)" in clicked.content  # the click returns once the tab is there
    tabs = host.call("browser_tabs", action="list", session="run-tabs").content
    assert tabs.count("tab ") == 2 and "/second" in tabs
    switched = host.call("browser_tabs", action="switch", index=2, session="run-tabs")
    assert "* tab 2" in switched.content
    assert "This is the second tab." in host.call("browser_snapshot", session="run-tabs").content
    host.call("browser_tabs", action="close", session="run-tabs")
    alerted = host.call("browser_click", ref=ref_of(snap, "button", "Alert me"), session="run-tabs")
    assert "a alert dialog said 'Saved!'; it was accepted" in alerted.content
    assert "You have no tabs" in host.call("browser_status", session="run-nobody").content  # tabs are per run


def test_a_download_lands_in_the_runs_scratch_directory(host: HostClient, site: LocalSite, tmp_path: Path) -> None:
    host.call("browser_open", url=site.url("/form"), session="run-dl", downloads=tmp_path)
    snap = host.call("browser_snapshot", session="run-dl").content
    clicked = host.call("browser_click", ref=ref_of(snap, "link", "Get file"), session="run-dl",
                        downloads=tmp_path).content
    wait_until(lambda: (tmp_path / "small.txt").exists(), 20, "the download in the scratch directory")
    assert (tmp_path / "small.txt").read_text() == "hello file\n"
    assert not list(tmp_path.glob(".*.part")), "the partial file was renamed into place"
    # The note rides on the next result: the click's own when the download finished during it, else the status's.
    told = clicked + host.call("browser_status", session="run-dl").content
    assert told.count(f"downloaded small.txt (11 bytes) to {tmp_path / 'small.txt'}") == 1, told


def test_a_download_bomb_is_cancelled_at_the_cap(host: HostClient, site: LocalSite, tmp_path: Path) -> None:
    host.call("browser_open", url=site.url("/bomb-page"), session="run-bomb", downloads=tmp_path)
    snap = host.call("browser_snapshot", session="run-bomb").content
    host.call("browser_click", ref=ref_of(snap, "link", "Free download"), session="run-bomb", downloads=tmp_path)
    said = wait_until(lambda: (t := host.call("browser_status", session="run-bomb").content)
                      and ("was cancelled" in t or "did not complete" in t) and t, 30, "the bomb cancelled")
    assert "bomb.bin" in said
    assert not (tmp_path / "bomb.bin").exists()


def test_a_page_that_never_finishes_loading_costs_one_bounded_call(host: HostClient, site: LocalSite) -> None:
    hung = host.call("browser_open", url=site.url("/hang"), session="run-hang", timeout=3)
    assert hung.is_error and "did not answer within" in hung.content
    assert not host.call("browser_open", url=site.url("/second"), session="run-hang").is_error  # the tab goes on


def test_an_endless_alert_loop_closes_its_page_and_the_run_goes_on(host: HostClient, site: LocalSite) -> None:
    looped = host.call("browser_open", url=site.url("/alerts"), session="run-alerts", timeout=20)
    told = looped.content + host.call("browser_status", session="run-alerts").content
    assert "opened more than 20 dialogs in one call; it was closed" in told
    again = host.call("browser_open", url=site.url("/second"), session="run-alerts")
    assert not again.is_error and "Second" in again.content


def test_files_outside_the_project_are_never_loaded(host: HostClient, project: Path) -> None:
    refused = host.call("browser_open", url="file:///etc/passwd", session="run-files")
    assert refused.is_error and "outside the project" in refused.content
    linked = host.call("browser_open", url=f"file://{project}/out.html", session="run-files")
    assert linked.is_error and "outside the project" in linked.content  # by real path: the link leads out
    inside = host.call("browser_open", url=f"file://{project}/index.html", session="run-files")
    assert not inside.is_error
    snap = host.call("browser_snapshot", session="run-files").content
    told = inside.content + snap
    assert "file:///etc/hostname, which was blocked" in told  # the iframe's load was refused
    assert "This page has been blocked" in snap and Path("/etc/hostname").read_text().strip() not in snap
    clicked = host.call("browser_click", ref=ref_of(snap, "link", "passwords"), session="run-files")
    after = host.call("browser_snapshot", session="run-files")
    assert after.url != "file:///etc/passwd" and "root:" not in after.content  # Chromium's error page, at most
    assert "file:///etc/passwd, which was blocked" in clicked.content + after.content


def test_a_script_that_goes_to_a_denied_host_is_blocked(host: HostClient, site: LocalSite) -> None:
    host.call("browser_open", url=site.url("/to-denied"), session="run-denied")
    said = wait_until(lambda: (t := host.call("browser_status", session="run-denied").content)
                      and "blocked" in t and t, 15, "the blocked navigation")
    assert "localhost is not allowed by [browser] denied_domains" in said
    assert not [r for r in site.requests if r.startswith("localhost")]  # it never reached the server
    assert host.call("browser_open", url=f"http://localhost:{site.port}/form", session="run-denied").is_error


def test_a_huge_dom_gives_a_bounded_snapshot_and_a_part_of_it_whole(host: HostClient, site: LocalSite) -> None:
    host.call("browser_open", url=site.url("/huge"), session="run-huge")
    snap = host.call("browser_snapshot", session="run-huge", timeout=60).content
    assert len(snap.encode()) < MAX_OUTPUT + 400 and "[cut:" in snap and "max_output_bytes" in snap
    first = re.search(r'- paragraph \[ref=(e\d+)\]', snap)
    assert first is not None
    part = host.call("browser_snapshot", session="run-huge", ref=first.group(1)).content
    assert "link number 0" in part and "[cut:" not in part


def test_a_runs_release_closes_its_tabs_and_leaves_the_others(host: HostClient, site: LocalSite) -> None:
    host.call("browser_open", url=site.url("/second"), session="run-x")
    host.call("browser_open", url=site.url("/form"), session="run-y")
    host.release("run-x")
    wait_until(lambda: "You have no tabs" in host.call("browser_status", session="run-x").content, 10,
               "run-x's tabs closed")
    assert "/form" in host.call("browser_status", session="run-y").content

"""Config writes keep every comment and unrelated line; references block deletes; broken files still open."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest
import tomlkit

from tests.ipc.hostile_config_files import FILE_KIND_CASES, make_hostile
from yagent.client.setup.config_file import (
    ConfigFile,
    DeleteProvider,
    PutProvider,
    SetDefault,
    SetValue,
    StartFresh,
    provider_references,
    write,
)
from yagent.client.setup.probe import ProbeResult
from yagent.client.setup.wizard import Wizard
from yagent.ipc.config import load_settings
from yagent.ipc.provider_config import parse_llm_config, referenced_providers

COMMENTED = """\
# yagent configuration — hand written
# second header line

task_timeout = "2h"   # whole-task limit

[global.llm]
use_provider = "deep"  # the default provider

# The main provider.
[global.llm.providers.deep]
api_base_url = "https://api.deepseek.com/v1"  # endpoint
api_key_env = "DEEP_KEY"    # exported in ~/.profile
model = "deepseek-chat"
reasoning_effort = "high"   # not managed by the wizard

[global.llm.providers.spare]
api_base_url = "http://localhost:8000/v1"
api_key = "none"
model = "qwen"

[agent]
# idle limit of delegations
delegate_idle_timeout = "90s"
max_parallel_delegations = 3 # three at once

[llm]
timeout = "600s" # one request, retries included
"""

ENV = {"DEEP_KEY": "sk-test"}


def comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "#" in line]


def test_edits_keep_every_comment_and_unrelated_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED)
    config = ConfigFile.load(path)
    ops = [
        PutProvider("local", {"api_base_url": "http://127.0.0.1:11434/v1", "api_key": "none", "model": "llama3"}),
        PutProvider("deep", {"api_base_url": "https://api.deepseek.com/v1", "api_key_env": "DEEP_KEY",
                             "model": "deepseek-reasoner"}, replaces="deep"),
        DeleteProvider("spare"),
        SetDefault("local"),
        SetValue(("llm",), "timeout", "120s"),
        SetValue(("agent",), "lang", "Chinese"),
    ]
    result = write(config, ops, ENV)
    assert result.ok and result.warnings == [], result
    text = path.read_text()
    before_comments = comment_lines(COMMENTED)
    after = text.splitlines()
    for line in before_comments:
        if "model = " in line or "use_provider" in line or "timeout = " in line:
            continue  # the three edited lines are checked below, comments included
        assert line in [a.strip() for a in after], f"lost: {line}"
    assert 'use_provider = "local"  # the default provider' in text
    assert 'timeout = "120s" # one request, retries included' in text
    assert 'model = "deepseek-reasoner"' in text
    assert 'reasoning_effort = "high"   # not managed by the wizard' in text
    assert "[global.llm.providers.spare]" not in text and 'model = "qwen"' not in text
    # Unrelated lines are byte-identical and in their order.
    for line in ('task_timeout = "2h"   # whole-task limit', 'delegate_idle_timeout = "90s"',
                 'max_parallel_delegations = 3 # three at once'):
        assert line in after
    settings = load_settings(path, ENV)
    assert settings.table["global"]["llm"]["providers"]["local"]["model"] == "llama3"
    assert settings.table["agent"]["lang"] == "Chinese"


def test_a_new_file_gets_a_header_and_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "config" / "config.toml"
    config = ConfigFile.load(path)
    assert not config.exists and config.doc is not None
    result = write(config, [PutProvider("p", {"api_base_url": "http://x/v1", "api_key": "k", "model": "m"}),
                            SetDefault("p")], {})
    assert result.ok
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.startswith("# yagent configuration")
    assert tomllib.loads(text)["global"]["llm"]["use_provider"] == "p"


def test_tables_added_before_other_tables_stay_separated(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[global.llm]\nuse_provider = "a"\n\n[agent]\nlang = "English"\n')
    result = write(ConfigFile.load(path), [PutProvider("a", {"api_base_url": "http://a/v1", "api_key": "k",
                                                             "model": "m"})], {})
    assert result.ok
    assert "\n\n[agent]" in path.read_text()


def test_a_file_changed_on_disk_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED)
    config = ConfigFile.load(path)
    path.write_text(COMMENTED + "\n# edited by hand meanwhile\n")
    result = write(config, [SetValue(("llm",), "timeout", "60s")], ENV)
    assert not result.ok and "changed on disk" in result.message
    assert path.read_text().endswith("# edited by hand meanwhile\n")


def test_references_agree_with_the_shared_parser() -> None:
    raw = tomllib.loads("""
[global.llm]
use_provider = "a"
[global.llm.providers.a]
api_base_url = "http://a/v1"
api_key = "k"
model = "m"
fallback_providers = ["b", { provider = "c", weight = 2 }]
[global.llm.providers.b]
api_base_url = "http://b/v1"
api_key = "k"
model = "m"
[global.llm.providers.c]
api_base_url = "http://c/v1"
api_key = "k"
model = "m"
[global.llm.providers.d]
api_base_url = "http://d/v1"
api_key = "k"
model = "m"
[global.llm.providers.e]
api_base_url = "http://e/v1"
api_key = "k"
model = "m"
[global.llm.providers.f]
api_base_url = "http://f/v1"
api_key = "k"
model = "m"
[agents.llm]
use_provider = "d"
[agents.llm.coding]
use_provider = "e"
[tools.llm.micro_agent]
use_provider = "f"
""")
    ours = provider_references(raw)
    assert set(ours) == set(referenced_providers(parse_llm_config(raw, {}))) == {"a", "b", "c", "d", "e", "f"}
    assert ours["e"] == ["[agents.llm.coding] use_provider"]
    assert ours["c"] == ["fallback_providers of a"]


def test_a_referenced_provider_cannot_be_deleted(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED)
    w = Wizard(ConfigFile.load(path), ENV)
    assert w.screen == "providers" and list(w.providers()) == ["deep", "spare"]
    w.key("text", "d")  # deep is [global.llm] use_provider
    assert "deep cannot be deleted: [global.llm] use_provider" in w.message and w.message_error
    assert w.ops == []
    w.key("down")
    w.key("text", "d")
    assert [type(op).__name__ for op in w.ops] == ["DeleteProvider"]
    assert path.read_text() == COMMENTED  # queued only


def test_nothing_is_written_before_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED)
    mtime = path.stat().st_mtime_ns
    w = Wizard(ConfigFile.load(path), ENV)
    w.key("down")
    w.key("text", "d")
    w.key("text", "n")  # one provider left: straight to preferences
    assert w.screen == "prefs"
    w.key("right")
    w.key("enter")
    assert w.screen == "summary"
    assert [d.symbol for d in w.diff()] == ["−", "~"]
    assert path.stat().st_mtime_ns == mtime and path.read_text() == COMMENTED
    w.key("enter")  # not a write key: a repeated enter must not write
    assert path.read_text() == COMMENTED
    w.key("text", "q")
    assert w.screen == "quit"
    w.key("text", "y")
    assert w.done and w.outcome == "discarded"
    assert path.read_text() == COMMENTED
    w2 = Wizard(ConfigFile.load(path), ENV)
    w2.key("down")
    w2.key("text", "d")
    w2.key("text", "n")
    w2.key("enter")
    w2.key("text", "w")
    assert w2.done and w2.outcome == "written", w2.message
    assert "spare" not in path.read_text() and "# idle limit of delegations" in path.read_text()


@pytest.mark.parametrize("broken", ["[agent\nmax = ", "\xff\xfe not utf8", "a = 1\na = 2\n",
                                    "a = " + "[" * 3000 + "]" * 3000])  # the last: a RecursionError in both parsers
def test_a_broken_file_opens_and_can_be_replaced_keeping_the_old_one(tmp_path: Path, broken: str) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(broken.encode("latin-1"))
    config = ConfigFile.load(path)
    assert config.broken and config.doc is None
    w = Wizard(config, {})
    assert w.screen == "broken"
    w.key("text", "f")
    assert w.screen == "form" and isinstance(w.ops[0], StartFresh)
    backup = w.ops[0].backup
    for text in ("p", "http://127.0.0.1:9/v1", "key", "m"):
        w.key("text", text)
        w.key("tab")
    w.key("c-s")
    assert w.screen == "probe"
    w.probe_finished(ProbeResult(False, "down"))
    w.key("enter")  # keep it anyway
    w.key("text", "n")
    w.key("enter")
    w.key("text", "w")
    assert w.done and w.outcome == "written", w.message
    assert backup.read_bytes() == broken.encode("latin-1")
    assert load_settings(path, {}).table["global"]["llm"]["providers"]["p"]["model"] == "m"


NEW = {"api_base_url": "http://n/v1", "api_key": "k", "model": "m2"}

DOTTED_TOP = """\
# everything as dotted keys, no table headers for the providers
global.llm.use_provider = "a"
global.llm.providers.a.api_base_url = "http://a/v1"  # endpoint
global.llm.providers.a.api_key = "k"
global.llm.providers.a.model = "m"

[agent]
lang = "English"
"""

DOTTED_IN_TABLE = """\
[global.llm]
use_provider = "a"
providers.a.api_base_url = "http://a/v1"  # endpoint
providers.a.api_key = "k"
providers.a.model = "m"

[agent]
lang = "English"
"""

INLINE = """\
[global.llm]
use_provider = "a"
providers = { a = { api_base_url = "http://a/v1", api_key = "k", model = "m" } }  # one line

[agent]
lang = "English"
"""

INLINE_PROVIDER = """\
[global.llm]
use_provider = "a"

[global.llm.providers]
a = { api_base_url = "http://a/v1", api_key = "k", model = "m" }  # one line

[agent]
lang = "English"
"""


@pytest.mark.parametrize("text", [DOTTED_TOP, DOTTED_IN_TABLE, INLINE, INLINE_PROVIDER],
                         ids=["dotted-top", "dotted-in-table", "inline", "inline-provider"])
def test_adding_and_renaming_providers_in_dotted_and_inline_layouts_means_what_it_says(
        tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    config = ConfigFile.load(path)
    assert not config.broken
    result = write(config, [PutProvider("b", NEW), SetDefault("b"), PutProvider("c", NEW, replaces="b"),
                            SetDefault("c"), PutProvider("d", NEW), SetValue(("agent",), "lang", "Chinese")], {})
    assert result.ok and result.warnings == [], result
    written = path.read_text()
    table = load_settings(path, {}).table
    providers = table["global"]["llm"]["providers"]
    assert providers == {"a": {"api_base_url": "http://a/v1", "api_key": "k", "model": "m"}, "c": NEW, "d": NEW}
    assert table["global"]["llm"]["use_provider"] == "c" and table["agent"] == {"lang": "Chinese"}
    assert set(table) == {"global", "agent"}
    for line in text.splitlines():
        if "#" in line:
            assert line[line.index("#"):] in written
    if "providers.a." in text:
        assert all(line in written for line in text.splitlines() if "providers.a." in line)


def test_the_wizard_adds_a_provider_to_an_inline_providers_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(INLINE)
    w = Wizard(ConfigFile.load(path), {})
    w.key("text", "a")
    for value in ("b", "http://n/v1", "k", "m2"):
        w.key("text", value)
        w.key("tab")
    w.key("c-s")
    w.probe_finished(ProbeResult(True, "ok"))
    w.key("enter")
    assert w.screen == "providers" and list(w.providers()) == ["a", "b"]
    w.key("text", "n")
    w.key("enter")  # keep a as the default
    w.key("enter")  # preferences unchanged
    w.key("text", "w")
    assert w.done and w.outcome == "written", w.message
    assert load_settings(path, {}).table["global"]["llm"]["providers"]["b"] == NEW


class NaivePutProvider(PutProvider):
    """Adds the provider as a table header, which among dotted keys captures the keys after it."""

    def apply(self, doc):
        providers = doc["global"]["llm"]["providers"]
        providers[self.name] = tomlkit.table()
        providers[self.name]["model"] = self.fields["model"]
        return doc


def test_a_write_that_would_change_the_meaning_of_other_lines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(DOTTED_TOP)
    assert write(ConfigFile.load(path), [SetValue(("agent",), "lang", "Chinese")], {}).ok
    text = path.read_text()
    config = ConfigFile.load(path)
    result = write(config, [NaivePutProvider("b", NEW)], {})
    assert not result.ok and "nothing was written" in result.message
    assert path.read_text() == text
    assert write(config, [PutProvider("b", NEW)], {}).ok


def test_crlf_files_stay_crlf(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(COMMENTED.replace("\n", "\r\n").encode())
    result = write(ConfigFile.load(path), [PutProvider("local", NEW), SetValue(("routing",), "mode", "fixed")], ENV)
    assert result.ok, result
    data = path.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") > COMMENTED.count("\n")
    assert load_settings(path, ENV).table["routing"]["mode"] == "fixed"


def test_a_byte_order_mark_is_no_reason_to_start_over_and_is_removed_on_write(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xef\xbb\xbf" + COMMENTED.encode())
    w = Wizard(ConfigFile.load(path), ENV)
    assert w.screen == "providers" and list(w.providers()) == ["deep", "spare"]
    assert [d.symbol for d in w.diff()] == ["!"] and "byte-order mark" in w.diff()[0].text
    w.key("text", "n")
    w.key("enter")
    w.key("enter")
    w.key("text", "w")
    assert w.done and w.outcome == "written", w.message
    assert path.read_bytes() == COMMENTED.encode()
    assert load_settings(path, ENV).table["llm"]["timeout"] == "600s"


def test_a_symlinked_config_stays_a_symlink_and_keeps_its_mode(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "config.toml"
    real.parent.mkdir()
    real.write_text(COMMENTED)
    real.chmod(0o640)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    result = write(ConfigFile.load(link), [SetValue(("llm",), "timeout", "60s")], ENV)
    assert result.ok, result
    assert link.is_symlink() and link.resolve() == real
    assert 'timeout = "60s"' in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name != "dotfiles"] == ["config.toml"]  # no stray temp file


def test_a_renamed_provider_keeps_the_comments_of_the_keys_the_wizard_does_not_manage(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(COMMENTED.replace('use_provider = "deep"', 'use_provider = "spare"'))
    fields = {"api_base_url": "https://api.deepseek.com/v1", "api_key_env": "DEEP_KEY", "model": "deepseek-chat"}
    result = write(ConfigFile.load(path), [PutProvider("deepseek", fields, replaces="deep")], ENV)
    assert result.ok and result.warnings == [], result
    text = path.read_text()
    assert "[global.llm.providers.deepseek]" in text and "[global.llm.providers.deep]\n" not in text
    assert 'reasoning_effort = "high"   # not managed by the wizard' in text


@pytest.mark.parametrize("case", sorted(FILE_KIND_CASES))
def test_a_file_that_is_not_a_file_opens_as_broken_at_once_and_is_never_written_through(tmp_path: Path,
                                                                                     case: str) -> None:
    # `/setup` inside the client opens the file without the command's gate: it must not block on a pipe,
    # read /dev/zero to the end, or write through a link into a device.
    path = tmp_path / "config.toml"
    phrase = make_hostile(case, path)
    config = ConfigFile.load(path)
    assert config.doc is None and phrase in config.broken
    result = write(config, [StartFresh(tmp_path / "kept"), SetDefault("p")], {})
    assert not result.ok and "nothing was written" in result.message
    assert not (tmp_path / "kept").exists()

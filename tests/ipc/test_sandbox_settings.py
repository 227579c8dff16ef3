"""`[sandbox]` in config.toml: defaults, values, and every wrong value refused saying what is wrong."""

from __future__ import annotations

import pytest

from yagent.ipc.config import ConfigError, misplaced_keys, settings_from_table
from yagent.ipc.sandbox_settings import DEFAULT_DENY_READ, DEFAULT_WRITABLE_ROOTS, SandboxSettings


def test_defaults_confine_with_the_toolchain_caches_writable_and_the_key_stores_unreadable() -> None:
    sandbox = settings_from_table({}).sandbox
    assert sandbox == SandboxSettings() and sandbox.enabled and not sandbox.required
    writable, deny = sandbox.expanded("/home/me")
    assert "/home/me/.cache/pip" in writable and "/home/me/.cargo/registry" in writable
    assert deny == ["/home/me/.ssh", "/home/me/.gnupg", "/home/me/.aws"]
    assert len(writable) == len(DEFAULT_WRITABLE_ROOTS) and len(deny) == len(DEFAULT_DENY_READ)


def test_values_set_in_the_file_replace_the_defaults() -> None:
    sandbox = settings_from_table({"sandbox": {"mode": "off", "required": True, "writable_roots": ["/opt/cache"],
                                               "deny_read": ["~/.kube", "~"]}}).sandbox
    assert not sandbox.enabled and sandbox.required
    assert sandbox.expanded("/h") == (["/opt/cache"], ["/h/.kube", "/h"])


@pytest.mark.parametrize(("section", "says"), [
    ({"mode": "sometimes"}, 'mode must be "on" or "off"'),
    ({"mode": 1}, 'mode must be "on" or "off"'),
    ({"required": "yes"}, "required must be true or false"),
    ({"writable_roots": "~/.cache"}, "writable_roots must be a list of directories"),
    ({"writable_roots": ["relative/dir"]}, "must be an absolute path or start with ~/"),
    ({"deny_read": ["~other/.ssh"]}, "must be an absolute path or start with ~/"),
    ({"deny_read": ["/a\x00b"]}, "must be an absolute path"),
    ({"writable_roots": ["/x"] * 257}, "at most 256"),
])
def test_a_wrong_value_is_refused_saying_what_is_wrong(section: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=rf"\[sandbox\] .*{says}"):
        settings_from_table({"sandbox": section})


def test_sandbox_mode_is_not_taken_for_routing_mode_and_the_reverse() -> None:
    assert misplaced_keys({"sandbox": {"mode": "off"}, "routing": {"mode": "auto"}}) == []
    assert misplaced_keys({"llm": {"required": True}}) == [
        "[llm] required has no effect there: it belongs in [sandbox]"]

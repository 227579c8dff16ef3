"""When the setup wizard opens by itself: judged from the configuration file alone."""

from __future__ import annotations

from pathlib import Path

from yagent.client.setup.readiness import needs_setup

PROVIDER = '[global.llm.providers.p]\napi_base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'


def test_the_wizard_opens_for_a_missing_file_no_provider_or_a_placeholder_key(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert needs_setup(path, {}).kind == "fresh"
    path.write_text("# nothing yet\n")
    assert needs_setup(path, {}).kind == "no_provider"
    path.write_text(PROVIDER + 'api_key = "your-key"\n')
    assert needs_setup(path, {}).kind == "placeholder_key"
    path.write_text(PROVIDER + 'api_key = "sk-real"\n')
    assert needs_setup(path, {}) is None


def test_a_key_variable_this_shell_lacks_does_not_open_the_wizard(tmp_path: Path) -> None:
    # The daemon (a systemd service, another shell) may have it; a request that lacks it says so.
    path = tmp_path / "config.toml"
    path.write_text('[global.llm]\nuse_provider = "p"\n' + PROVIDER + 'api_key_env = "YAGENT_UNSET_KEY"\n')
    assert needs_setup(path, {}) is None
    assert needs_setup(path, {"YAGENT_UNSET_KEY": "sk-1"}) is None

"""yagent.client — the `yagent` command: CLI, full-screen terminal client, setup wizard."""

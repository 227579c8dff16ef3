"""Data package: the systemd user unit shipped with yagent (read by `yagent daemon install-unit`)."""

""".ci/run removes the virtualenv it makes (~100 MB in /tmp) however it ends: success, a failing step,
Ctrl+C. The tools it calls are stand-ins on PATH that only record what they were asked; the script is real."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.daemon_harness import wait_until

REPO = Path(__file__).resolve().parent.parent

# `python3 -m venv DIR` makes DIR/bin/activate, python and ruff; each of those fails (or hangs) when asked
# what $CI_FAIL (or $CI_HANG) names, and DIR is written to $CI_VENV.
FAKE_PYTHON3 = r"""#!/bin/sh
[ "$1 $2" = "-m venv" ] || exit 99
venv="$3"
mkdir -p "$venv/bin"
printf '%s\n' "$venv" > "$CI_VENV"
head -c 1048576 /dev/zero > "$venv/weight"
printf 'PATH="%s/bin:$PATH"; export PATH\n' "$venv" > "$venv/bin/activate"
for tool in python ruff; do
  cat > "$venv/bin/$tool" <<EOF
#!/bin/sh
step="$tool \$*"
case "\$step" in *"\$CI_HANG"*) [ -n "\$CI_HANG" ] && { touch "\$CI_HANGING"; exec sleep 600; } ;; esac
case "\$step" in *"\$CI_FAIL"*) [ -n "\$CI_FAIL" ] && exit 7 ;; esac
exit 0
EOF
  chmod +x "$venv/bin/$tool"
done
"""


@pytest.fixture
def fake_tools(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON3)
    for tool in ("tmux", "rg", "chromium"):  # present, so the script installs nothing
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CI_VENV": str(tmp_path / "venv-path"),
            "CI_HANGING": str(tmp_path / "hanging"), "CI_FAIL": "", "CI_HANG": ""}


def venv_of(env: dict[str, str]) -> Path:
    path = Path(Path(env["CI_VENV"]).read_text().strip())
    assert path.name.startswith("yagent-ci-venv.")
    return path


@pytest.mark.parametrize(("failing", "code"), [("", 0), ("python -m pip", 7), ("ruff", 7), ("python -m pytest", 7)])
def test_the_virtualenv_is_removed_when_the_run_ends(fake_tools: dict[str, str], failing: str, code: int) -> None:
    env = {**fake_tools, "CI_FAIL": failing}
    result = subprocess.run([str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == code, result.stderr
    assert not venv_of(env).exists()


def test_the_virtualenv_is_removed_when_the_run_is_interrupted(fake_tools: dict[str, str]) -> None:
    env = {**fake_tools, "CI_HANG": "python -m pytest"}
    proc = subprocess.Popen([str(REPO / ".ci" / "run")], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: Path(env["CI_HANGING"]).exists(), 30, "the test step to start")
        venv = venv_of(env)
        assert venv.exists()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in the terminal does: the whole foreground group
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not venv.exists()

"""Running git for checkpoints: a scrubbed environment, no pager, no hooks, no filters, argv lists only.

Every command runs with:
- none of the caller's `GIT_*` variables (a `GIT_DIR` or `GIT_CONFIG_PARAMETERS` inherited from the daemon's
  environment would point git elsewhere), and `GIT_DIR` / `GIT_WORK_TREE` set to what `repository.py` found and
  checked, so a `.git` file an agent swaps in later redirects nothing;
- `core.hooksPath=/dev/null` (plumbing runs hooks too: `reference-transaction`, `post-index-change`),
  `core.fsmonitor=false` (a configured monitor is a program), no GPG signing, no auto-gc, no reflog for our refs;
- every filter driver any configuration scope defines (`git config --get-regexp '^filter\\.'`, includes followed)
  emptied (`filter.<name>.clean`, `.smudge`, `.process` set to "" and `required` to false): a `.gitattributes` an
  agent writes can name a driver, but a driver's command only ever comes from configuration, so none is left to
  run. Content is stored as it is on disk (an LFS file's bytes, not its pointer).

These settings travel as `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which take any driver name
as it is (a `-c name=value` argument would be split at an `=` inside the name).

Output is bounded (`MAX_OUTPUT`); a command that fails raises `GitFailed` with git's own message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AUTHOR", "MAX_OUTPUT", "GitFailed", "GitRunner", "scrubbed_environment"]

MAX_OUTPUT = 256 * 1024 * 1024  # what one command may print; a listing of every path of a huge repository fits
AUTHOR = ("yagent", "yagent@localhost")
_TIMEOUT = 600.0  # one git command; hashing a large tree takes seconds, never minutes
_FIXED = (("core.hooksPath", "/dev/null"), ("core.fsmonitor", "false"), ("core.splitIndex", "false"),
          ("core.untrackedCache", "false"), ("gc.auto", "0"), ("maintenance.auto", "false"),
          ("core.logAllRefUpdates", "false"), ("commit.gpgSign", "false"), ("tag.gpgSign", "false"),
          ("submodule.recurse", "false"), ("core.quotePath", "false"), ("color.ui", "false"), ("core.pager", "cat"),
          ("protocol.allow", "never"))


class GitFailed(Exception):
    """A git command exited non-zero (or could not be run); `stderr` is git's own message."""

    def __init__(self, args: Sequence[str], code: int, stderr: str) -> None:
        self.args_run = list(args)
        self.code = code
        self.stderr = stderr.strip()
        shown = " ".join(args[:3])
        super().__init__(f"git {shown} failed ({code}): {self.stderr[-600:] or 'no message'}")


def scrubbed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any `GIT_*` variable, in the C locale, with no prompt and no pager."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", LANG="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat", PAGER="cat",
               GIT_NO_REPLACE_OBJECTS="1", GIT_LITERAL_PATHSPECS="1")
    env.pop("GIT_EDITOR", None)
    return env


@dataclass
class GitRunner:
    """git for one repository: `git_dir` and `work_tree` pinned (None: not known yet, for discovery only)."""

    git_dir: Path | None = None
    work_tree: Path | None = None
    binary: str = field(default_factory=lambda: shutil.which("git") or "git")
    environ: dict[str, str] = field(default_factory=scrubbed_environment)
    _neutral: dict[str, str] | None = None  # the configuration every command gets, worked out on first use

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(self.environ)
        if self.git_dir is not None:
            env["GIT_DIR"] = str(self.git_dir)
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        env.update(extra or {})
        return env

    def run(self, args: Sequence[str], *, stdin: bytes | None = None, index: Path | None = None,
            extra_env: Mapping[str, str] | None = None, cwd: Path | None = None, check: bool = True) -> bytes:
        """git `args` with the neutral configuration; its stdout. `index`: a private index file to use instead
        of the user's (`GIT_INDEX_FILE`); the user's index is never written by anything here."""
        env = {**self.env(extra_env), **self.neutral_config()}
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        argv = [self.binary, *args]
        try:
            done = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True, env=env,
                                  cwd=str(cwd or self.work_tree or os.getcwd()), timeout=_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitFailed(args, -1, f"could not run git: {exc}") from None
        if len(done.stdout) > MAX_OUTPUT:
            raise GitFailed(args, -1, f"git printed more than {MAX_OUTPUT} bytes")
        if check and done.returncode != 0:
            raise GitFailed(args, done.returncode, done.stderr.decode("utf-8", "replace"))
        return done.stdout

    def ok(self, args: Sequence[str], **kwargs: object) -> bool:
        """Whether git `args` exits 0 (a question such as `rev-parse --verify`)."""
        try:
            self.run(args, **kwargs)  # type: ignore[arg-type]
        except GitFailed:
            return False
        return True

    def neutral_config(self) -> dict[str, str]:
        """The configuration every command gets, as environment variables: the fixed settings, and every
        configured filter driver emptied."""
        if self._neutral is None:
            pairs = list(_FIXED)
            for name in self._filter_drivers():
                pairs += [(f"filter.{name}.{key}", "") for key in ("clean", "smudge", "process")]
                pairs.append((f"filter.{name}.required", "false"))
            neutral = {"GIT_CONFIG_COUNT": str(len(pairs))}
            for i, (key, value) in enumerate(pairs):
                neutral[f"GIT_CONFIG_KEY_{i}"] = key
                neutral[f"GIT_CONFIG_VALUE_{i}"] = value
            self._neutral = neutral
        return self._neutral

    def _filter_drivers(self) -> list[str]:
        """The driver names any configuration scope git reads here defines (`filter.<name>.<key>`)."""
        argv = [self.binary, "config", "-z", "--get-regexp", r"^filter\."]
        try:
            done = subprocess.run(argv, capture_output=True, env=self.env(), timeout=_TIMEOUT, check=False,
                                  cwd=str(self.work_tree or os.getcwd()))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitFailed(["config"], -1, f"could not run git: {exc}") from None
        if done.returncode not in (0, 1):  # 1: no such key
            raise GitFailed(["config", "--get-regexp"], done.returncode, done.stderr.decode("utf-8", "replace"))
        names: dict[str, None] = {}
        for entry in done.stdout.split(b"\0"):
            key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
            if key.startswith("filter.") and key.count(".") >= 2:
                names[key[len("filter."):key.rindex(".")]] = None
        return list(names)

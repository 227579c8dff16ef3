"""Which configuration file is used, and its creation on first use.

The order: a file named with `--config PATH` (yagentd, `yagent daemon start`, any `yagent` command) or, without
one, `$YAGENT_CONFIG` — used as given and never created: a missing file there is an error, because settings the
user meant to give would otherwise be replaced by defaults without a word. Else `$YAGENT_HOME/config/config.toml`
(`~/.yagent/config/config.toml`), written from the commented template (`config_template`), mode 0600 in a 0700
directory, the first time it is wanted.

The configuration belongs to the daemon: yagentd reports the file it reads in its hello and status, and a client
that names another file is refused with both names (the client's `daemon_config` check).
"""

from __future__ import annotations

import os
import secrets
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .config import ConfigError
from .config_template import CONFIG_TEMPLATE
from .home import config_path
from .private_files import make_private_dirs

__all__ = ["CONFIG_ENV", "ConfigLocation", "config_location", "ensure_config_file", "same_file"]

CONFIG_ENV = "YAGENT_CONFIG"


@dataclass(frozen=True, slots=True)
class ConfigLocation:
    path: Path
    named_by: str = ""  # "--config" or "YAGENT_CONFIG" when the user named the file; "" for the default
    reported_by_daemon: bool = False  # a running yagentd reads it: the daemon's rules apply to it, not a client's

    @property
    def named(self) -> bool:
        return bool(self.named_by)

    def prepare(self) -> bool:
        """Make the file ready to be read: a named file must exist (it is never created); the default one is
        created from the template when missing. True when it was just created. A client leaves the running
        daemon's file alone: only yagentd knows whether it was named, and says what is wrong at the next turn."""
        if self.reported_by_daemon:
            return False
        if self.named:
            if not os.path.lexists(self.path):
                raise ConfigError(
                    "the file does not exist", self.path,
                    f"{self.named_by} names a file that yagent uses as given and never creates: create it "
                    f"(`yagent --config {shlex.quote(str(self.path))} setup` writes one), fix the path, or leave "
                    f"{self.named_by} out to use the default file under $YAGENT_HOME")
            return False
        return ensure_config_file(self.path)


def config_location(flag: str | None, environ: Mapping[str, str], home: Path) -> ConfigLocation:
    """`--config` first, then `$YAGENT_CONFIG`, then the default under `home`; a relative path is taken from the
    working directory and made absolute here, so a daemon started elsewhere reads the same file."""
    for value, named_by in ((flag, "--config"), (environ.get(CONFIG_ENV), CONFIG_ENV)):
        if value:
            return ConfigLocation(Path(os.path.abspath(os.path.expanduser(value))), named_by)
    return ConfigLocation(config_path(home))


def ensure_config_file(path: Path) -> bool:
    """Write the template to `path` unless something is there already (a file, a link, even a broken one: that
    is for the reader to refuse, never to overwrite). The template appears whole or not at all: it is written to
    a private temp file and linked into place, which fails, harmlessly, if another process got there first."""
    if os.path.lexists(path):
        return False
    try:
        make_private_dirs(path.parent)
    except OSError as exc:
        raise ConfigError(f"cannot create the directory for the configuration file: {exc.strerror or exc}", path,
                          f"check that {path.parent} can be created, or name a file with --config") from None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.new")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            data = memoryview(CONFIG_TEMPLATE.encode("utf-8"))
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
    except OSError as exc:
        raise ConfigError(f"cannot write the configuration file: {exc.strerror or exc}", path,
                          f"check the permissions of {path.parent}, or name a file with --config") from None
    finally:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
    return True


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: the same resolved path, or (through links) the same inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False

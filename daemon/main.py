"""`yagentd`: the supervisor daemon's entry point. Stays in the foreground, as systemd wants."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from yagent.ipc.config import ConfigError, load_settings
from yagent.ipc.config_location import config_location
from yagent.ipc.errors import RuntimeDirError
from yagent.ipc.home import yagent_home
from yagent.ipc.private_files import keep_private, make_private_dirs
from yagent.ipc.runtime_dir import ensure_runtime_dir, resolve_runtime_dir

from .arbiter import Daemon
from .home_repair import repair_home
from .instance_lock import AlreadyRunning, InstanceLock
from .launcher import MultiprocessingLauncher
from .log_files import setup_logging
from .registry import RegistryUnreadable
from .sd_notify import SystemdNotifier
from .state_migration import migrate_state_layout

__all__ = ["main"]

EXIT_USAGE = 2

# Modules every worker needs, imported once in the forkserver so each run starts with a fork.
PRELOAD = ("zmq", "msgpack", "httpx")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("yagent")
    except Exception:
        return "0+unknown"


def _fail(lines: list[str]) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return EXIT_USAGE


def _repair_home(home: Path) -> None:
    repair = repair_home(home)
    if repair.repaired or repair.failed:
        logging.getLogger("yagent.daemon").warning(
            "made %d entries under %s private (group and other access removed: state written before yagent kept "
            "it private)%s", repair.repaired, home,
            f"; {repair.failed} could not be changed (another owner?): check them with `ls -la {home}`"
            if repair.failed else "")


def _freeze_startup_objects() -> None:
    """Leave what the daemon made before serving (its modules, settings, registry) out of every later collection.

    Measured without it, on a 20-delegation session: collections of generations 1 and 2 stopped the daemon's loop
    for up to 7 and 17 ms, most of it walking these objects; with it, at most about 1 ms. They live as long as the
    daemon anyway; a cycle among them that becomes garbage stays until it exits."""
    gc.freeze()
    logging.getLogger("yagent.daemon").info("%d objects made at startup are left out of garbage collections",
                                            gc.get_freeze_count())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="yagentd", description="yagent supervisor daemon (runs in the foreground)")
    parser.add_argument("--log-level", default=os.environ.get("YAGENT_LOG_LEVEL", "info"),
                        choices=["debug", "info", "warning", "error"])
    parser.add_argument("--version", action="version", version=f"yagentd {_version()}")
    parser.add_argument("--config", metavar="PATH",
                        help="the configuration file, used as given and never created (default: $YAGENT_CONFIG, "
                             "else $YAGENT_HOME/config/config.toml, created from a commented template)")
    args = parser.parse_args(argv)

    keep_private()  # before anything is created: all of yagentd's and its workers' state is 0600 / 0700
    home = yagent_home()
    try:
        paths = ensure_runtime_dir(resolve_runtime_dir())
    except RuntimeDirError as exc:
        return _fail([f"yagentd: {exc}"])
    location = config_location(args.config, os.environ, home)
    try:
        location.prepare()
        settings = load_settings(location.path)
    except ConfigError as exc:
        return _fail(exc.lines())

    lock = InstanceLock(paths.lock)
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        return _fail([f"yagentd: {exc}"])
    home_lock = InstanceLock(home / "yagentd.lock", note=str(paths.root))
    try:
        make_private_dirs(home)
        try:
            home_lock.acquire()
        except AlreadyRunning as exc:
            where = f"YAGENT_RUNTIME_DIR={exc.note} " if exc.note else ""
            return _fail([f"yagentd: another yagentd ({f'pid {exc.pid}' if exc.pid else 'unknown pid'}"
                          f"{f', runtime dir {exc.note}' if exc.note else ''}) already uses the state home {home}; "
                          "two daemons must not share one state.db",
                          f"stop it with `{where}yagent daemon stop`, or give this daemon its own YAGENT_HOME"])
        setup_logging(home, args.log_level)
        _repair_home(home)
        migrate_state_layout(home)  # before any run: workers look for their state in the new layout only
        # `kill -USR1 <pid>` writes every thread's stack to the log: the first question about a stuck daemon.
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        logging.getLogger("yagent.config").info("configuration: %s%s", location.path,
                                                 f" (named by {location.named_by})" if location.named else "")
        for warning in [*settings.warnings, *settings.run_settings.llm.warnings]:
            logging.getLogger("yagent.config").warning("%s: %s", location.path, warning)
        launcher = MultiprocessingLauncher("forkserver", preload=(*PRELOAD, *settings.agent_modules))
        # Before any ZeroMQ context exists: libzmq's threads must not be inherited by a fork.
        launcher.start()
        try:
            daemon = Daemon(settings, paths, home, launcher, notifier=SystemdNotifier(), version=_version(),
                            config=location)
        except RegistryUnreadable as exc:
            launcher.stop()
            return _fail([f"yagentd: {line}" for line in exc.lines()])
        _freeze_startup_objects()
        try:
            asyncio.run(daemon.serve())
        finally:
            launcher.stop()
        return daemon.exit_code
    finally:
        home_lock.release()
        lock.release()


if __name__ == "__main__":
    sys.exit(main())

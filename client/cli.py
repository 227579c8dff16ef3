"""`yagent`: the command-line client.

With no command it opens the full-screen client on the current project; `-p TEXT` runs one turn
headless. Human-readable output by default, `--json` for scripts. Exit codes are in `exit_codes`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from yagent.ipc import IpcError
from yagent.ipc.vocabulary import ControlAction, YoloLevel

from . import (
    blueprint_command,
    checkpoint_commands,
    daemon_control,
    exit_codes,
    headless,
    mcp_commands,
    skills_command,
    startup,
    task_commands,
    workflow_commands,
)
from .config_choice import ConfigChoice, ConfigMismatch, choose_config, keys_to_send

__all__ = ["build_parser", "main"]


def _project_dir(value: str | None) -> Path:
    return Path(value or os.getcwd()).expanduser().resolve()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} tasks cannot be listed; give 1 or more")
    return value


def _start_daemon_if_needed(choice: ConfigChoice) -> int | None:
    """Start yagentd for a command that needs it (README: the first such command starts it), with the file the
    user named; an exit code when it cannot be started because of the configuration, which yagentd would refuse
    too."""
    if choice.daemon is None and daemon_control.running_paths() is None:
        gate = startup.config_gate(choice.location, os.environ)
        if gate is not None:
            return gate
    started = daemon_control.ensure_daemon(choice.location.path if choice.location.named else None)
    if started is not None:
        # stderr: stdout of a headless run is its answer (or JSON lines) and nothing else.
        print(f"yagent: yagentd was not running; {started}", file=sys.stderr)
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yagent", description="yagent — a multi-agent coding assistant served by the yagentd daemon")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--config", metavar="PATH",
                        help="the configuration file (default: $YAGENT_CONFIG, else $YAGENT_HOME/config/config.toml); "
                             "it must be the one a running yagentd reads, and one yagentd started now gets")
    # `yagent run --json TEXT` works as well as `yagent --json run TEXT`; SUPPRESS keeps the top-level value.
    json_after_command = argparse.ArgumentParser(add_help=False)
    json_after_command.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                                    help="machine-readable output")
    parser.add_argument("-p", "--print", dest="print_text", nargs="+", metavar="TEXT",
                        help="run one turn headless and print its events (plain text, or JSON lines with --json)")
    parser.add_argument("--project", dest="top_project", metavar="DIR",
                        help="project directory for the client or -p (default: the current directory)")
    parser.add_argument("--new", action="store_true", help="start a new session instead of the project's latest")
    parser.add_argument("-c", "--continue", dest="continue_latest", action="store_true",
                        help="with -p: send the message to the project's latest task instead of a new one")
    parser.add_argument("--task", dest="top_task", metavar="ID",
                        help="with -p: send the message to this task (an id or a unique prefix)")
    parser.add_argument("--agent", dest="top_agent", default="director", metavar="KIND",
                        help="advanced: the agent kind that serves turns sent from this client (default: director)")
    top_yolo = parser.add_mutually_exclusive_group()
    top_yolo.add_argument("--yolo", dest="top_yolo", action="store_true",
                          help="skip authorisation prompts inside the project")
    top_yolo.add_argument("--full-yolo", dest="top_full_yolo", action="store_true",
                          help="skip all authorisation prompts and never ask questions")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    at = sub.add_parser("attach", help="open the full-screen client on a task of any project")
    at.add_argument("task", help="task id (or a unique prefix; `yagent ps` lists them)")

    sub.add_parser("setup", help="configure LLM providers and preferences (works on a broken config too)")

    d = sub.add_parser("daemon", help="start, stop or inspect yagentd")
    dsub = d.add_subparsers(dest="daemon_command", metavar="ACTION", required=True)
    ds = dsub.add_parser("start", parents=[json_after_command],
                         help="start yagentd in the background and wait until it is ready")
    ds.add_argument("--config", dest="daemon_config", metavar="PATH",
                    help="the configuration file yagentd reads, used as given and never created")
    dsub.add_parser("stop", parents=[json_after_command],
                    help="stop yagentd (runs are interrupted; `yagent continue TASK` resumes each where it stopped)")
    dsub.add_parser("status", parents=[json_after_command], help="exit 0 when yagentd is running, 3 when not")
    iu = dsub.add_parser("install-unit", help="write the systemd user unit for yagentd")
    iu.add_argument("--force", action="store_true", help="replace an existing, different unit file")
    iu.add_argument("--print", dest="print_only", action="store_true", help="print the unit instead of writing it")

    r = sub.add_parser("run", parents=[json_after_command], help="send a message to a task and stream the answer")
    r.add_argument("text", nargs="+", help="what you want done")
    r.add_argument("--project", help="project directory (default: the current directory)")
    r.add_argument("--task", help="continue this task instead of starting a new one")
    r.add_argument("--detach", action="store_true", help="submit and return at once")
    r.add_argument("--agent", default="director", help="agent kind that serves the turn (default: director)")
    yolo = r.add_mutually_exclusive_group()
    yolo.add_argument("--yolo", action="store_true", help="skip authorisation prompts inside the project")
    yolo.add_argument("--full-yolo", action="store_true",
                      help="skip all authorisation prompts, inside and outside the project, and never ask questions")
    r.add_argument("-v", "--verbose", action="store_true",
                   help="also show reasoning, every tool result, delegations and the turn's start and outcome")

    p = sub.add_parser("ps", parents=[json_after_command], help="list tasks of all projects with their runs")
    p.add_argument("--project", help="only this project directory")
    p.add_argument("-n", "--limit", type=_positive_int, default=50, help="list at most this many tasks (default: 50)")

    rs = sub.add_parser("resume", parents=[json_after_command],
                        help="list the tasks of every project that stopped midway, and whether `continue` resumes them")
    rs.add_argument("-n", "--limit", type=_positive_int, default=50,
                    help="look at this many latest tasks (default: 50)")

    sub.add_parser("top", help="the running tasks of every project and what their runs use (CPU, memory, tokens, "
                              "cost), refreshed every second; q quits")

    lg = sub.add_parser("logs", parents=[json_after_command],
                        help="print a task's record from its start: each reply and thought whole, tool calls and "
                             "turns a line each (--json: every event)")
    lg.add_argument("task")
    lg.add_argument("-f", "--follow", action="store_true", help="keep following new events")
    lg.add_argument("--since", type=int, default=0, help="start after this seq")

    for action, text in ((ControlAction.PAUSE, "pause every run of a task at its next step"),
                         (ControlAction.CONTINUE, "continue a paused task"),
                         (ControlAction.CANCEL, "cancel a task's current turn")):
        c = sub.add_parser(action, parents=[json_after_command], help=text)
        c.add_argument("task")

    sk = sub.add_parser("skills", parents=[json_after_command],
                        help="the skills a project's agents see, where each comes from, and what was not read and why")
    sk.add_argument("--project", help="project directory (default: the current directory)")
    m = sub.add_parser("mcp", parents=[json_after_command],
                       help="the MCP servers yagentd runs for every project: state, pid, tools, uptime, restarts, "
                            "errors (they run with your rights, unconfined)")
    m.add_argument("--project", help="also what this project directory would start (default: the current one)")
    msub = m.add_subparsers(dest="mcp_command", metavar="ACTION")
    mr = msub.add_parser("restart", parents=[json_after_command], help="start an MCP server again")
    mr.add_argument("name")
    mr.add_argument("--project", dest="mcp_project", help="in this project directory (default: the current one)")
    mr.add_argument("--all", dest="all_projects", action="store_true", help="in every project that runs it")
    for verb, text in (("approve", "approve the servers of the project's .mcp.json, as the file has them now"),
                       ("revoke", "withdraw the approval of the project's .mcp.json servers")):
        ma = msub.add_parser(verb, parents=[json_after_command], help=text)
        ma.add_argument("names", nargs="*", metavar="NAME", help="the servers (default: all it declares)")
        ma.add_argument("--project", dest="mcp_project", help="project directory (default: the current one)")

    wf = sub.add_parser("workflow", help="deterministic workflows: role agents driven by a router over facts on disk")
    wsub = wf.add_subparsers(dest="workflow_command", metavar="ACTION", required=True)
    wr = wsub.add_parser("run", parents=[json_after_command],
                         help="run a workflow (built in: fiction) as a task; running it again goes on where it is")
    wr.add_argument("name", help="the workflow (fiction)")
    wr.add_argument("--project", dest="workflow_project", help="project directory (default: the current directory)")
    wr.add_argument("--detach", action="store_true", help="start it and return at once")
    wr.add_argument("-v", "--verbose", action="store_true", help="also show every node's tool calls and reasoning")
    wyolo = wr.add_mutually_exclusive_group()
    wyolo.add_argument("--yolo", action="store_true", help="skip authorisation prompts inside the project")
    wyolo.add_argument("--full-yolo", action="store_true", help="skip all authorisation prompts")
    ws = wsub.add_parser("status", parents=[json_after_command],
                         help="every workflow task: where it stands and what its engine last decided, and why")
    ws.add_argument("--project", dest="workflow_project", help="only this project directory")

    a = sub.add_parser("answer", parents=[json_after_command], help="answer a question a task is waiting on")
    a.add_argument("task")
    a.add_argument("args", nargs="+", metavar="[REQUEST_ID] VALUE")

    df = sub.add_parser("diff", parents=[json_after_command],
                        help="what a task's agents changed in the project, per sub-task and file (git checkpoints)")
    df.add_argument("task", nargs="?", help="a task id or prefix (default: the project's latest task)")
    df.add_argument("--project", help="project directory for the default task (default: the current one)")
    df.add_argument("--stat", action="store_true", help="files and line counts only, no patches")
    ud = sub.add_parser("undo", parents=[json_after_command],
                        help="take back the last sub-task's changes (or all since a checkpoint), after showing them")
    ud.add_argument("task", nargs="?", help="a task id or prefix (default: the project's latest task)")
    ud.add_argument("--project", help="project directory for the default task (default: the current one)")
    ud.add_argument("--to", type=_positive_int, default=0, metavar="N",
                    help="put the project back as it was at checkpoint N of the task (`yagent diff` lists them)")
    ud.add_argument("--force", action="store_true", help="also overwrite files you changed since the agents did")
    ud.add_argument("-y", "--yes", action="store_true", help="do not ask before undoing")

    bp = sub.add_parser("blueprint", parents=[json_after_command],
                        help="the project's modules and import edges as derived now, and what Repo runs noted of them")
    bp.add_argument("--project", help="project directory (default: the current one)")
    bp.add_argument("--module", default="", help="only this module (a directory path)")
    return parser


def _yolo(full: bool, yolo: bool) -> YoloLevel:
    return YoloLevel.FULL if full else (YoloLevel.YOLO if yolo else YoloLevel.NONE)


def main(argv: list[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        # The reader went away (`yagent ps | head`): stop quietly; a later flush must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exit_codes.BROKEN_PIPE


def _dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    as_json = args.json
    try:
        return _command(parser, args, as_json)
    except ConfigMismatch as exc:
        print(f"yagent: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except IpcError as exc:
        print(f"yagent: {exc}", file=sys.stderr)
        return exit_codes.for_ipc_error(exc)
    except KeyboardInterrupt:
        return exit_codes.SIGINT


def _choose(args: argparse.Namespace) -> ConfigChoice:
    flag = getattr(args, "daemon_config", None) or args.config
    return choose_config(flag, os.environ)


def _ready_to_submit(args: argparse.Namespace, project_arg: str | None, agent: str
                     ) -> tuple[Path, ConfigChoice, int | None]:
    """The project, the config in use, and an exit code when the turn must not be sent: a missing project
    directory, a broken config, no usable provider, a daemon that cannot be started."""
    project = _project_dir(project_arg)
    choice = _choose(args)
    if not project.is_dir():
        print(f"yagent: project directory {project} does not exist", file=sys.stderr)
        return project, choice, exit_codes.USAGE
    gate = (startup.config_gate(choice.location, os.environ)
            or startup.provider_gate(choice.location, os.environ, choice.daemon, agent)
            or _start_daemon_if_needed(choice))
    return project, choice, gate


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace, as_json: bool) -> int:
    if args.command is None and args.print_text:
        project, choice, gate = _ready_to_submit(args, args.top_project, args.top_agent)
        if gate is not None:
            return gate
        return headless.run_headless(project, " ".join(args.print_text), agent=args.top_agent,
                                     yolo=_yolo(args.top_full_yolo, args.top_yolo), as_json=as_json,
                                     task=args.top_task, latest=args.continue_latest and not args.new,
                                     env=keys_to_send(choice.location.path, os.environ))
    if args.command in (None, "attach"):
        from .terminal import open_client

        yolo = _yolo(args.top_full_yolo, args.top_yolo) if (args.top_yolo or args.top_full_yolo) else ""
        return open_client(project=_project_dir(args.top_project),
                           task=args.task if args.command == "attach" else None,
                           new=args.new, agent=args.top_agent, yolo=yolo, config=_choose(args))
    if args.command == "setup":
        from .terminal import open_setup

        return open_setup(_choose(args).location)
    if args.command == "daemon":
        if args.daemon_command == "start":
            location = _choose(args).location
            return daemon_control.daemon_start(as_json, location.path if location.named else None)
        if args.daemon_command == "stop":
            return daemon_control.daemon_stop(as_json)
        if args.daemon_command == "status":
            return daemon_control.daemon_status(as_json)
        return daemon_control.daemon_install_unit(force=args.force, print_only=args.print_only)
    if args.command == "run":
        project, choice, gate = _ready_to_submit(args, args.project, args.agent)
        if gate is not None:
            return gate
        yolo = _yolo(args.full_yolo, args.yolo)
        return headless.run_headless(project, " ".join(args.text), task=args.task, agent=args.agent, yolo=yolo,
                                     detach=args.detach, as_json=as_json, verbose=args.verbose,
                                     env=keys_to_send(choice.location.path, os.environ))
    if args.command == "ps":
        project = str(_project_dir(args.project)) if args.project else None
        return _start_daemon_if_needed(_choose(args)) or task_commands.ps(project, as_json, args.limit)
    if args.command == "resume":
        return _start_daemon_if_needed(_choose(args)) or task_commands.resume_list(as_json, args.limit)
    if args.command == "top":
        from .top import top

        return _start_daemon_if_needed(_choose(args)) or top()
    if args.command == "logs":
        return _start_daemon_if_needed(_choose(args)) or task_commands.logs(args.task, follow=args.follow,
                                                                            as_json=as_json, since=args.since)
    if args.command in tuple(ControlAction):
        action = ControlAction(args.command)
        env = keys_to_send(_choose(args).location.path, os.environ) if action is ControlAction.CONTINUE else {}
        return task_commands.control(args.task, action, as_json, env)
    if args.command == "answer":
        return task_commands.answer(args.task, args.args, as_json)
    if args.command == "workflow":
        choice = _choose(args)
        gate = startup.config_gate(choice.location, os.environ) or _start_daemon_if_needed(choice)
        if gate is not None:
            return gate
        if args.workflow_command == "status":
            project = _project_dir(args.workflow_project) if args.workflow_project else None
            return workflow_commands.workflow_status(project, as_json)
        project = _project_dir(args.workflow_project)
        if not project.is_dir():
            print(f"yagent: project directory {project} does not exist", file=sys.stderr)
            return exit_codes.USAGE
        return workflow_commands.workflow_run(args.name, project, yolo=_yolo(args.full_yolo, args.yolo),
                                              detach=args.detach, as_json=as_json, verbose=args.verbose,
                                              env=keys_to_send(choice.location.path, os.environ))
    if args.command == "blueprint":
        return _start_daemon_if_needed(_choose(args)) or blueprint_command.blueprint(
            _project_dir(args.project), args.module, as_json)
    if args.command in ("diff", "undo"):
        gate = _start_daemon_if_needed(_choose(args))
        if gate is not None:
            return gate
        if args.command == "diff":
            return checkpoint_commands.diff(args.task, _project_dir(args.project), as_json=as_json,
                                            patches=not args.stat)
        return checkpoint_commands.undo(args.task, _project_dir(args.project), to=args.to, force=args.force,
                                        yes=args.yes, as_json=as_json)
    if args.command == "skills":
        return skills_command.skills(_project_dir(args.project), as_json, config=_choose(args).location.path)
    if args.command == "mcp":
        gate = _start_daemon_if_needed(_choose(args))
        if gate is not None:
            return gate
        if args.mcp_command == "restart":
            project = None if args.all_projects else _project_dir(args.mcp_project)
            return mcp_commands.mcp_restart(args.name, project, as_json)
        if args.mcp_command in ("approve", "revoke"):
            approve = args.mcp_command == "approve"
            return mcp_commands.mcp_approve(args.names, _project_dir(args.mcp_project), approve, as_json)
        return mcp_commands.mcp_status(_project_dir(args.project), as_json)
    parser.print_help()
    return exit_codes.USAGE


if __name__ == "__main__":
    sys.exit(main())

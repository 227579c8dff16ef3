"""WorkspaceGuard: resolves every path against the project root and decides what needs the user's consent."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .authorization import ApprovalStore, AuthDecision, Authorizer, AuthRequest, YoloLevel
from .beneath import FileAccess, Resolution
from .spec import AuthPolicy, Effect, ToolSpec

# realpath raises when an entry on the way is swapped mid-resolution (EINVAL from readlink); it is retried.
_RESOLVE_ATTEMPTS = 4
# Device files commands name all the time; matched before symlink resolution (/dev/stdout -> /proc/...).
SAFE_DEVICE_PATHS = frozenset(
    {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout", "/dev/stderr",
     "/dev/tty"}
)
# Trees a command may name without a prompt: scratch space and the usual binary directories
# (`/usr/bin/env python`, `mktemp -p /tmp`). Prompting for these would teach users to approve blindly.
SAFE_SYSTEM_TREES = ("/tmp", "/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin")


class WorkspaceGuard:
    """Path resolution and the authorisation gate for one project root.

    Paths are resolved with symlinks and `..` followed, so a link inside the root that points outside is
    treated as outside. Reads are never gated; writes, deletes, renames and shell commands are, as declared
    by each tool's `AuthPolicy`. Tools then reach the paths checked here only through `files`, which
    resolves them again beneath the root (or, outside it, with no link followed), so a link swapped in
    after the check cannot send them elsewhere.
    """

    def __init__(
        self,
        project_root: Path | str,
        *,
        settings_path: Path | None = None,
        session_grants: Iterable[str] = (),
        safe_dirs: Iterable[Path] = (),
        resolution: Resolution | None = None,
    ):
        self.root = Path(_realpath(os.path.expanduser(str(project_root))))
        self.files = FileAccess(self.root, resolution=resolution)
        self.approvals = ApprovalStore(self.root, settings_path, session_grants)
        self._safe_dirs = [tempfile.gettempdir(), *(str(d) for d in safe_dirs)]
        self._safe_trees: tuple[Path, ...] | None = None  # resolved at the first write outside the root

    def resolve(self, raw: str | Path, base: Path | None = None) -> Path:
        """The real absolute path `raw` names; relative paths start at `base` (default the project root)."""
        path = Path(os.path.expanduser(str(raw)))
        if not path.is_absolute():
            path = (base or self.root) / path
        return Path(_realpath(path))

    def is_inside(self, path: Path) -> bool:
        """True for the root itself and anything beneath it (`path` must already be resolved)."""
        return path == self.root or path.is_relative_to(self.root)

    def display(self, path: Path) -> str:
        """Root-relative text for paths inside the project, absolute text otherwise."""
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix() if self.is_inside(path) else str(path)

    def command_outside_paths(self, command: str, cwd: Path | None = None) -> list[Path]:
        """Paths a shell command names, or directories it changes to, outside the project root and the safe list.

        Every word is resolved (symlinks followed), so `cat link/passwd` with `link -> /etc` is outside. A
        bare `cd` (to `$HOME`), `cd -` (to `$OLDPWD`) and a `cd` through `$CDPATH` count as naming the
        directory they go to, and words are also resolved from each directory the command may `cd` into.
        Words relative to a directory that is itself outside (an outside `cwd`, which the caller reports,
        or an outside `cd` target, reported here) are covered by approving that directory, unless they
        climb out of it with `..`. The command word of a simple command is resolved through its directories
        but not its last link (`.venv/bin/python -> ~/.pyenv/...` runs a program; it touches nothing).
        """
        base = cwd or self.root
        commands = _simple_commands(_tokenize(command))
        found: list[Path] = []
        bases = self._command_directories(commands, base, found)
        for words in commands:
            for word in words:
                for part in _word_parts(word.text):
                    self._check_word(part, bases, found, command_word=word.is_command and part == word.text)
        return found

    def _allowed(self, path: Path) -> bool:
        if self.is_inside(path):
            return True
        if self._safe_trees is None:  # not on a run's way to its first request: most runs never write outside
            resolved = (Path(_realpath(t)) for t in self._safe_dirs)
            self._safe_trees = tuple(dict.fromkeys([*safe_system_trees(), *resolved]))
        return any(path.is_relative_to(t) for t in self._safe_trees)

    def _check_word(self, text: str, bases: list[Path], found: list[Path], *, command_word: bool) -> None:
        if not text or "\x00" in text:  # execve cannot carry a NUL: such a command never runs
            return
        for base in bases:
            expanded = _expand(text, base)
            if not expanded or os.path.normpath(expanded) in SAFE_DEVICE_PATHS:
                continue
            path = Path(expanded)
            if not path.is_absolute():
                if ".." not in path.parts and not self._allowed(base):
                    continue  # beneath an outside directory that is reported (and approved) as a whole
                path = base / path
            if command_word and path.name not in ("", ".", ".."):
                resolved = Path(_realpath(path.parent)) / path.name
            else:
                resolved = Path(_realpath(path))
            if not self._allowed(resolved) and resolved not in found:
                found.append(resolved)

    def _command_directories(self, commands: list[list[_Word]], base: Path, found: list[Path]) -> list[Path]:
        """`base` plus every directory the command may `cd`/`pushd` into; outside ones are added to `found`."""
        bases = [base]
        current = base
        for words in commands:
            operand = _cd_operand(words)
            if operand is None:
                continue
            if operand == "-":
                # bash imports OLDPWD from its environment when it names a directory; an earlier `cd` of the
                # same command may have changed it, but only to a directory already in `bases`.
                old = os.environ.get("OLDPWD", "")
                targets = [Path(_realpath(old))] if old and os.path.isdir(old) else []
            else:
                # From where the command is if every `cd` so far worked, and from where it started (a `cd`
                # in a subshell or after `||` may not have). `cd` alone, or with an operand that expands
                # to nothing (`cd $UNSET`), goes to $HOME.
                targets = []
                for start in dict.fromkeys((current, base)):
                    expanded = _expand(operand, start) or os.path.expanduser("~")
                    targets.extend(t for t in _cd_targets(expanded, start) if t not in targets)
            for target in targets:
                if not self._allowed(target) and target not in found:
                    found.append(target)
                if target not in bases and len(bases) < _MAX_COMMAND_DIRECTORIES:
                    bases.append(target)
            if targets:
                current = targets[0]  # bash's choice from `current`: the first $CDPATH hit, else current/dir
        return bases

    def request_for(
        self, spec: ToolSpec, args: Mapping[str, Any], paths: Mapping[str, Path], cwd: Path | None = None
    ) -> AuthRequest | None:
        """Everything this call would need approved before yolo levels and earlier approvals apply."""
        if not spec.needs_auth:
            return None
        outside = [p for p in paths.values() if not self.is_inside(p)]
        for param in spec.command_params:
            value = args.get(param)
            if isinstance(value, str):
                outside.extend(p for p in self.command_outside_paths(value, cwd) if p not in outside)
        dangerous = spec.auth is AuthPolicy.DANGEROUS and (
            spec.danger_flag is None or bool(args.get(spec.danger_flag))
        )
        if not outside and not dangerous:
            return None
        reason = ""
        if dangerous:
            if spec.danger_flag:
                reason = "the model marked this command as dangerous"
            elif Effect.EXTERNAL in spec.effects:
                reason = f"{spec.name} is a third-party MCP tool that may change things (not known to be read-only)"
            else:
                reason = f"{spec.name} removes or moves data inside the project"
        return AuthRequest(
            tool=spec.name,
            summary=self._summary(spec, args, paths),
            project_root=str(self.root),
            outside_paths=tuple(str(p) for p in outside),
            dangerous_reason=reason,
        )

    async def authorize(
        self, request: AuthRequest | None, *, yolo: YoloLevel, authorizer: Authorizer | None
    ) -> str | None:
        """None when the call may proceed, otherwise the refusal text the model should read."""
        request = _apply_yolo(request, yolo)
        if request is None or self.approvals.covers(request):
            return None
        if authorizer is None:
            return (
                f"{request.tool} needs the user's authorisation ({'; '.join(request.reasons)}), but no user "
                "channel is attached to this run. Keep the change inside the project root, or ask the user "
                "to rerun with --yolo / --full-yolo."
            )
        decision = await authorizer.authorize(request)
        self.approvals.remember(request, decision)
        if decision is AuthDecision.DENY:
            return (
                f"The user denied {request.summary!r} ({'; '.join(request.reasons)}). Do not retry it; "
                "choose another approach or ask the user what they want."
            )
        return None

    def _summary(self, spec: ToolSpec, args: Mapping[str, Any], paths: Mapping[str, Path]) -> str:
        commands = [str(args[p]) for p in spec.command_params if isinstance(args.get(p), str)]
        if commands:
            return "; ".join(commands)
        if Effect.EXTERNAL in spec.effects:  # what the user approves is the call itself: the tool and its arguments
            shown = json.dumps(dict(args), ensure_ascii=False, sort_keys=True, default=str)
            return f"{spec.name} {shown if len(shown) <= 400 else shown[:400] + '…'}"
        return " ".join([spec.name, *(self._describe(args.get(name), path) for name, path in paths.items())])

    def _describe(self, raw: Any, resolved: Path) -> str:
        """How a path argument reads in a prompt: a link is named as the link, with where it points.

        Tools that delete or move a link act on the link itself; naming only its target would have the
        user approve something other than what happens.
        """
        if isinstance(raw, str) and raw and "\x00" not in raw:
            path = Path(os.path.expanduser(raw))
            path = path if path.is_absolute() else self.root / path
            if path.name not in ("", ".", ".."):
                link = Path(_realpath(path.parent)) / path.name
                if link.is_symlink() and link != resolved:
                    return f"{self.display(link)} (a link to {self.display(resolved)})"
        return self.display(resolved)


@functools.cache
def safe_system_trees() -> tuple[Path, ...]:
    """`SAFE_SYSTEM_TREES` resolved: once per process (first in the forkserver), as only root can move them."""
    return tuple(Path(_realpath(t)) for t in SAFE_SYSTEM_TREES)


def _realpath(path: str | Path) -> str:
    """os.path.realpath, retried when an entry on the way changes kind while it is read (EINVAL, ENOENT)."""
    for _ in range(_RESOLVE_ATTEMPTS - 1):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    return os.path.realpath(path)


def _apply_yolo(request: AuthRequest | None, yolo: YoloLevel) -> AuthRequest | None:
    if request is None or yolo is YoloLevel.FULL:
        return None
    if yolo is YoloLevel.YOLO:
        request = dataclasses.replace(request, dangerous_reason="")
    return request if request.dangerous_inside or request.outside_paths else None


# Directories a command may be in, at most: each `cd` adds one or two; a long script must not cost more.
_MAX_COMMAND_DIRECTORIES = 32
_OPERATOR_CHARS = frozenset(";&|()<>")
# Words that leave the parser expecting a command word, and commands that run the command word after them.
_RESERVED_WORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
_WRAPPERS = frozenset(
    {"builtin", "command", "env", "exec", "nice", "nohup", "setsid", "stdbuf", "sudo", "time", "xargs"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclasses.dataclass(frozen=True)
class _Token:
    text: str
    operator: bool = False


@dataclasses.dataclass
class _Word:
    text: str
    is_command: bool = False  # the command word of a simple command (or of a wrapper like `sudo`)
    redirect_target: bool = False  # the operand of `>`, `<`, `2>&` ...


def _tokenize(command: str) -> list[_Token]:
    """bash's words and operators, closely enough for path checks.

    Quotes and backslashes are removed from words and never make operators (`echo ';'`); `#` starts a
    comment only at the start of a word (`a#b` is one word); a newline separates commands. An unterminated
    quote runs to the end of the text (bash would refuse the command; nothing is lost by reading on).
    """
    tokens: list[_Token] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(command)

    def flush() -> None:
        nonlocal in_word
        if in_word:
            tokens.append(_Token("".join(word)))
        word.clear()
        in_word = False

    while i < n:
        c = command[i]
        if c in " \t\r":
            flush()
            i += 1
        elif c == "\n":
            flush()
            tokens.append(_Token("\n", operator=True))
            i += 1
        elif c == "#" and not in_word:
            end = command.find("\n", i)
            i = n if end < 0 else end
        elif c == "\\":
            if command.startswith("\n", i + 1):  # line continuation
                i += 2
                continue
            word.append(command[i + 1 : i + 2])
            in_word = True
            i += 2
        elif c == "'" or (c == "$" and command.startswith("'", i + 1)):
            ansi = c == "$"
            j = i + (2 if ansi else 1)
            while j < n and command[j] != "'":
                if ansi and command[j] == "\\" and j + 1 < n:
                    j += 1
                    word.append(command[j])  # $'\'' and $'\\' (other escapes are kept as their letter)
                else:
                    word.append(command[j])
                j += 1
            in_word = True
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and command[j] != '"':
                if command[j] == "\\" and j + 1 < n and command[j + 1] in '"\\$`\n':
                    if command[j + 1] != "\n":
                        word.append(command[j + 1])
                    j += 2
                    continue
                word.append(command[j])
                j += 1
            in_word = True
            i = j + 1
        elif c in _OPERATOR_CHARS:
            flush()
            j = i
            while j < n and command[j] in _OPERATOR_CHARS:
                j += 1
            tokens.append(_Token(command[i:j], operator=True))
            i = j
        else:
            word.append(c)
            in_word = True
            i += 1
    flush()
    return tokens


def _is_redirection(operator: str) -> bool:
    # `>`, `>>`, `<`, `2>&`, `&>`, `>|`, `<<<`: the next word is a file (or a here-doc delimiter / string).
    return operator.rstrip("&|").endswith(("<", ">"))


def _simple_commands(tokens: list[_Token]) -> list[list[_Word]]:
    """The words of each simple command, with command words and redirection targets marked."""
    commands: list[list[_Word]] = [[]]
    expect_command = True
    in_wrapper = False
    redirect = False
    for token in tokens:
        if token.operator:
            if _is_redirection(token.text):
                redirect = True
                continue
            commands.append([])  # ; & && || | |& ( ) newline: a new command starts
            expect_command, in_wrapper, redirect = True, False, False
            continue
        word = _Word(token.text)
        commands[-1].append(word)
        if redirect:
            word.redirect_target = True
            redirect = False
        elif expect_command and not (
            (in_wrapper and token.text.startswith("-"))
            or _ASSIGNMENT.match(token.text)
            or token.text in _RESERVED_WORDS
        ):
            word.is_command = True
            expect_command = in_wrapper = token.text in _WRAPPERS
    return [words for words in commands if words]


def _cd_operand(words: list[_Word]) -> str | None:
    """The directory operand of a `cd`/`pushd` command: "" for a bare `cd`, "-" for `cd -`; None otherwise."""
    commands = [i for i, w in enumerate(words) if w.is_command]
    if not commands or words[commands[-1]].text not in ("cd", "pushd"):
        return None
    name = words[commands[-1]].text
    args = [w.text for w in words[commands[-1] + 1 :] if not w.redirect_target]
    while args and args[0].startswith("-") and args[0] != "-":
        if args.pop(0) == "--":
            break
    if name == "pushd":
        # A bare `pushd` or `pushd +N` only revisits directories already on the stack.
        return args[0] if args and not args[0].startswith(("+", "-")) else None
    return args[0] if args else ""


def _cd_targets(operand: str, start: Path) -> list[Path]:
    """Where `cd operand` may land from `start`: the `$CDPATH` entries holding it, then `start` itself."""
    path = Path(operand)
    if path.is_absolute():
        return [Path(_realpath(path))]
    targets: list[Path] = []
    cdpath = os.environ.get("CDPATH")
    if cdpath and not (operand in (".", "..") or operand.startswith(("./", "../"))):
        for entry in cdpath.split(":"):
            directory = Path(os.path.expanduser(entry)) if entry else start
            candidate = directory / path if directory.is_absolute() else start / directory / path
            if candidate.is_dir():
                targets.append(Path(_realpath(candidate)))
    targets.append(Path(_realpath(start / path)))
    return list(dict.fromkeys(targets))


def _expand(text: str, pwd: Path) -> str:
    """`~` and `$VAR` / `${VAR}` as bash would expand them in a shell started in `pwd` (unset = empty)."""
    text = os.path.expanduser(text)
    if "$" not in text:
        return text

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return str(pwd) if name == "PWD" else os.environ.get(name, "")

    return _VARIABLE.sub(value, text)


def _word_parts(word: str) -> list[str]:
    """The word and the paths embedded in it: `VAR=/x`, `--prefix=/x`, `-I/usr/include`, `-o/etc/x`."""
    parts = [word, *word.split("=")[1:]]
    if word.startswith("-") and "/" in word:
        parts.append(word[word.index("/") :])
    return list(dict.fromkeys(parts))

"""WorkspaceGuard: resolves every path against the project root and decides what needs the user's consent."""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .authorization import ApprovalStore, AuthDecision, Authorizer, AuthRequest, YoloLevel
from .spec import AuthPolicy, ToolSpec

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
    by each tool's `AuthPolicy`.
    """

    def __init__(
        self,
        project_root: Path | str,
        *,
        settings_path: Path | None = None,
        session_grants: Iterable[str] = (),
        safe_dirs: Iterable[Path] = (),
    ):
        self.root = Path(os.path.realpath(os.path.expanduser(str(project_root))))
        self.approvals = ApprovalStore(self.root, settings_path, session_grants)
        trees = [*SAFE_SYSTEM_TREES, tempfile.gettempdir(), *(str(d) for d in safe_dirs)]
        self._safe_trees = tuple(dict.fromkeys(Path(os.path.realpath(t)) for t in trees))

    def resolve(self, raw: str | Path, base: Path | None = None) -> Path:
        """The real absolute path `raw` names; relative paths start at `base` (default the project root)."""
        path = Path(os.path.expanduser(str(raw)))
        if not path.is_absolute():
            path = (base or self.root) / path
        return Path(os.path.realpath(path))

    def is_inside(self, path: Path) -> bool:
        """True for the root itself and anything beneath it (`path` must already be resolved)."""
        return path == self.root or path.is_relative_to(self.root)

    def display(self, path: Path) -> str:
        """Root-relative text for paths inside the project, absolute text otherwise."""
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix() if self.is_inside(path) else str(path)

    def command_outside_paths(self, command: str, cwd: Path | None = None) -> list[Path]:
        """Paths a shell command names that resolve outside the project root and the safe list."""
        base = cwd or self.root
        found: list[Path] = []
        for candidate in _path_candidates(command):
            expanded = os.path.expandvars(os.path.expanduser(candidate))
            if os.path.normpath(expanded) in SAFE_DEVICE_PATHS:
                continue
            resolved = self.resolve(expanded, base)
            if self.is_inside(resolved) or any(resolved.is_relative_to(t) for t in self._safe_trees):
                continue
            if resolved not in found:
                found.append(resolved)
        return found

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
            reason = (
                "the model marked this command as dangerous"
                if spec.danger_flag
                else f"{spec.name} removes or moves data inside the project"
            )
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
        return " ".join([spec.name, *(self.display(p) for p in paths.values())])


def _apply_yolo(request: AuthRequest | None, yolo: YoloLevel) -> AuthRequest | None:
    if request is None or yolo is YoloLevel.FULL:
        return None
    if yolo is YoloLevel.YOLO:
        request = dataclasses.replace(request, dangerous_reason="")
    return request if request.dangerous_inside or request.outside_paths else None


def _path_candidates(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    out: list[str] = []
    for token in tokens:
        parts = [token, *token.split("=")[1:]]  # VAR=/x, --prefix=/x
        if token.startswith("-") and "/" in token:
            parts.append(token[token.index("/") :])  # -I/usr/include, -o/etc/x
        out.extend(p for p in parts if _names_a_path(p))
    return out


def _names_a_path(token: str) -> bool:
    # Absolute, home-relative, or climbing with `..`: the forms that can leave the project.
    if token.startswith(("/", "~", "$HOME", "${HOME}")):
        return True
    return token == ".." or token.startswith("../") or "/../" in token or token.endswith("/..")

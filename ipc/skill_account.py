"""Which skills the agents see, and why: the one account the workers, `yagent skills` and `/skills` all read.

A skill is a procedure the user wrote for agents to follow: `<dir>/<name>/SKILL.md` (a folder that may hold
more files beside it; wins over a flat file of the same name in the same directory) or `<dir>/<name>.md`,
with front matter (`skill_front_matter.py`). The directories, read in this order, later winning a name:

    user      ~/.claude/skills, ~/.agents/skills, $YAGENT_HOME/skills
    project   .claude/skills, .agents/skills, .yagent/skills        (beneath the project's root)
    config    [skills] dirs, as listed

Every override (a name found again later) and every rejection (what is not read, and why) is recorded, and
`load_skill_account` never fails: a directory it cannot read is one more rejection. What is read is untrusted
(a cloned project's skills are anyone's): names are plain ASCII (`deploy`, `code-review`; a look-alike letter
would let one skill pass for another), a link inside a skills directory is followed only to a place inside
that same directory, a project's skills directory only to a place inside the project, and no skill is read
from yagent's own state (but `$YAGENT_HOME/skills`) or from beneath `[sandbox] deny_read`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .skill_files import SkillFileError, beneath, read_skill_text, shown_path
from .skill_front_matter import UNCLOSED, read_front_matter
from .skills_settings import SkillsSettings, expand_home

__all__ = ["MAX_ROOT_ENTRIES", "SKILL_FILE", "SKILL_HOLDERS", "Override", "Rejection", "RootState", "Skill",
           "SkillAccount", "SkillRoot", "account_json", "account_lines", "load_skill_account", "skill_roots",
           "where_to_put_skills"]

SKILL_FILE = "SKILL.md"
# The agents whose tools include `use_skill`, so whose system prompt carries the catalogue (workers' profiles
# decide; tests/skills/test_use_skill.py keeps this in step with them).
SKILL_HOLDERS = ("director", "coding", "repo", "devops", "node", "custom")
MAX_ROOT_ENTRIES = 1000
# The start of a skill file the account reads: its front matter (at most 32 KiB) and the first line after it.
_HEAD_BYTES = 40 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FOREIGN = (".claude", ".agents")


@dataclass(frozen=True, slots=True)
class SkillRoot:
    scope: str  # user, project or config
    path: str  # absolute, as it is shown
    confine: str = ""  # a project's directory must resolve beneath this (the project's root)
    own: bool = False  # $YAGENT_HOME/skills: inside yagent's state, read only as a real directory


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: str  # its SKILL.md or <name>.md, as found
    scope: str
    root: str  # the skills directory it was found in, as shown
    root_real: str  # that directory resolved: the file must stay beneath it
    folder: bool  # <name>/SKILL.md (files beside it are listed by use_skill)
    digest: str = ""
    problems: tuple[str, ...] = ()  # what was wrong with its front matter or name; shown, never dropped


@dataclass(frozen=True, slots=True)
class Override:
    name: str
    kept: Skill
    replaced: Skill


@dataclass(frozen=True, slots=True)
class Rejection:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class RootState:
    root: SkillRoot
    state: str  # "3 skills", "not there", "not read: …", "the same directory as …"


@dataclass(frozen=True, slots=True)
class SkillAccount:
    enabled: bool = True
    skills: tuple[Skill, ...] = ()  # by name
    overrides: tuple[Override, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    roots: tuple[RootState, ...] = ()
    project_root: str = ""
    _by_name: dict[str, Skill] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update((s.name, s) for s in self.skills)

    def get(self, name: str) -> Skill | None:
        return self._by_name.get(name)

    @property
    def problems(self) -> list[str]:
        """One line per rejection and per skill with a problem: what a run's start shows."""
        lines = [f"{r.path}: {r.reason}" for r in self.rejections]
        lines += [f"{s.path}: {p}" for s in self.skills for p in s.problems]
        return lines


def skill_roots(*, yagent_home: str | Path, project_root: str | Path | None, settings: SkillsSettings,
                user_home: str | None = None) -> list[SkillRoot]:
    """The skills directories in the order they are read (later wins)."""
    home = os.path.normpath(user_home if user_home is not None else os.path.expanduser("~"))
    roots = [SkillRoot("user", os.path.join(home, d, "skills")) for d in _FOREIGN]
    roots.append(SkillRoot("user", os.path.join(os.path.abspath(yagent_home), "skills"), own=True))
    if project_root is not None:
        project = os.path.abspath(project_root)
        roots += [SkillRoot("project", os.path.join(project, d, "skills"), confine=project)
                  for d in (*_FOREIGN, ".yagent")]
    roots += [SkillRoot("config", expand_home(d, home)) for d in settings.dirs]
    return roots


def load_skill_account(*, yagent_home: str | Path, project_root: str | Path | None, settings: SkillsSettings,
                       user_home: str | None = None) -> SkillAccount:
    """Read every skills directory and merge them; never raises (what cannot be read is a rejection)."""
    project = str(project_root) if project_root is not None else ""
    if not settings.enabled:
        return SkillAccount(enabled=False, project_root=project)
    home = os.path.normpath(user_home if user_home is not None else os.path.expanduser("~"))
    hidden = _hidden(str(yagent_home), settings, home)
    found: dict[str, Skill] = {}
    overrides: list[Override] = []
    rejections: list[Rejection] = []
    states: list[RootState] = []
    seen: dict[str, str] = {}
    for root in skill_roots(yagent_home=yagent_home, project_root=project_root, settings=settings, user_home=home):
        real, refusal = _resolve_root(root, hidden)
        if refusal:
            if refusal != _ABSENT:
                rejections.append(Rejection(shown_path(root.path), refusal))
            states.append(RootState(root, refusal if refusal == _ABSENT else f"not read: {refusal}"))
            continue
        if real in seen:
            states.append(RootState(root, f"the same directory as {shown_path(seen[real])}"))
            continue
        seen[real] = root.path
        try:
            skills, root_rejections = _read_root(root, real)
        except SkillFileError as exc:
            rejections.append(Rejection(shown_path(root.path), str(exc)))
            states.append(RootState(root, f"not read: {exc}"))
            continue
        rejections += root_rejections
        states.append(RootState(root, f"{len(skills)} skill{'' if len(skills) == 1 else 's'}"))
        for skill in skills:
            earlier = found.get(skill.name)
            if earlier is not None:
                overrides.append(Override(skill.name, kept=skill, replaced=earlier))
            found[skill.name] = skill
    return SkillAccount(skills=tuple(found[n] for n in sorted(found)), overrides=tuple(overrides),
                        rejections=tuple(rejections), roots=tuple(states), project_root=project)


_ABSENT = "not there"


def _hidden(yagent_home: str, settings: SkillsSettings, user_home: str) -> list[str]:
    return [os.path.realpath(yagent_home), *(os.path.realpath(expand_home(p, user_home)) for p in settings.deny_read)]


def _resolve_root(root: SkillRoot, hidden: list[str]) -> tuple[str, str]:
    """(the root resolved, "") or ("", why it is not read) — `_ABSENT` for a directory that is not there."""
    if not os.path.lexists(root.path):
        return "", _ABSENT
    link = os.path.islink(root.path)
    if root.own and link:
        return "", ("is a link; yagent reads its own skills directory only as a real directory — put the skills "
                    "there, or add the link's target to [skills] dirs")
    real = os.path.realpath(root.path)
    if not os.path.exists(real):
        return "", f"is a link to {shown_path(real)}, which does not exist"
    if not os.path.isdir(real):
        return "", "is not a directory"
    if root.confine and not beneath(real, os.path.realpath(root.confine)):
        return "", f"leads to {shown_path(real)}, outside the project; a project's skills are read from inside it"
    state_home, *denied = hidden
    own = os.path.join(state_home, "skills")
    if beneath(real, state_home) and not (beneath(real, own) and not os.path.islink(own)):
        return "", "lies in yagent's own state; no skill is read from there (but from $YAGENT_HOME/skills)"
    for place in denied:
        if beneath(real, place):
            return "", f"lies in {shown_path(place)}, which [sandbox] deny_read keeps from agents"
    return real, ""


def _read_root(root: SkillRoot, real: str) -> tuple[list[Skill], list[Rejection]]:
    rejections: list[Rejection] = []
    names: list[str] = []
    try:
        with os.scandir(real) as it:
            for entry in it:
                if len(names) >= MAX_ROOT_ENTRIES:
                    rejections.append(Rejection(shown_path(root.path), f"holds more than {MAX_ROOT_ENTRIES} entries; "
                                                                       "only that many were looked at"))
                    break
                names.append(entry.name)
    except OSError as exc:
        raise SkillFileError(f"cannot be read: {exc.strerror}") from None
    folders: dict[str, Skill] = {}
    flat: dict[str, Skill] = {}
    for name in sorted(names):
        if name.startswith("."):
            continue
        shown = shown_path(os.path.join(root.path, name))
        try:
            found = _read_entry(root, real, name)
        except SkillFileError as exc:
            rejections.append(Rejection(shown_path(exc.path) if exc.path else shown, str(exc)))
            continue
        if found is not None:
            (folders if found.folder else flat)[found.name] = found
    skills = list(folders.values())
    for name, skill in flat.items():
        if name in folders:
            rejections.append(Rejection(shown_path(skill.path), f"is not read: the folder {shown_path(name)}/ beside "
                                                                f"it holds the skill of that name"))
        else:
            skills.append(skill)
    return skills, rejections


def _read_entry(root: SkillRoot, root_real: str, name: str) -> Skill | None:
    """The skill an entry of a skills directory holds; None for an entry that is no skill (a file that is not
    Markdown); `SkillFileError` for one that cannot be used."""
    path = os.path.join(root.path, name)
    target = os.path.realpath(path)
    if not beneath(target, root_real):
        raise SkillFileError(f"is a link to {shown_path(target)}, outside {shown_path(root.path)}; a link in a skills "
                             "directory is followed only inside it (copy the skill in, or add its directory to "
                             "[skills] dirs)")
    if os.path.isdir(target):
        skill_name, file, folder = name, os.path.join(path, SKILL_FILE), True
        if not os.path.lexists(file):
            raise SkillFileError(f"is a folder without a {SKILL_FILE}; a skill folder holds its instructions in "
                                 f"{SKILL_FILE}")
    elif name.endswith(".md"):
        skill_name, file, folder = name[:-3], path, False
    else:
        return None
    if not _NAME.fullmatch(skill_name):
        raise SkillFileError(f"is named {_quoted(skill_name)}; a skill's name is 1–64 ASCII letters, digits, '-', '_' "
                             "or '.', starting with a letter or digit (a look-alike letter could pass for another "
                             "skill) — rename it")
    text, digest = read_skill_text(file, within=root_real, head=_HEAD_BYTES)
    front = read_front_matter(text)
    problems = [front.problem] if front.problem else []
    if front.problem.startswith(UNCLOSED) and len(text.encode("utf-8")) >= _HEAD_BYTES - 3:
        problems = [f"the front matter does not end within the file's first {_HEAD_BYTES // 1024} KiB; keep it short "
                    "and the long text in the body"]
    declared = front.fields.get("name")
    if isinstance(declared, str) and declared.strip() and declared.strip() != skill_name:
        problems.append(f"its front matter names it {_quoted(declared.strip())}; it is called {skill_name}, "
                        f"after its {'folder' if folder else 'file'}")
    description = front.description
    if not description:
        problems.append("it has no description (no `description` in its front matter and no text)")
    return Skill(name=skill_name, description=description, path=file, scope=root.scope, root=root.path,
                 root_real=root_real, folder=folder, digest=digest, problems=tuple(problems))


def _quoted(name: str) -> str:
    """A name as a message shows it: non-ASCII letters escaped, so a look-alike is told apart."""
    return repr(shown_path(name)[:80]).encode("ascii", "backslashreplace").decode("ascii")


def where_to_put_skills(project_root: str = "") -> str:
    """The advice a run or a command gives when there are no skills."""
    project = f"{project_root.rstrip('/')}/.yagent/skills" if project_root else "<project>/.yagent/skills"
    return (f"Put a skill in ~/.yagent/skills/NAME/SKILL.md (yours, every project) or {project}/NAME/SKILL.md "
            "(this project; ~/.claude/skills and .claude/skills are read too): Markdown instructions, optionally "
            "after a front matter of `---` lines with `description: when to use it`. `yagent skills` shows what "
            "agents see.")


def account_lines(account: SkillAccount) -> list[str]:
    """The account as `yagent skills` and `/skills` print it and a run's log records it."""
    holders = "the Director, Coding, Repo, DevOps, custom agents and workflow nodes (not Chat)"
    if not account.enabled:
        return ["skills are turned off ([skills] enabled = false in config.toml): agents see none"]
    lines = [f"{len(account.skills)} skill{'' if len(account.skills) == 1 else 's'} for {holders}"
             + (f" in {account.project_root}" if account.project_root else "") + ":"]
    width = max((len(s.name) for s in account.skills), default=0)
    for skill in account.skills:
        lines.append(f"  {skill.name:<{width}}  {skill.description or '(no description)'}  [{skill.scope}: "
                     f"{shown_path(skill.path)}]")
    if not account.skills:
        lines.append("  (none) " + where_to_put_skills(account.project_root))
    if account.overrides:
        lines.append("overridden (a later directory wins a name):")
        lines += [f"  {o.name}: {shown_path(o.replaced.path)} ({o.replaced.scope}) gives way to "
                  f"{shown_path(o.kept.path)} ({o.kept.scope})" for o in account.overrides]
    problems = account.problems
    if problems:
        lines.append("problems (fix them, then `yagent skills` again):")
        lines += [f"  {p}" for p in problems]
    lines.append("looked in:")
    lines += [f"  {shown_path(r.root.path)} ({r.root.scope}): {r.state}" for r in account.roots]
    return lines


def account_json(account: SkillAccount) -> dict[str, Any]:
    """The account for `yagent skills --json`."""
    def skill(s: Skill) -> dict[str, Any]:
        return {"name": s.name, "description": s.description, "path": shown_path(s.path), "scope": s.scope,
                "folder": s.folder, "problems": list(s.problems)}

    return {"enabled": account.enabled, "project": account.project_root, "holders": list(SKILL_HOLDERS),
            "skills": [skill(s) for s in account.skills],
            "overrides": [{"name": o.name, "kept": skill(o.kept), "replaced": skill(o.replaced)}
                          for o in account.overrides],
            "rejections": [{"path": r.path, "reason": r.reason} for r in account.rejections],
            "roots": [{"path": shown_path(r.root.path), "scope": r.root.scope, "state": r.state}
                      for r in account.roots]}

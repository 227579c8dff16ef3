"""An agent's tool surface: the tools one run may call, derived from its capability profile.

`build_surface` is the single construction path, used by production and by the golden test alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .authorization import YoloLevel
from .errors import SurfaceError, ToolDeclarationError
from .profiles import PROFILES, Profile
from .registry import REGISTRY, Registry
from .spec import Effect, ToolSpec
from .validation import check_extra_specs

LOAD_TOOL = "load_tool"


@dataclass(frozen=True)
class LoadOutcome:
    loaded: tuple[str, ...]
    already: tuple[str, ...]
    unknown: tuple[str, ...]


class Surface:
    """The tools of one run. Ask it for definitions, resolution and parallel admission; nothing else does."""

    def __init__(self, profile: Profile, static: Iterable[ToolSpec], *, yolo: YoloLevel = YoloLevel.NONE,
                 delegated: bool = False):
        self.profile = profile
        self.yolo = yolo
        self.delegated = delegated  # a delegated run: tools reserved to the root never join (`ToolSpec.root_only`)
        self._static = {s.name: s for s in static}
        self._extra: dict[str, ToolSpec] = {}
        self._loaded: set[str] = set()
        self._version = 0  # bumped by every change that can change the definitions
        # Every tool by name and the sorted names, as of `_tools_version`: a model step resolves some thirty names.
        self._tools: dict[str, ToolSpec] = {}
        self._sorted: tuple[str, ...] = ()
        self._tools_version = -1

    @property
    def version(self) -> int:
        """A number that changes whenever the definitions sent to the model may have (what they are derived from
        can be cached against it)."""
        return self._version

    @property
    def agent(self) -> str:
        return self.profile.agent

    def join(self, specs: Iterable[ToolSpec]) -> list[str]:
        """Add dynamic specs (custom delegates, MCP tools); returns the names this profile admitted.

        A spec with the name of an earlier extra replaces it (an MCP server re-listed its tools). Specs that
        break a declaration rule raise `ToolDeclarationError`; specs the profile does not admit are left out.
        """
        specs = list(specs)
        problems = check_extra_specs(specs, self._static)
        if problems:
            raise ToolDeclarationError("dynamic tools are invalid:\n" + "\n".join(f"  {p}" for p in problems))
        admitted = []
        for spec in specs:
            if self.profile.admits(spec) and _allowed_at(spec, self.yolo) and _allowed_for(spec, self.delegated):
                self._extra[spec.name] = spec
                admitted.append(spec.name)
        self._version += 1
        return admitted

    def rejoin(self, prefix: str, specs: Iterable[ToolSpec]) -> list[str]:
        """Replace the dynamic specs named with `prefix` (one source's tools, e.g. every MCP tool) by `specs`:
        those it no longer lists leave the surface, loaded or not; returns the names now admitted."""
        specs = list(specs)
        keep = {s.name for s in specs}
        for name in [n for n in self._extra if n.startswith(prefix) and n not in keep]:
            del self._extra[name]
            self._loaded.discard(name)
            self._version += 1  # already, should `join` refuse the new ones
        return self.join(specs)  # a new version

    def annotate(self, names: Iterable[str], note: str) -> None:
        """Say `note` in the descriptions of the static tools `names` this surface holds (a capability that cannot
        work in this run: the tool stays, and tells the model why instead of vanishing)."""
        for name in names:
            spec = self._static.get(name)
            if spec is not None:
                self._static[name] = dataclasses.replace(spec, description=f"UNAVAILABLE: {note}. {spec.description}")
                self._version += 1

    def _tools_now(self) -> tuple[dict[str, ToolSpec], tuple[str, ...]]:
        """Every tool by name and their names sorted (not to be changed by the caller), made again only once the
        version has moved."""
        if self._tools_version != self._version:
            tools = {**self._static, **self._extra}
            if not any(s.is_cold for s in tools.values()):
                tools.pop(LOAD_TOOL, None)  # nothing to load: keep the loader off the prompt
            self._tools, self._sorted, self._tools_version = tools, tuple(sorted(tools)), self._version
        return self._tools, self._sorted

    def names(self) -> list[str]:
        """Every tool on the surface, loaded or deferred, sorted."""
        return list(self._tools_now()[1])

    def specs(self) -> list[ToolSpec]:
        tools, names = self._tools_now()
        return [tools[n] for n in names]

    def resolve(self, name: str) -> ToolSpec | None:
        return self._tools_now()[0].get(name)

    def is_loaded(self, name: str) -> bool:
        """True when the model has the tool's schema: hot tools always, cold ones after `load_tool`."""
        spec = self.resolve(name)
        return spec is not None and (not spec.is_cold or name in self._loaded)

    def is_parallelizable(self, name: str) -> bool:
        """The one admission predicate for parallel tool execution, used by every agent loop."""
        spec = self.resolve(name)
        if spec is None:
            return False
        if not self.is_loaded(name):
            return True  # an unloaded cold tool only receives a teaching result, with no side effect
        if not spec.is_read_only:
            return False
        return not spec.is_delegation or self.profile.parallel_delegations

    def loaded_names(self) -> list[str]:
        """The names of the tools whose definitions go with a model call, sorted (without making them)."""
        return [s.name for s in self.specs() if self.is_loaded(s.name)]

    def tool_definitions(self) -> list[dict[str, Any]]:
        """Definitions to send with this step's LLM call, sorted by name so the prompt prefix stays stable."""
        return [s.definition() for s in self.specs() if self.is_loaded(s.name)]

    def definitions_digest(self) -> str:
        """A short hash of this step's definitions (changes exactly when the tool prompt changes)."""
        blob = json.dumps(self.tool_definitions(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def deferred(self) -> list[ToolSpec]:
        """Cold tools whose schema has not been loaded yet."""
        return [s for s in self.specs() if not self.is_loaded(s.name)]

    def deferred_catalogue(self) -> str:
        """System-prompt text naming the deferred tools; empty when there are none."""
        pending = self.deferred()
        if not pending:
            return ""
        lines = "\n".join(f"- {s.catalogue_line()}" for s in pending)
        return (
            f"Deferred tools: their parameters are not loaded yet. Call {LOAD_TOOL} with their names before "
            f"the first use; they become callable from the next step.\n{lines}"
        )

    def materialize(self, names: Iterable[str]) -> LoadOutcome:
        """Load cold tools so their definitions are sent from the next step on."""
        loaded, already, unknown = [], [], []
        for name in dict.fromkeys(names):
            spec = self.resolve(name)
            if spec is None or not spec.is_cold:
                (already if spec is not None else unknown).append(name)
            elif name in self._loaded:
                already.append(name)
            else:
                self._loaded.add(name)
                loaded.append(name)
                self._version += 1
        return LoadOutcome(tuple(loaded), tuple(already), tuple(unknown))

    def materialized(self) -> frozenset[str]:
        """Cold tools loaded so far (a resumed run restores them with `restore_materialized`)."""
        return frozenset(self._loaded)

    def restore_materialized(self, names: Iterable[str]) -> None:
        self.materialize(names)


def build_surface(
    agent: str,
    *,
    yolo: YoloLevel = YoloLevel.NONE,
    extra_specs: Iterable[ToolSpec] = (),
    pick: Iterable[str] | None = None,
    registry: Registry = REGISTRY,
    without: Effect = Effect.NONE,
    delegated: bool = False,
) -> Surface:
    """The surface for `agent`, from its profile over the static registry plus dynamic extras.

    `pick` narrows a palette profile (`custom`) to the tools the Meta agent chose; control tools such as
    `agent_exit` always stay. `without` leaves out the static tools carrying any of these effects: a capability
    turned off for this run (`[codeseek] enabled = false` takes CODE_INDEX away). `delegated`: the run was delegated
    by another agent, so tools reserved to the root run stay off whatever its profile grants.
    """
    profile = PROFILES.get(agent)
    if profile is None:
        raise SurfaceError(f"no capability profile for agent {agent!r}; known agents: {sorted(PROFILES)}")
    static = list(_admitted(registry, profile, yolo, without, delegated))
    if pick is not None:
        static = _narrow(profile, static, list(pick))
    surface = Surface(profile, static, yolo=yolo, delegated=delegated)
    surface.join(extra_specs)
    return surface


# The static specs a profile admits, by (profile, yolo, without, delegated), for each sealed registry: the same for
# every run, and some two hundred flag operations each time (the forkserver works out the usual ones, `warm_surfaces`).
_ADMITTED: weakref.WeakKeyDictionary[Registry, dict[tuple[Profile, YoloLevel, Effect, bool], tuple[ToolSpec, ...]]] = (
    weakref.WeakKeyDictionary())


def _admitted(registry: Registry, profile: Profile, yolo: YoloLevel, without: Effect,
              delegated: bool) -> tuple[ToolSpec, ...]:
    known = _ADMITTED.get(registry) if registry.frozen else None  # one still being filled may change
    key = (profile, yolo, without, delegated)
    found = known.get(key) if known is not None else None
    if found is None:
        found = tuple(s for s in registry.specs() if profile.admits(s) and _allowed_at(s, yolo)
                      and not s.effects & without and _allowed_for(s, delegated))
        if registry.frozen:
            _ADMITTED.setdefault(registry, {})[key] = found
    return found


def warm_surfaces(switchable: Iterable[Effect] = (), registry: Registry = REGISTRY) -> None:
    """Work out, in the forkserver, what every profile admits of the static registry, root and delegated, with each
    combination of the `switchable` capabilities left out: every worker then finds its run's list made."""
    offs = [Effect.NONE]
    for effect in switchable:
        offs += [off | effect for off in offs]
    for profile in PROFILES.values():
        for delegated in (False, True):
            for off in offs:
                _admitted(registry, profile, YoloLevel.NONE, off, delegated)


def palette(agent: str = "custom", registry: Registry = REGISTRY, *, yolo: YoloLevel | None = None) -> list[ToolSpec]:
    """The tools a palette profile offers the Meta agent, sorted by name; with `yolo`, only those a run at
    that level may hold (no interactive tools under --full-yolo)."""
    profile = PROFILES[agent]
    return sorted((s for s in registry.specs() if profile.admits(s) and (yolo is None or _allowed_at(s, yolo))),
                  key=lambda s: s.name)


def _narrow(profile: Profile, static: list[ToolSpec], pick: list[str]) -> list[ToolSpec]:
    if not profile.palette:
        raise SurfaceError(f"agent {profile.agent!r} has a fixed surface; only palette profiles accept a pick")
    offered = {s.name for s in static}
    outside = sorted(set(pick) - offered)
    if outside:
        raise SurfaceError(f"tools {outside} are not in the {profile.agent} palette; choose from {sorted(offered)}")
    return [s for s in static if s.name in pick or Effect.CONTROL in s.effects]


def _allowed_for(spec: ToolSpec, delegated: bool) -> bool:
    # The surface line of the two that keep root-only tools from a child (the dispatcher's is `invoke_tool`).
    return not (delegated and spec.root_only)


def _allowed_at(spec: ToolSpec, yolo: YoloLevel) -> bool:
    # --full-yolo means nobody is there to answer: interactive tools leave every surface.
    return not (yolo is YoloLevel.FULL and spec.is_interactive)

"""The static tool registry: filled while the tool modules import, read-only once sealed.

Dynamic specs (custom agents' `delegate_<name>`, MCP tools `mcp__server__tool`) never enter it; they
join a `Surface` through its extra-specs input instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .errors import ToolDeclarationError
from .spec import ToolSpec


class Registry:
    """An ordered collection of tool specs. Duplicates are kept so validation can report them."""

    def __init__(self, specs: Iterable[ToolSpec] = ()):
        self._specs: list[ToolSpec] = list(specs)
        self._frozen = False

    def register(self, spec: ToolSpec) -> ToolSpec:
        """Add `spec`; raises once the registry is frozen (after package import)."""
        if self._frozen:
            raise ToolDeclarationError(
                f"cannot register {spec.name!r}: the static registry is sealed. Dynamic tools join a "
                "surface through build_surface(extra_specs=...) or Surface.join()."
            )
        self._specs.append(spec)
        return spec

    def freeze(self) -> None:
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def get(self, name: str) -> ToolSpec | None:
        return next((s for s in self._specs if s.name == name), None)

    def names(self) -> list[str]:
        return sorted({s.name for s in self._specs})

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every registered spec in registration order."""
        return tuple(self._specs)

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(tuple(self._specs))

    def __len__(self) -> int:
        return len(self._specs)


REGISTRY = Registry()


def register(spec: ToolSpec) -> ToolSpec:
    """Declare a static tool; called once per tool, next to its executor."""
    return REGISTRY.register(spec)

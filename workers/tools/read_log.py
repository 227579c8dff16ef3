"""The project files a run's tools read, kept as the run goes (the blueprint's evidence: a claim about a module is
taken only from a run that read one of its files).

A file counts when a reading tool (FS_READ) succeeded and either named it as a path argument or showed it in its
result as its result format declares (`ResultPaths`: a read's header, search hits, JSON path fields). A directory
listing's names (`BARE`) never count: seeing a file's name is not reading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .result import ToolResult, extract_result_paths
from .spec import Effect, ResultPaths, ToolSpec

__all__ = ["ReadLog"]

_MAX_FILES = 10_000


class ReadLog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: set[str] = set()  # relative to the root, "/"-separated

    def record(self, spec: ToolSpec, paths: Mapping[str, Path], result: ToolResult) -> None:
        if Effect.FS_READ not in spec.effects or result.is_error or spec.result_paths is ResultPaths.BARE:
            return
        for path in paths.values():
            if path.is_file():
                self._add(path)
        if spec.result_paths is not ResultPaths.NONE:
            for shown in extract_result_paths(spec.result_paths, result.content):
                self._add(self.root / shown.removeprefix("./"))

    def _add(self, path: Path) -> None:
        if len(self.files) >= _MAX_FILES:
            return
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            return
        if rel and not rel.startswith("../"):
            self.files.add(rel)

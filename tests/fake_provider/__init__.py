"""A scripted LLM provider over real HTTP, for every end-to-end test (see README.md here)."""

from ._script import Failure, Script, Step, ThinkingSpec, ToolCallSpec, UsageSpec
from ._server import FakeProvider, RecordedRequest, ScriptHandle

__all__ = [
    "Failure",
    "FakeProvider",
    "RecordedRequest",
    "Script",
    "ScriptHandle",
    "Step",
    "ThinkingSpec",
    "ToolCallSpec",
    "UsageSpec",
]

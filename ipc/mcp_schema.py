"""An MCP tool's input schema in the shape agents' tool declarations take, or why it cannot be.

A server's schema is any JSON Schema; a yagent tool declaration needs an object whose every property has one
JSON type and a description the model can read (`workers/tools/validation.py`). The daemon makes that shape
once, when it lists a server's tools, and withholds (saying why) a tool whose schema cannot be made so — the
worker then builds declarations that pass the same rules as every other tool's.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["normalize_input_schema"]

_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")


def _single_type(prop: dict[str, Any]) -> str | None:
    """The one JSON type a property takes (a nullable type counts as that type), or None."""
    kind = prop.get("type")
    if isinstance(kind, str):
        return kind if kind in _JSON_TYPES else None
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        return rest[0] if len(rest) == 1 and rest[0] in _JSON_TYPES else None
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if isinstance(branches, list):
            kinds = {_single_type(b) for b in branches if isinstance(b, dict) and b.get("type") != "null"}
            if len(kinds) == 1 and None not in kinds:
                return kinds.pop()
    if "enum" in prop and isinstance(prop["enum"], list) and prop["enum"] \
            and all(isinstance(v, str) for v in prop["enum"]):
        return "string"
    return None


def normalize_input_schema(schema: Any) -> tuple[dict[str, Any] | None, str]:
    """(the schema as a declaration takes it, "") or (None, why not)."""
    if not isinstance(schema, dict):
        return None, "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return None, f"its input schema is of type {schema.get('type')!r}, not an object"
    out = copy.deepcopy(schema)
    out["type"] = "object"
    props = out.get("properties", {})
    if not isinstance(props, dict):
        return None, "its input schema's properties are not an object"
    for name, prop in props.items():
        if not isinstance(prop, dict):
            return None, f"parameter {name!r} is not described by a schema object"
        kind = _single_type(prop)
        if kind is None:
            return None, f"parameter {name!r} does not have one JSON type (yagent checks arguments by type)"
        for key in ("anyOf", "oneOf"):
            branches = prop.pop(key, None)
            if isinstance(branches, list):  # the one non-null branch says the rest (items, enum, format…)
                kept = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
                if len(kept) == 1:
                    prop.update({k: v for k, v in kept[0].items() if k not in prop})
        prop["type"] = kind
        if not str(prop.get("description", "")).strip():
            prop["description"] = str(prop.get("title") or name.replace("_", " "))
    out["properties"] = props
    required = out.get("required", [])
    out["required"] = [r for r in required if r in props] if isinstance(required, list) else []
    return out, ""

"""A small, pure validator for the JSON Schema subset memory bodies use.

Supported keywords: ``type`` (one name or a list of names: object, array, string,
number, integer, boolean, null), ``required``, ``properties`` (recursively) and
``items``. Other keywords are ignored, so a full JSON Schema still works as a
(looser) subset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memoryd.errors import SchemaError

__all__ = ["DEFAULT_BODY_SCHEMA", "check_schema", "validate_body"]

DEFAULT_BODY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string"}, "key": {"type": "string"}},
}
"""The default body: ``text`` (the fact, required) and an optional stable ``key``."""

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def check_schema(schema: Any, path: str = "schema") -> dict[str, Any]:
    """Check that ``schema`` uses the supported subset correctly.

    Args:
        schema: The schema mapping.
        path: Where the schema sits, for messages.

    Returns:
        The schema as a dict.

    Raises:
        SchemaError: An unknown type name or a malformed keyword.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{path} must be a mapping, not {type(schema).__name__}")
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else kinds
    if names is not None and (not isinstance(names, list) or any(n not in _TYPES for n in names)):
        raise SchemaError(f"{path}.type must name types among {sorted(_TYPES)}, got {kinds!r}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"{path}.required must be a list of str, got {required!r}")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise SchemaError(f"{path}.properties must be a mapping, got {properties!r}")
    for key, sub in properties.items():
        check_schema(sub, f"{path}.properties.{key}")
    if "items" in schema:
        check_schema(schema["items"], f"{path}.items")
    return dict(schema)


def validate_body(value: Any, schema: Mapping[str, Any], path: str = "body") -> None:
    """Check ``value`` against ``schema`` (the supported subset).

    Args:
        value: The JSON value.
        schema: A schema accepted by `check_schema`.
        path: The name of ``value`` in messages.

    Raises:
        SchemaError: The first mismatch found, with its path.
    """
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, name) for name in names):
            raise SchemaError(
                f"{path} must be of type {' or '.join(names)}, not {type(value).__name__}"
            )
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                raise SchemaError(f"{path} lacks the required property {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                validate_body(value[key], sub, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            validate_body(item, schema["items"], f"{path}[{index}]")

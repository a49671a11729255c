"""Body schemas: a small, pure validator for the JSON Schema subset memory bodies use.

Supported keywords: ``type`` (one name or a list of names: object, array, string,
number, integer, boolean, null), ``required``, ``properties`` (recursively) and
``items``. Other keywords are ignored, so a full JSON Schema still works as a
(looser) subset.

`check_schema` also understands Agently's flat form, a mapping of field name to type
description (``{"preference": "string", "evidence": "short string"}``), and turns it into
that subset: an object whose fields are all required, each of the type its description
names (the last of its words among string/str/text, number/float, integer/int,
boolean/bool, array/list, object/dict and null; a description naming none, such as
``"用户偏好"``, is text: a string). A (type, description) pair is read the same way; a
nested mapping is a nested object, or a JSON schema when it has a JSON Schema key. A body
schema with a JSON Schema key at its top (see `is_flat`) is a JSON schema. A flat form
holding anything else is refused, so a body schema is never accepted and then ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memoryd.errors import SchemaError

__all__ = ["DEFAULT_BODY_SCHEMA", "check_schema", "is_flat", "validate_body"]

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

_KEYWORDS = frozenset(
    {"type", "required", "properties", "items", "$schema", "$ref", "enum", "anyOf", "oneOf"}
)
"""Keys that make a mapping a JSON schema rather than Agently's flat form."""

_FLAT_TYPES: dict[str, str] = {
    "string": "string",
    "str": "string",
    "text": "string",
    "number": "number",
    "float": "number",
    "integer": "integer",
    "int": "integer",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "object": "object",
    "dict": "object",
    "null": "null",
}


def _is(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def _flat_type(description: str, path: str) -> dict[str, Any]:
    """The schema of one flat field from its type description (see the module docstring)."""
    words = re.findall(r"[a-z]+", description.casefold())
    named = [_FLAT_TYPES[w] for w in words if w in _FLAT_TYPES]
    if not description.strip():
        raise SchemaError(f"{path} is an empty type description; name a type, e.g. 'string'")
    return {"type": named[-1] if named else "string", "description": description}


def _from_flat(fields: Mapping[Any, Any], path: str) -> dict[str, Any]:
    """The JSON schema subset of Agently's flat form (see the module docstring)."""
    if not fields:
        raise SchemaError(f"{path} has no fields; name at least one, e.g. {{'text': 'string'}}")
    properties: dict[str, Any] = {}
    for key, value in fields.items():
        where = f"{path}[{key!r}]"
        if not isinstance(key, str) or not key:
            raise SchemaError(f"{where}: a field name must be a non-empty str")
        if isinstance(value, str):
            properties[key] = _flat_type(value, where)
        elif (
            isinstance(value, list | tuple)
            and len(value) == 2
            and all(isinstance(v, str) for v in value)
        ):
            properties[key] = {**_flat_type(value[0], where), "description": value[1]}
        elif isinstance(value, Mapping):
            properties[key] = _from_flat(value, where) if is_flat(value) else dict(value)
        else:
            raise SchemaError(
                f"{where} is {value!r:.60}: a flat body schema maps each field to a type "
                "description (a str such as 'string'), a (type, description) pair, a "
                "mapping of subfields or a JSON schema such as {'type': 'number'}"
            )
    return {"type": "object", "required": list(properties), "properties": properties}


def is_flat(schema: Mapping[Any, Any]) -> bool:
    """Whether ``schema`` is in Agently's flat form: no JSON Schema keyword at its top. Pure.

    Args:
        schema: A body schema.

    Returns:
        True for a non-empty mapping without any of the JSON Schema keys ``type``,
        ``properties``, ``required``, ``items``, ``$schema``, ``$ref``, ``enum``,
        ``anyOf`` and ``oneOf``.
    """
    return bool(schema) and not _KEYWORDS & set(schema)


def check_schema(schema: Any, path: str = "schema") -> dict[str, Any]:
    """Check that ``schema`` uses the supported subset correctly; translate the flat form.

    Args:
        schema: The schema mapping: the JSON Schema subset, or (at the top only)
            Agently's flat form, which is returned translated.
        path: Where the schema sits, for messages.

    Returns:
        The schema, in the JSON Schema subset, as a dict.

    Raises:
        SchemaError: An unknown type name, a malformed keyword, or a flat form holding
            something other than type descriptions.
    """
    if isinstance(schema, Mapping) and is_flat(schema):
        return _check(_from_flat(schema, path), path)
    return _check(schema, path)


def _check(schema: Any, path: str) -> dict[str, Any]:
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
        _check(sub, f"{path}.properties.{key}")
    if "items" in schema:
        _check(schema["items"], f"{path}.items")
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

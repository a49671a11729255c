"""What a JSON-compatible value is: the one rule set, its checked deep copy and encoding.

Every JSON value memoryd stores goes through these rules: a message's keys and content
(`memoryd.messages`), an event's ``data`` written by ``record`` or imported, and the
events of an import. `copy_json` copies a value into plain dicts, lists and scalars,
refusing what JSON cannot carry: keys that are not str, NaN and infinities, integers
outside 64 bits, nesting past `MAX_NESTING_DEPTH`, any other type.
`compact_json_bytes` encodes a copied value as compact UTF-8 JSON, naming any str that
cannot be encoded. Problems name their path (``message.content[2].text``,
``data.when``). Pure functions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memoryd._shown import described
from memoryd.errors import InvalidMessage, JsonProblem

__all__ = [
    "COMPACT",
    "MAX_NESTING_DEPTH",
    "JsonProblem",
    "compact_json_bytes",
    "copy_json",
    "copy_json_or_raise",
    "find_unencodable",
    "format_path",
    "loads",
    "utf8_ok",
]

MAX_NESTING_DEPTH = 64
"""How deeply dicts and lists may nest in a value; the value itself (a message, an
event's data) is level 1."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_JSON_TYPES = "str, int, float, bool, None, list and dict"
_MAX_PATH_PARTS = 12


def loads(text: str | bytes) -> Any:
    """``json.loads``, where text nested too deeply for the decoder is a ValueError like
    any other text that is not JSON (the decoder recurses: about a thousand levels of
    ``[`` raise RecursionError, which no caller expecting bad JSON catches).

    Raises:
        ValueError: ``text`` is not JSON, or nests too deeply to decode.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON nests too deeply to decode") from None


def format_path(root: str, parts: Sequence[str | int]) -> str:
    """Render a path such as ``message.content[0].text``."""
    out = [root]
    shown = parts if len(parts) <= _MAX_PATH_PARTS else parts[:_MAX_PATH_PARTS]
    for part in shown:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isidentifier():
            out.append(f".{part}")
        else:
            out.append(f"[{part!r}]")
    if len(shown) < len(parts):
        out.append("...")
    return "".join(out)


def copy_json(value: Any, depth: int) -> Any:
    """Deep-copy a JSON-compatible value into plain dicts, lists and scalars.

    Args:
        value: The value to copy.
        depth: The nesting level of ``value`` (the message itself is 1).

    Returns:
        The copy.

    Raises:
        JsonProblem: ``value`` holds something that is not JSON-compatible.
    """
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is dict or kind is list:  # the usual containers, without the ABC checks below
        if depth > MAX_NESTING_DEPTH:
            raise JsonProblem(
                f"nests dicts and lists deeper than {MAX_NESTING_DEPTH} levels; flatten it"
            )
        return _copy_dict(value, depth) if kind is dict else _copy_items(value, depth)
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise JsonProblem(  # `described`: a huge one by its size, not its digits
                f"is {described(value)}, outside the stored range -2**63 .. 2**64-1; "
                "store it as a str"
            )
        return value
    if kind is float:
        if not math.isfinite(value):
            raise JsonProblem(f"is {value}; JSON has no NaN or infinity")
        return value
    if isinstance(value, Mapping | list | tuple):
        if depth > MAX_NESTING_DEPTH:
            raise JsonProblem(
                f"nests dicts and lists deeper than {MAX_NESTING_DEPTH} levels; flatten it"
            )
        if isinstance(value, Mapping):
            return _copy_dict(value, depth)
        return _copy_items(value, depth)
    # Subclasses of the scalar types (StrEnum, IntEnum, float subclasses) become plain values.
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return copy_json(int(value), depth)
    if isinstance(value, float):
        return copy_json(float(value), depth)
    raise JsonProblem(f"is of type {kind.__name__}; only JSON values ({_JSON_TYPES}) can be stored")


def _copy_dict(value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
    """`copy_json` of a mapping at nesting level ``depth`` (already allowed)."""
    out: dict[str, Any] = {}
    for raw_key, item in value.items():
        key = raw_key if type(raw_key) is str else _plain_key(raw_key)
        kind = type(item)
        if kind is str or item is None or kind is bool:  # scalars need no copy
            out[key] = item
            continue
        try:
            out[key] = copy_json(item, depth + 1)
        except JsonProblem as problem:
            problem.parts.append(key)
            raise
    return out


def _plain_key(key: Any) -> str:
    """A mapping key as a plain str (a str subclass converted), or `JsonProblem`."""
    if not isinstance(key, str):
        raise JsonProblem(f"has the key {key!r} of type {type(key).__name__}; keys must be str")
    return str(key)


def _copy_items(value: Sequence[Any], depth: int) -> list[Any]:
    """`copy_json` of a list or tuple at nesting level ``depth`` (already allowed)."""
    items: list[Any] = []
    for index, item in enumerate(value):
        try:
            items.append(copy_json(item, depth + 1))
        except JsonProblem as problem:
            problem.parts.append(index)
            raise
    return items


def copy_json_or_raise(
    value: Any, root: str, depth: int = 1, *, error: type[ValueError] = InvalidMessage
) -> Any:
    """`copy_json`, turning a problem into ``error`` with the path named.

    Args:
        value: The value to copy.
        root: The name of ``value`` in error messages (``message``, ``data``).
        depth: The nesting level of ``value`` (1 for a message or an event's data).
        error: The exception to raise: `InvalidMessage` for messages, ValueError for
            an event's data.

    Returns:
        The plain copy.

    Raises:
        ValueError: ``error``, naming the path of the first value that is not
            JSON-compatible.
    """
    try:
        return copy_json(value, depth)
    except JsonProblem as problem:
        path = format_path(root, problem.parts[::-1])
        raise error(f"{path} {problem.reason}") from None


def find_unencodable(value: Any, parts: list[str | int]) -> bool:
    """Find a str (key or value) that cannot be encoded as UTF-8; fill ``parts`` with its path."""
    if isinstance(value, str):
        return not utf8_ok(value)
    if isinstance(value, dict):
        for key, item in value.items():
            parts.append(key)
            if not utf8_ok(key) or find_unencodable(item, parts):
                return True
            parts.pop()
    elif isinstance(value, list):
        for index, item in enumerate(value):
            parts.append(index)
            if find_unencodable(item, parts):
                return True
            parts.pop()
    return False


def utf8_ok(text: str) -> bool:
    """Tell whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# one encoder for every message (json.dumps with options builds a new one per call)
COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

# `COMPACT`'s C encoder, built once for values `copy_json` made: plain trees of bounded
# depth, so no cycle check is needed (`JSONEncoder.encode` builds one per call).
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_COPIED: Callable[[Any, int], Sequence[str]] | None = (
    None
    if _make_encoder is None
    else _make_encoder(
        None, COMPACT.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
)


def _compact_text(value: Any) -> str:
    """``COMPACT.encode(value)`` for a value `copy_json` made."""
    if _ENCODE_COPIED is None:
        return COMPACT.encode(value)
    if type(value) is str:
        return json.encoder.encode_basestring(value)
    return "".join(_ENCODE_COPIED(value, 0))


def compact_json_bytes(
    value: Any, root: str = "message", *, error: type[ValueError] = InvalidMessage
) -> bytes:
    """Encode a copied value as compact UTF-8 JSON, naming any unencodable str.

    Args:
        value: A value copied by `copy_json`.
        root: Its name in error messages.
        error: The exception to raise, as in `copy_json_or_raise`.

    Returns:
        The encoding; its length is the size limits compare.

    Raises:
        ValueError: ``error``: a str (key or value) holds a lone surrogate.
    """
    text = _compact_text(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        parts: list[str | int] = []
        find_unencodable(value, parts)
        path = format_path(root, parts)
        raise error(
            f"{path} contains a lone surrogate that cannot be encoded as UTF-8; "
            "fix the text's encoding"
        ) from None

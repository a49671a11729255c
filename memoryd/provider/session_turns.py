"""What `Session.record_turn` records of a prompt and a reply. Pure.

Without keys, a str is recorded as it is and other data as JSON. With keys (dotted paths
such as ``"input.question"``), only those paths of the data are recorded, as a JSON object
keyed by path; a path the data does not have is skipped. `recorded_turn` applies the same
keys to what an agent run records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd._json_values import loads

__all__ = ["check_keys", "recorded_turn", "render"]


def check_keys(keys: Any, name: str) -> tuple[str, ...] | None:
    """Check a list of dotted paths.

    Args:
        keys: A list or tuple of dotted paths, or None (everything).
        name: The argument's name, for the error message.

    Returns:
        The paths as a tuple, or None.

    Raises:
        TypeError: ``keys`` is not a sequence of paths (a str is not one).
        ValueError: A path is not a str or has an empty part (``"a..b"``, ``".a"``).
    """
    if keys is None:
        return None
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise TypeError(f"{name} must be a list of dotted paths or None, not {keys!r:.80}")
    for key in keys:
        if not isinstance(key, str) or not key or "" in key.split("."):
            raise ValueError(f"{name} holds {key!r}; each must be a dotted path like 'input.q'")
    return tuple(keys)


def _pick(data: Any, path: str) -> tuple[bool, Any]:
    value = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def render(data: Any, keys: tuple[str, ...] | None) -> str:
    """The text recorded for ``data``.

    Args:
        data: A prompt or a reply: text or JSON-compatible data.
        keys: Checked dotted paths to keep (see `check_keys`), or None for all of it.

    Returns:
        ``data`` itself when it is a str and ``keys`` is None; otherwise JSON (of the
        chosen paths, keyed by path, when ``keys`` is given).
    """
    if keys is None:
        if isinstance(data, str):
            return data
        return json.dumps(data, ensure_ascii=False)
    chosen = {}
    for key in keys:
        found, value = _pick(data, key)
        if found:
            chosen[key] = value
    return json.dumps(chosen, ensure_ascii=False)


def _data(text: Any) -> Mapping[str, Any] | None:
    """The JSON object ``text`` holds, or None when it holds none."""
    if not isinstance(text, str):
        return None
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def recorded_turn(
    turn: Sequence[Mapping[str, Any]],
    *,
    inputs: int,
    input_keys: tuple[str, ...] | None,
    reply_keys: tuple[str, ...] | None,
) -> list[dict[str, Any]] | None:
    """What an agent run records of its turn under a session's keys; None: all of it.

    With ``input_keys``, each user message among the first ``inputs`` whose text is a
    JSON object (prompt data) is recorded as those paths of it (`render`); with
    ``reply_keys``, so is the final answer when its text is a JSON object. Text that
    is not a JSON object, tool calls and tool results are recorded as they are.

    Args:
        turn: The run's messages: its input, then what it produced.
        inputs: How many of them are the input.
        input_keys: Checked dotted paths, or None.
        reply_keys: Checked dotted paths, or None.

    Returns:
        The messages to record (new dicts where changed), or None when no key applies.
    """
    if input_keys is None and reply_keys is None:
        return None
    out = [dict(m) for m in turn]
    if input_keys is not None:
        for i in range(min(inputs, len(out))):
            data = _data(out[i].get("content")) if out[i].get("role") == "user" else None
            if data is not None:
                out[i]["content"] = render(data, input_keys)
    last = out[-1] if len(out) > inputs else None
    if reply_keys is not None and last is not None and last.get("role") == "assistant":
        data = None if last.get("tool_calls") else _data(last.get("content"))
        if data is not None:
            last["content"] = render(data, reply_keys)
    return out

"""Write requests built from a caller's arguments: every check of a write, in one place.

Pure: each builder validates its arguments and returns the `requests` value a handle
sends to its store, or raises the documented error naming the problem (nothing is
sent, so nothing is written). `result` turns a store's raw answer into what the
matching `StoreHandle` method returns. The sync methods of `StoreHandle` and the
awaitable paths (`StoreHandle.submit`, `AsyncStore`, the daemon) share them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd import messages as msgs
from memoryd.errors import InvalidMessage
from memoryd.events import Event
from memoryd.store import validate as check
from memoryd.store.requests import Add, Clear, Fork, Import, Pop, Record, WriteRequest

__all__ = ["RECORD_KINDS", "add", "clear", "fork", "import_events", "pop", "record", "result"]

RECORD_KINDS = frozenset({"compacted", "memo"})
"""The event kinds `StoreHandle.record` writes: they leave the history unchanged."""


def _plain_json(value: Any, path: str, depth: int = 0) -> Any:
    """A plain copy of a JSON-compatible value, or ValueError naming where it is not."""
    if depth > 64:
        raise ValueError(f"{path} nests deeper than 64 levels; flatten it")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value}; JSON has no NaN or infinity")
        return float(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path} has the key {key!r}; keys must be str")
            out[str(key)] = _plain_json(item, f"{path}[{key!r}]", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain_json(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise ValueError(
        f"{path} is of type {type(value).__name__}; only JSON values "
        "(str, int, float, bool, None, list, dict) can be recorded"
    )


def _checked_data(data: Any, limit: int, what: str = "data") -> dict[str, Any] | None:
    """A plain copy of an event's ``data``, or ValueError naming the problem."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be a mapping or None, not {type(data).__name__}")
    plain: dict[str, Any] = _plain_json(data, what)
    size = len(json.dumps(plain, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise ValueError(f"{what} is {size} bytes as compact JSON; the limit is {limit}")
    return plain


def _checked_event(event: Any, index: int, max_bytes: int) -> Event:
    """A normalised copy of one event to import, or an error naming its index."""
    if not isinstance(event, Event):
        raise ValueError(f"events[{index}] must be an Event, not {type(event).__name__}")
    try:
        checked = (
            msgs.validate_many(list(event.messages), max_bytes=max_bytes) if event.messages else []
        )
    except InvalidMessage as exc:
        raise InvalidMessage(f"events[{index}] (version {event.version}): {exc}") from None
    try:
        key = check.check_idempotency_key(event.idempotency_key)
        data = _checked_data(event.data, max_bytes, f"events[{index}].data")
    except ValueError as exc:
        raise ValueError(f"events[{index}] (version {event.version}): {exc}") from None
    return Event(
        version=event.version,
        kind=event.kind,
        messages=tuple(checked),
        timestamp=float(event.timestamp),
        idempotency_key=key,
        data=data,
    )


def add(
    cid: str,
    messages: list[dict[str, Any]],
    *,
    idempotency_key: str | None,
    expected_version: int | None,
    max_bytes: int,
) -> Add:
    """The request of `StoreHandle.add` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    checked = msgs.validate_many(messages, max_bytes=max_bytes)
    return Add(
        cid=cid,
        messages=tuple(checked),
        idempotency_key=check.check_idempotency_key(idempotency_key),
        expected_version=check.check_version_arg(expected_version, "expected_version"),
    )


def record(
    cid: str,
    kind: str,
    *,
    messages: Sequence[dict[str, Any]],
    data: Mapping[str, Any] | None,
    idempotency_key: str | None,
    expected_version: int | None,
    max_bytes: int,
) -> Record:
    """The request of `StoreHandle.record` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    if not isinstance(kind, str) or kind not in RECORD_KINDS:
        raise ValueError(
            f"record() writes only the kinds {sorted(RECORD_KINDS)}, not {kind!r}; "
            "use add, clear, pop or fork for the others"
        )
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"messages must be a list or tuple of message dicts, got {type(messages).__name__}"
        )
    checked = msgs.validate_many(messages, max_bytes=max_bytes) if messages else []
    return Record(
        cid=cid,
        kind=kind,
        messages=tuple(checked),
        data=_checked_data(data, max_bytes),
        idempotency_key=check.check_idempotency_key(idempotency_key),
        expected_version=check.check_version_arg(expected_version, "expected_version"),
    )


def import_events(cid: str, events: Sequence[Event], *, max_bytes: int) -> Import:
    """The request of `StoreHandle.import_events` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    if not isinstance(events, Sequence) or isinstance(events, str | bytes):
        raise ValueError(f"events must be a sequence of Event, not {type(events).__name__}")
    if not events:
        raise ValueError("events is empty; give at least one event to import")
    checked: list[Event] = []
    for index, event in enumerate(events):
        if checked and isinstance(event, Event) and event.version != checked[-1].version + 1:
            raise ValueError(
                f"events[{index}] has version {event.version} after version "
                f"{checked[-1].version}; an event log's versions increase by one"
            )
        checked.append(_checked_event(event, index, max_bytes))
    return Import(cid=cid, events=tuple(checked))


def clear(cid: str) -> Clear:
    """The request of `StoreHandle.clear`."""
    return Clear(cid=msgs.validate_conversation_id(cid))


def pop(cid: str) -> Pop:
    """The request of `StoreHandle.pop`."""
    return Pop(cid=msgs.validate_conversation_id(cid))


def fork(source: str, target: str, *, at_version: int | None) -> Fork:
    """The request of `StoreHandle.fork` (its checks and errors)."""
    source = msgs.validate_conversation_id(source)
    target = msgs.validate_conversation_id(target)
    if source == target:
        raise ValueError(f"cannot fork {source!r} into itself; pick another target id")
    return Fork(
        source=source, target=target, at_version=check.check_version_arg(at_version, "at_version")
    )


def result(request: WriteRequest, answer: Any) -> Any:
    """What the `StoreHandle` method of ``request`` returns, from the store's raw answer."""
    if isinstance(request, Clear):
        return None
    if isinstance(request, Pop):
        return None if answer is None else dict(answer)
    return int(answer)

"""Write requests: the values a handle sends to its store, their builders, and `result`.

Pure. Each builder checks a caller's arguments and returns the request value, or raises
the documented error naming the problem (see `memoryd.store.requests`, which is where the
rest of memoryd names them; it loads this module on first use).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryd import messages as msgs
from memoryd._shown import described, shown
from memoryd.errors import InvalidConversationId, InvalidMessage
from memoryd.events import Event
from memoryd.store._argument_checks import (
    HIDDEN_PREFIX,
    MAX_IMPORT_VERSION,
    RECORD_KINDS,
    check_data,
    check_idempotency_key,
    check_optional_version,
)

__all__ = [
    "Add",
    "Clear",
    "Fork",
    "Import",
    "Pop",
    "Record",
    "WriteRequest",
    "add",
    "clear",
    "fork",
    "import_events",
    "pop",
    "record",
    "result",
    "supersede_refused",
]

# --------------------------------------------------------------------------- request values


@dataclass(frozen=True, kw_only=True, slots=True)
class Add:
    """Append ``messages`` to ``cid`` as one event (and clear ``then_clear`` with it)."""

    cid: str
    messages: tuple[dict[str, Any], ...]
    idempotency_key: str | None = None
    expected_version: int | None = None
    then_clear: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Clear:
    """Delete ``cid``'s messages, keeping a ``cleared`` marker."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Pop:
    """Remove ``cid``'s last message."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Fork:
    """Start ``target`` as a copy of ``source`` (at ``at_version``)."""

    source: str
    target: str
    at_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Record:
    """Append a ``memo`` or ``compacted`` event to ``cid``; its history is unchanged.

    ``supersede``: the memo replaces the conversation's earlier events, which leave its
    log (memoryd's own bookkeeping without messages only: an instance's lease).
    """

    cid: str
    kind: str
    messages: tuple[dict[str, Any], ...] = ()
    data: dict[str, Any] | None = None
    idempotency_key: str | None = None
    expected_version: int | None = None
    supersede: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Import:
    """Write ``events`` to ``cid`` as they are (versions, timestamps, keys, data kept).

    Events already in the log (version <= the conversation's version) must be
    identical and are skipped; the rest continue the log.
    """

    cid: str
    events: tuple[Event, ...]


WriteRequest = Add | Clear | Pop | Fork | Record | Import


def _checked_messages(messages: Any, max_bytes: int) -> tuple[dict[str, Any], ...]:
    """A possibly empty list or tuple of messages, checked (`msgs.check`)."""
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"messages must be a list or tuple of message dicts, got {type(messages).__name__}"
        )
    return msgs.check(messages, max_bytes=max_bytes) if messages else ()


def _checked_event(event: Any, index: int, max_bytes: int) -> Event:
    """A normalised copy of one event to import, or an error naming its index."""
    if not isinstance(event, Event):
        raise ValueError(f"events[{index}] must be an Event, not {type(event).__name__}")
    try:
        checked = _checked_messages(event.messages, max_bytes)
    except InvalidMessage as exc:
        raise InvalidMessage(f"events[{index}] (version {event.version}): {exc}") from None
    try:
        key = check_idempotency_key(event.idempotency_key)
        data = check_data(event.data, max_bytes, f"events[{index}].data")
    except ValueError as exc:
        raise ValueError(f"events[{index}] (version {event.version}): {exc}") from None
    return Event(
        version=event.version,
        kind=event.kind,
        messages=checked,
        timestamp=float(event.timestamp),
        idempotency_key=key,
        data=data,
    )


def _outside_bookkeeping(cid: str, what: str) -> str:
    """``cid`` (checked already) when it is outside memoryd's own bookkeeping space.

    Messages written there would be lost unseen: listings, the change feed and exports
    skip the space, and a clear there erases the whole log. memoryd's own writers (run
    journals, leases) write there through `add` and `record`, which stay open to it.

    Raises:
        InvalidConversationId: ``cid`` starts with `HIDDEN_PREFIX`, naming ``what``.
    """
    if cid.startswith(HIDDEN_PREFIX):
        raise InvalidConversationId(
            f"{what} {shown(cid, 60)} starts with {HIDDEN_PREFIX!r}, memoryd's own "
            "bookkeeping (run journals and leases), which listings, the change feed and "
            "exports skip: choose another id (nothing was written)"
        )
    return cid


# --------------------------------------------------------------------------- builders


def add(
    cid: str,
    messages: Sequence[dict[str, Any]],
    *,
    idempotency_key: str | None,
    expected_version: int | None,
    max_bytes: int,
    then_clear: str | None = None,
) -> Add:
    """The request of `StoreHandle.add` (its checks and errors).

    ``messages`` may be a `CheckedMessages`: it is sent as it is.

    Raises:
        ValueError: ``then_clear`` names ``cid`` itself.
    """
    cid = msgs.validate_conversation_id(cid)
    if then_clear is not None:
        then_clear = msgs.validate_conversation_id(then_clear)
        if then_clear == cid:
            raise ValueError(f"then_clear names the conversation added to ({cid!r}); name another")
    return Add(
        cid=cid,
        messages=msgs.check(messages, max_bytes=max_bytes),
        idempotency_key=check_idempotency_key(idempotency_key),
        expected_version=check_optional_version(expected_version, "expected_version"),
        then_clear=then_clear,
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
    supersede: bool = False,
) -> Record:
    """The request of `StoreHandle.record` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    if not isinstance(kind, str) or kind not in RECORD_KINDS:
        raise ValueError(
            f"record() writes only the kinds {sorted(RECORD_KINDS)}, not {described(kind)}; "
            "use add, clear, pop or fork for the others"
        )
    if not isinstance(supersede, bool):
        raise ValueError(f"supersede must be True or False, not {described(supersede)}")
    if supersede and kind != "memo":
        raise ValueError(
            f"only a memo may supersede a conversation's earlier events, not a {kind!r} event"
        )
    if supersede and not cid.startswith(HIDDEN_PREFIX):
        # A superseded log starts past version 1 with no cleared marker, which an import
        # refuses (it cannot tell it from a truncated file); exports skip hidden ids.
        raise ValueError(
            f"supersede is for memoryd's own bookkeeping (ids starting with "
            f"{HIDDEN_PREFIX!r}, which exports skip), not {cid!r}"
        )
    return Record(
        cid=cid,
        kind=kind,
        messages=_checked_messages(messages, max_bytes),
        data=check_data(data, max_bytes),
        idempotency_key=check_idempotency_key(idempotency_key),
        expected_version=check_optional_version(expected_version, "expected_version"),
        supersede=supersede,
    )


def supersede_refused(cid: str, count: int) -> ValueError:
    """The error of a superseding memo aimed at a conversation that holds messages (the
    store raises it; nothing is written)."""
    return ValueError(
        f"{cid!r} holds {count} message(s): a superseding memo would drop them from its "
        "log; supersede only bookkeeping that holds no messages (such as a lease). "
        "Nothing was written"
    )


def import_events(cid: str, events: Sequence[Event], *, max_bytes: int) -> Import:
    """The request of `StoreHandle.import_events` (its checks and errors).

    Raises:
        InvalidConversationId: a bad ``cid``, or one in memoryd's own bookkeeping space
            (`HIDDEN_PREFIX`), which exports never hold.
    """
    cid = _outside_bookkeeping(msgs.validate_conversation_id(cid), "conversation id")
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
    last = checked[-1].version
    if last > MAX_IMPORT_VERSION:
        raise ValueError(
            f"events[{len(checked) - 1}] has version {last}; an import writes versions "
            f"up to 2**53 ({MAX_IMPORT_VERSION}), so the conversation can be written after it"
        )
    return Import(cid=cid, events=tuple(checked))


def clear(cid: str) -> Clear:
    """The request of `StoreHandle.clear`."""
    return Clear(cid=msgs.validate_conversation_id(cid))


def pop(cid: str) -> Pop:
    """The request of `StoreHandle.pop`."""
    return Pop(cid=msgs.validate_conversation_id(cid))


def fork(source: str, target: str, *, at_version: int | None) -> Fork:
    """The request of `StoreHandle.fork` (its checks and errors).

    Raises:
        InvalidConversationId: a bad id, or a ``target`` in memoryd's own bookkeeping
            space (`HIDDEN_PREFIX`), where the copy would be lost unseen.
    """
    source = msgs.validate_conversation_id(source)
    target = _outside_bookkeeping(msgs.validate_conversation_id(target), "fork target")
    if source == target:
        raise ValueError(f"cannot fork {source!r} into itself; pick another target id")
    return Fork(
        source=source, target=target, at_version=check_optional_version(at_version, "at_version")
    )


def result(request: WriteRequest, answer: Any) -> Any:
    """What the `StoreHandle` method of ``request`` returns, from the store's raw answer."""
    if isinstance(request, Clear):
        return None
    if isinstance(request, Pop):
        return None if answer is None else dict(answer)
    return int(answer)

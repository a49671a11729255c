"""The daemon's wire format: pure mappings between store values and JSON-compatible bodies.

Both ends use it: the server (``memoryd.server``) to answer, the client
(``memoryd.client.remote``) to decode. No I/O here.

Errors travel as ``{"error": {"type": "ConflictError", "message": "...", ...}}`` with
an HTTP status chosen by `error_status`; `error_from_wire` rebuilds the same exception
class on the client (``expected``/``actual`` for conflicts, ``owner_pid`` for
``AlreadyStarted``).

A client that retries an ``add`` needs an idempotency key even when its caller gave
none; it generates one starting with `AUTO_KEY_PREFIX`. Such keys deduplicate like
any other but are reported as ``null`` on the wire, so events read through the daemon
look exactly as the caller wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memoryd import errors, events
from memoryd.errors import ProtocolError

if TYPE_CHECKING:
    from memoryd.events import Change, Event

__all__ = [
    "AUTO_KEY_PREFIX",
    "DEFAULT_STORE_NAME",
    "MAX_STORE_NAME_LENGTH",
    "ProtocolError",
    "change_from_wire",
    "change_to_wire",
    "check_store_name",
    "error_from_wire",
    "error_status",
    "error_to_wire",
    "event_from_wire",
    "event_to_wire",
    "public_key",
]

AUTO_KEY_PREFIX = "memoryd.auto:"
"""Prefix of idempotency keys a client generated for its own retries."""

DEFAULT_STORE_NAME = "memoryd.default"
"""The daemon's default store (also reachable as ``/v1/stores/memoryd.default``)."""

MAX_STORE_NAME_LENGTH = 64

_STORE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_store_name(name: Any) -> str:
    """Check a named store's name: 1 to 64 of ``A-Z a-z 0-9 . _ -``, not starting with a dot.

    Names starting with ``memoryd.`` are reserved; ``memoryd.default`` is the default store.

    Args:
        name: the name to check.

    Returns:
        The name.

    Raises:
        ValueError: the name is not a str, too long, uses other characters or is reserved.
    """
    if not isinstance(name, str):
        raise ValueError(f"a store name must be a str, not {type(name).__name__}")
    if name == DEFAULT_STORE_NAME:
        return name
    if not 1 <= len(name) <= MAX_STORE_NAME_LENGTH or not _STORE_NAME.fullmatch(name):
        raise ValueError(
            f"store name {name!r} is invalid: use 1 to {MAX_STORE_NAME_LENGTH} letters, "
            "digits, '.', '_' or '-', starting with a letter or digit"
        )
    if name.startswith("memoryd."):
        raise ValueError(f"store name {name!r} is reserved: names starting 'memoryd.' are ours")
    return name


def public_key(key: str | None) -> str | None:
    """The idempotency key as the caller wrote it: None for a client-generated key."""
    if key is not None and key.startswith(AUTO_KEY_PREFIX):
        return None
    return key


# --------------------------------------------------------------------------- events


def event_to_wire(event: Event) -> dict[str, Any]:
    """An event as a JSON-compatible dict (client-generated keys shown as None)."""
    return {
        "version": event.version,
        "kind": event.kind,
        "messages": list(event.messages),
        "timestamp": event.timestamp,
        "idempotency_key": public_key(event.idempotency_key),
        "data": None if event.data is None else dict(event.data),
    }


def change_to_wire(change: Change) -> dict[str, Any]:
    """A change as a JSON-compatible dict (client-generated keys shown as None)."""
    out = event_to_wire(change.event)
    out["position"] = change.position
    out["conversation_id"] = change.conversation_id
    return out


def _event_fields(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ValueError(f"{what} must be an object, not {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError(f"{what} messages must be a list")
    timestamp = body.get("timestamp")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = float(timestamp)
    return {
        "version": body.get("version"),
        "kind": body.get("kind"),
        "messages": tuple(messages),
        "timestamp": timestamp,
        "idempotency_key": body.get("idempotency_key"),
        "data": body.get("data"),
    }


def event_from_wire(body: Any) -> Event:
    """Rebuild an event from `event_to_wire`'s dict.

    Raises:
        ValueError: a field is missing or has the wrong type.
    """
    return events.Event(**_event_fields(body, "an event"))


def change_from_wire(body: Any) -> Change:
    """Rebuild a change from `change_to_wire`'s dict.

    Raises:
        ValueError: a field is missing or has the wrong type.
    """
    fields = _event_fields(body, "a change")
    return events.Change(
        position=body.get("position"),
        conversation_id=body.get("conversation_id"),
        **fields,
    )


# --------------------------------------------------------------------------- errors

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (errors.InvalidMessage, 422),
    (errors.InvalidConversationId, 400),
    (errors.ConflictError, 409),
    (errors.UnknownConversation, 404),
    (errors.UnknownStore, 404),
    (errors.AlreadyStarted, 409),
    (errors.AuthenticationError, 401),
    (errors.WriteTimeout, 504),
    (errors.StoreNotRunning, 503),
    (errors.StoreUnavailable, 503),
    (errors.CorruptRecord, 500),
    (errors.DiskFull, 507),
    (errors.StorageError, 500),
    (ValueError, 400),
)
"""The status of each exception that travels, the first that matches winning."""

_WITH_FIELDS = (errors.ConflictError, errors.AlreadyStarted)
"""Exceptions rebuilt with fields of their own (see `error_from_wire`)."""

_CLASSES: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (*(cls for cls, _ in _STATUS), errors.MemorydError)
    if cls not in _WITH_FIELDS
}
"""The exceptions rebuilt from their name and message alone."""


def error_status(exc: BaseException) -> int:
    """The HTTP status for an exception (500 for anything unexpected)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_to_wire(exc: BaseException, *, type_name: str | None = None) -> dict[str, Any]:
    """The JSON error body for an exception.

    Args:
        exc: the exception.
        type_name: the ``type`` to report (default: the exception's class name, or
            ``ValueError`` for a ValueError subclass memoryd does not define).

    Returns:
        ``{"error": {"type": ..., "message": ..., ...}}``.
    """
    name = type_name
    if name is None:
        name = type(exc).__name__
        if name not in _CLASSES and not isinstance(exc, _WITH_FIELDS):
            name = "ValueError" if isinstance(exc, ValueError) else name
    error: dict[str, Any] = {"type": name, "message": str(exc) or name}
    if isinstance(exc, errors.ConflictError):
        error["expected"] = exc.expected
        error["actual"] = exc.actual
    if isinstance(exc, errors.AlreadyStarted):
        error["owner_pid"] = exc.owner_pid
    return {"error": error}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_from_wire(status: int, body: Any) -> Exception:
    """Rebuild the exception the daemon reported.

    Args:
        status: the HTTP status.
        body: the decoded body (an error object, or anything else the daemon sent).

    Returns:
        An exception of the same class as on the daemon: memoryd's errors and ValueError;
        ``InvalidMessage`` for a body over the daemon's limit (413),
        ``AuthenticationError`` for 401/403, `ProtocolError` for anything unrecognised.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return ProtocolError(f"the daemon answered HTTP {status} without an error body")
    name = error.get("type")
    message = str(error.get("message") or name or f"HTTP {status}")
    if name == "ConflictError":
        actual = _int_or_none(error.get("actual"))
        return errors.ConflictError(
            message, expected=_int_or_none(error.get("expected")), actual=actual or 0
        )
    if name == "AlreadyStarted":
        return errors.AlreadyStarted(message, owner_pid=_int_or_none(error.get("owner_pid")))
    if status == 413 or name == "PayloadTooLarge":
        return errors.InvalidMessage(message)
    if status in (401, 403):
        return errors.AuthenticationError(message)
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is not None:
        return cls(message)
    return ProtocolError(f"the daemon answered HTTP {status}: {name}: {message}")

"""Write requests: the values a handle sends to a store actor. Pure, validated by the handle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Add", "Clear", "Fork", "Pop", "Record", "WriteRequest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Add:
    """Append ``messages`` to ``cid`` as one event."""

    cid: str
    messages: tuple[dict[str, Any], ...]
    idempotency_key: str | None = None
    expected_version: int | None = None


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
    """Append a ``memo`` or ``compacted`` event to ``cid``; its history is unchanged."""

    cid: str
    kind: str
    messages: tuple[dict[str, Any], ...] = ()
    data: dict[str, Any] | None = None
    idempotency_key: str | None = None
    expected_version: int | None = None


WriteRequest = Add | Clear | Pop | Fork | Record

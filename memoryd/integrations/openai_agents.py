"""OpenAI Agents SDK session backed by a memoryd store.

Swap the SDK's ``SQLiteSession("user-1", "chat.db")`` for
``MemorydSession("user-1", store)`` and every run keeps its history in memoryd::

    from agents import Agent, Runner
    from memoryd.integrations.openai_agents import MemorydSession

    session = MemorydSession("user-1", memoryd.LmdbStore.start("data/chat"))
    await Runner.run(agent, "hello", session=session)

SDK items come in many shapes (messages, ``function_call``, ``function_call_output``,
``reasoning``, ...) and most are not chat messages. Each item is stored as one
chat message whose ``role`` and ``content`` summarise it (so memoryd's own tools
can read the history) and whose ``openai_agents_item`` key holds the item itself,
so `MemorydSession.get_items` returns exactly what was added.

It behaves as the SDK's ``SQLiteSession`` does: ``get_items(limit=n)`` returns the raw
last ``n`` items (pass ``drop_orphan_outputs=True`` to leave out tool outputs whose call
fell outside the window), an item holding a value JSON cannot carry raises a
``TypeError`` (`InvalidSessionItem`), and `MemorydSession.close` ends the session
(``async with MemorydSession(...) as session:`` closes it on exit); every later call
raises ``RuntimeError``. Closing a session never stops its store, which others may share.

The event loop is never blocked by a disk sync or a daemon round trip: writes go
through `StoreHandle.submit` (a store actor answers the loop directly), and reads
run in a worker thread (`asyncio.to_thread`), except a limited read of a local
LMDB store, a walk of a few records in its memory map that is cheaper than the
hand-off to a thread and back (`StoreHandle.reads_inline`). As in the SDK's
``SQLiteSession``, a cancelled ``add_items``, ``pop_item`` or ``clear_session``
raises ``CancelledError`` only after its write has ended.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from memoryd import messages as msgs
from memoryd.errors import InvalidMessage, InvalidSessionItem
from memoryd.integrations._outlasting import Outlasting
from memoryd.integrations._stores import check_adapter_store
from memoryd.store import requests
from memoryd.store.handle import StoreHandle, WouldWait, without_waiting

__all__ = [
    "ITEM_KEY",
    "InvalidSessionItem",
    "MemorydSession",
    "decode_items",
    "encode_item",
    "without_orphan_outputs",
]

ITEM_KEY = "openai_agents_item"
"""The message key under which the SDK item is stored verbatim."""

_PLAIN_ROLES = frozenset({"developer", "system", "user"})
_TEXT_ROLES = _PLAIN_ROLES | {"assistant"}
"""Roles of a ``{"role", "content": str}`` item that `decode_items` gives back as it is."""


def _check_types(items: list[Any]) -> None:
    """Raise `InvalidSessionItem` for the first item that is not a JSON-typed dict.

    Run once memoryd's own check refused a batch: an item holding a value of a type
    JSON cannot carry is then named as the SDK's sessions name it (a ``TypeError``);
    any other problem (NaN, a huge integer, too large) stays memoryd's `InvalidMessage`.
    """
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidSessionItem(
                f"session item {index} must be a dict, got {type(item).__name__}"
            )
        try:
            json.dumps(item)
        except TypeError as exc:
            raise InvalidSessionItem(
                f"session item {index} holds a value JSON cannot carry ({exc}); "
                "items must hold only str, int, float, bool, None, lists and dicts"
            ) from None
        except ValueError:
            pass  # a circular reference: memoryd's own validation names it


def _summary(item: Mapping[str, Any]) -> str:
    """A short text for the item: its text content, else ``[type]``."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    return f"[{item.get('type', 'message')}]"


def encode_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message that stores one SDK item losslessly.

    A user, system or developer message keeps its role; every other item (assistant
    messages, tool calls and their outputs, reasoning, ...) is stored as an
    ``assistant`` message. The item itself rides under `ITEM_KEY`, except for an
    item that is already a plain chat message (only a role and a text ``content``):
    that is stored as it is, since `decode_items` gives it back exactly, and a read
    decodes it once instead of twice.

    Args:
        item: an SDK input item (a JSON-compatible mapping).

    Returns:
        An OpenAI-format message that `memoryd.messages.validate` accepts.

    Raises:
        InvalidSessionItem: ``item`` is not a mapping (a ``TypeError``).
    """
    if not isinstance(item, Mapping):
        raise InvalidSessionItem(f"a session item must be a dict, got {type(item).__name__}")
    role = item.get("role")
    if len(item) == 2 and role in _TEXT_ROLES and isinstance(item.get("content"), str):
        return {"role": role, "content": item["content"]}
    is_message = item.get("type", "message") == "message"
    stored_role = role if is_message and role in _PLAIN_ROLES else "assistant"
    return {"role": stored_role, "content": _summary(item), ITEM_KEY: dict(item)}


def _decode_foreign(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """SDK items for a chat message some other memoryd writer stored."""
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        output = content if isinstance(content, str) else _summary(message)
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id"),
                "output": output,
            }
        ]
    items: list[dict[str, Any]] = []
    content = message.get("content")
    calls = message.get("tool_calls") or ()
    if content is not None and (content != "" or not calls):
        items.append({"role": role, "content": content})
    for call in calls:
        function = call.get("function", {})
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return items


def decode_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The SDK items a stored message holds.

    A message written by `encode_item` gives back its one item exactly. A plain chat
    message written by other memoryd code becomes an easy input message, plus one
    ``function_call`` per tool call; a tool message becomes a ``function_call_output``.
    """
    item = message.get(ITEM_KEY)
    if isinstance(item, dict):
        return [item]
    if len(message) == 2 and message.get("role") in _TEXT_ROLES:
        content = message.get("content")
        if isinstance(content, str):  # a plain text message is its own item
            return [{"role": message["role"], "content": content}]
    return _decode_foreign(message)


def _items_of(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SDK items of messages a store returned, oldest first (as `decode_items`).

    A store returns fresh copies, so a message that is its own item (a plain text
    message) is returned as it is instead of copied again: a read decodes every
    message it returns, and this loop is most of a session read's own cost.
    """
    items: list[dict[str, Any]] = []
    append = items.append
    for message in stored:
        if (
            len(message) == 2
            and type(message.get("content")) is str
            and message.get("role") in _TEXT_ROLES
        ):
            append(message)
            continue
        item = message.get(ITEM_KEY)
        if type(item) is dict:
            append(item)
        else:
            items.extend(decode_items(message))
    return items


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_output") and "call_id" in item


def without_orphan_outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool outputs whose call is not in ``items``.

    A window cut from the end of a history can start between a ``function_call``
    (or any ``*_call``) and its ``*_output``; the model API rejects an output whose
    call it has not seen, so such outputs are left out.
    """
    calls = {item["call_id"] for item in items if "call_id" in item and not _is_output(item)}
    return [item for item in items if not _is_output(item) or item["call_id"] in calls]


class MemorydSession:
    """An OpenAI Agents SDK ``Session`` that keeps its items in a memoryd store.

    Args:
        session_id: the session id; it is the memoryd conversation id.
        store: any store handle (`LmdbStore`, `EphemeralStore`, `RemoteStore`, ...).
        session_settings: default settings (``limit``) as in the SDK's sessions.
        drop_orphan_outputs: leave out of a limited `get_items` window the tool
            outputs whose call fell outside it. Off by default: like ``SQLiteSession``,
            ``get_items(limit=n)`` returns the raw last ``n`` items, which the SDK
            expects (it drops unmatched outputs itself, its write reconciliation on
            resuming an interrupted run compares ``get_items(limit=n)`` with what it
            wrote, and a ``session_input_callback`` gets the raw items).

    Raises:
        InvalidConversationId: ``session_id`` is not a valid conversation id.
        TypeError: ``store`` is not a store handle (a database path, say), or the two
            arguments are swapped.
    """

    def __init__(
        self,
        session_id: str,
        store: StoreHandle,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        *,
        drop_orphan_outputs: bool = False,
    ) -> None:
        needs = ("get", "submit", "reads_inline")
        if not isinstance(session_id, str):
            check_adapter_store(
                store,
                user="MemorydSession",
                needs=needs,
                signature="(session_id, store)",
                other=session_id,
            )
        self.session_id = msgs.validate_conversation_id(session_id)
        check_adapter_store(
            store, user="MemorydSession", needs=needs, signature="(session_id, store)"
        )
        self.store = store
        self.drop_orphan_outputs = drop_orphan_outputs
        self._closed = False
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )

    @property
    def closed(self) -> bool:
        """Whether `close` was called: every later call raises ``RuntimeError``."""
        return self._closed

    def close(self) -> None:
        """End the session, as ``SQLiteSession.close`` does; calling it again does nothing.

        Later calls (`get_items`, `add_items`, `pop_item`, `clear_session`) raise
        ``RuntimeError``. The store is left running: it is the caller's, and other
        sessions may share it (stop it with ``store.stop()``). Nothing is lost: every
        write this session acknowledged is already durable in the store.
        """
        self._closed = True

    async def __aenter__(self) -> Self:
        """``async with MemorydSession(...) as session:`` closes the session on exit."""
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the session (see `close`)."""
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"MemorydSession {self.session_id!r} is closed; make a new MemorydSession "
                "on the same store to use the conversation again"
            )

    def _read(self, limit: int | None) -> list[dict[str, Any]]:
        """Items, oldest first: all of them, or the last ``limit`` (orphans dropped if set)."""
        if limit is None or limit < 0:  # the SDK's SQLiteSession reads all for a negative limit
            return _items_of(self.store.get(self.session_id))
        if limit == 0:
            return []
        items = _items_of(self.store.get(self.session_id, limit=limit))
        if len(items) > limit:  # a foreign message may hold several items
            items = items[-limit:]
        return without_orphan_outputs(items) if self.drop_orphan_outputs else items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first.

        Args:
            limit: at most this many of the latest items; None uses
                ``session_settings.limit`` (None there means all). With
                ``drop_orphan_outputs=True``, a limited window leaves out the tool
                outputs whose call fell outside it.

        Returns:
            The items exactly as they were added.

        Raises:
            TypeError: ``limit`` is not an int or None.
            RuntimeError: the session is closed.
        """
        self._check_open()
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an int or None, not {limit!r:.60}")
        effective = resolve_session_limit(limit, self.session_settings)
        if self.store.reads_inline(effective):
            try:
                with without_waiting():
                    return cast(list[TResponseInputItem], self._read(effective))
            except WouldWait:
                pass  # the store is restarting: wait for it in a thread
        items = await asyncio.to_thread(self._read, effective)
        return cast(list[TResponseInputItem], items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` as one atomic store event (nothing for an empty list).

        Raises:
            InvalidSessionItem: an item is not a dict or holds a value of a type JSON
                cannot carry (an `InvalidMessage` and a ``TypeError``); nothing is
                written.
            InvalidMessage: an item is too large or otherwise not storable; nothing
                is written.
            RuntimeError: the session is closed (even for an empty list).
        """
        self._check_open()
        if isinstance(items, Mapping | str | bytes):  # one item given where a list belongs
            raise InvalidSessionItem(
                f"items must be a list of session items (dicts), not one {type(items).__name__}"
                "; wrap it in a list"
            )
        if not items:
            return
        encoded: list[dict[str, Any]] = []
        for index, item in enumerate(cast(list[Any], items)):
            if type(item) is not dict and not isinstance(item, Mapping):
                raise InvalidSessionItem(
                    f"session item {index} must be a dict, got {type(item).__name__}"
                )
            encoded.append(encode_item(item))
        try:
            request = requests.add(
                self.session_id,
                encoded,
                idempotency_key=None,
                expected_version=None,
                max_bytes=self.store.max_message_bytes,
            )
        except InvalidMessage:
            _check_types(cast(list[Any], items))  # a value of the wrong type: a TypeError
            raise
        await Outlasting(self.store.submit(request))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the latest item, or None when the session is empty.

        Removes the newest stored message: for items this session wrote that is
        exactly one item. A plain chat message another writer stored (see
        `decode_items`) goes whole, and its last item is returned.

        Raises:
            RuntimeError: the session is closed.
        """
        self._check_open()
        message: dict[str, Any] | None = await Outlasting(
            self.store.submit(requests.pop(self.session_id))
        )
        if message is None:
            return None
        items = decode_items(message)
        return cast(TResponseInputItem, items[-1]) if items else None

    async def clear_session(self) -> None:
        """Remove every item of the session (the store's log keeps a ``cleared`` marker).

        Raises:
            RuntimeError: the session is closed.
        """
        self._check_open()
        await Outlasting(self.store.submit(requests.clear(self.session_id)))

    def __repr__(self) -> str:
        return f"<MemorydSession {self.session_id!r} on {self.store!r}>"

"""DefaultProvider: a store plus an optional safe window and preprocessors (beamai, Koog).

The window and the preprocessors shape only what is sent (`prepare`); the store always
keeps the full history. With a window, `history` reads only the tail of the
conversation the window can use and the system messages before it
(``get(limit=..., system=True)``, one read of the store's system-message index), so a
long conversation costs O(window) per call, not O(history), and what `prepare` sends
is exactly `safe_window` of the whole log: no system message is ever left behind.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from memoryd import messages as msgs
from memoryd.messages import is_system
from memoryd.provider import preprocessors as pre
from memoryd.provider.chat_store import (
    HANDLE_FEATURES,
    ChatStore,
    StoreFeatures,
    check_store,
    store_add,
    store_features,
    store_get,
)
from memoryd.provider.safe_window import check_messages, check_window, safe_window
from memoryd.store.default import default_store
from memoryd.store.handle import StoreHandle

__all__ = ["DefaultProvider", "window"]

Message = dict[str, Any]


class DefaultProvider:
    """beamai's default provider: history from a store, a window applied only in `prepare`.

    Args:
        store: The store holding the conversations: a store handle, or any
            `memoryd.ChatStore` (``get``, ``add``, ``clear``; see
            `memoryd.provider.chat_store` for what a store without the optional
            methods cannot give).
        window: Send at most the last ``window`` non-system messages (`safe_window`);
            None sends everything.
        preprocessors: Callables ``list -> list`` run in order inside `prepare`, after
            the window (Koog: order matters).
        store_preprocessors: Callables ``list -> list`` run in order on the messages
            `append` records, before they are stored (for example `preprocessors.redact`).
        read_tail: With a window, let `history` read only the last messages the window
            can use, after every system message stored before them (a store whose ``get``
            takes no ``limit=`` and ``system=`` is read whole). False reads whole histories.

    Raises:
        TypeError: ``store`` is not a store (the message names what it lacks), or a
            preprocessor is not callable.
        ValueError: ``window`` is not None or an int >= 0.
    """

    def __init__(
        self,
        store: StoreHandle | ChatStore,
        window: int | None = None,
        *,
        preprocessors: Sequence[pre.Preprocessor] = (),
        store_preprocessors: Sequence[pre.Preprocessor] = (),
        read_tail: bool = True,
    ) -> None:
        self._store: Any = None
        self._resolve: Callable[[], StoreHandle] | None = None
        self._features: StoreFeatures = HANDLE_FEATURES
        if callable(store) and not hasattr(store, "get"):
            self._resolve = store
        else:
            self._store = check_store(store, user="DefaultProvider")
            self._features = store_features(self._store)
        self._window = None if window is None else check_window(window, "window")
        self._preprocessors = pre.check_steps(preprocessors, "preprocessors")
        self._store_preprocessors = pre.check_steps(store_preprocessors, "store_preprocessors")
        self._read_tail = bool(read_tail)

    @classmethod
    def on_default_store(
        cls,
        window: int | None = None,
        *,
        preprocessors: Sequence[pre.Preprocessor] = (),
        store_preprocessors: Sequence[pre.Preprocessor] = (),
    ) -> DefaultProvider:
        """A provider on the shared default store, which is started on first use.

        The store is looked up on every call, so the provider keeps working after
        ``memoryd.shutdown()`` (the next call starts a fresh default store).

        Args:
            window: As in the constructor.
            preprocessors: As in the constructor.
            store_preprocessors: As in the constructor.

        Returns:
            The provider.
        """
        return cls(
            default_store,  # type: ignore[arg-type]
            window,
            preprocessors=preprocessors,
            store_preprocessors=store_preprocessors,
        )

    # -- configuration ----------------------------------------------------------------

    @property
    def store(self) -> Any:
        """The store (the default store is started here on first use)."""
        if self._store is not None:
            return self._store
        assert self._resolve is not None
        return self._resolve()

    @property
    def store_features(self) -> StoreFeatures:
        """What the store offers beyond `memoryd.ChatStore`."""
        return self._features

    @property
    def window(self) -> int | None:
        """The window size, or None."""
        return self._window

    @property
    def preprocessors(self) -> tuple[pre.Preprocessor, ...]:
        """The preprocessors `prepare` runs after the window."""
        return self._preprocessors

    @property
    def store_preprocessors(self) -> tuple[pre.Preprocessor, ...]:
        """The preprocessors `append` runs before storing."""
        return self._store_preprocessors

    def stages(self) -> list[tuple[str, pre.Preprocessor]]:
        """The steps of `prepare`, named, in order (what `memoryd.explain` reports).

        Returns:
            ``(name, step)`` pairs.
        """
        steps: list[tuple[str, pre.Preprocessor]] = []
        if self._window is not None:
            size = self._window
            steps.append(
                (
                    f"safe_window({size}): the last {size} non-system messages, "
                    "system messages kept, tool calls kept whole",
                    lambda messages: safe_window(messages, size),
                )
            )
        steps.extend((pre.name_of(step), step) for step in self._preprocessors)
        return steps

    # -- MemoryProvider -----------------------------------------------------------------

    def history(self, cid: str) -> list[Message]:
        """The stored history; with a window, only what the window can use.

        With a window of ``n`` (and ``read_tail``), reads the last messages until they
        hold ``n`` non-system messages or the history is exhausted, after every system
        message stored before them, in one read each: `safe_window` of the result
        equals `safe_window` of the whole history.

        Args:
            cid: The conversation id.

        Returns:
            Fresh copies of the messages, oldest first.

        Raises:
            InvalidConversationId: A bad ``cid``.
            StoreUnavailable: The store is not running.
        """
        store, features = self.store, self._features
        if self._window is None or not self._read_tail or not features.get_limit:
            return store_get(store, features, cid)
        wanted = self._window
        limit = max(wanted, 1)
        while True:
            # Fewer than `limit` messages: the history is exhausted (the system messages
            # before a tail are only there when the history is longer than the tail).
            found: list[dict[str, Any]] = list(store.get(cid, limit=limit, system=True))
            if len(found) < limit or sum(1 for m in found if not is_system(m)) >= wanted:
                # a store of ours returns fresh copies; a user's store may not
                return found if features.handle else copy.deepcopy(found)
            limit *= 2

    def append(
        self, cid: str, messages: Sequence[Message], *, idempotency_key: str | None = None
    ) -> int:
        """Store ``messages`` (after the store preprocessors) as one event.

        Args:
            cid: The conversation id.
            messages: The messages to add (at least one); a `CheckedMessages` is
                stored without a second check.
            idempotency_key: A repeated key writes nothing and returns the first version.

        Returns:
            The conversation's version after the write (unchanged when the store
            preprocessors left nothing to store). A store without versions
            (`memoryd.ChatStore` alone) answers its message count instead.

        Raises:
            InvalidConversationId: A bad ``cid``.
            InvalidMessage: A bad message (nothing is written).
            TypeError: A store preprocessor returned something other than a list.
            ConflictError, WriteTimeout, StoreUnavailable: As for the store's ``add``.
        """
        cid = msgs.validate_conversation_id(cid)
        batch = self.to_store(messages)
        store = self.store
        if not batch:
            return int(store.version(cid)) if self._features.version else 0
        version = store_add(store, self._features, cid, batch, idempotency_key=idempotency_key)
        return version if version is not None else len(store_get(store, self._features, cid))

    def to_store(self, messages: Sequence[Message]) -> Sequence[Message]:
        """What `append` stores of ``messages``: checked once, then the store preprocessors.

        Without store preprocessors the answer is the checked batch itself, which the
        store takes without checking it again (a `CheckedMessages` passes through
        untouched). The preprocessors get a fresh list of copies they may change; the
        store checks what they return.

        Args:
            messages: The messages to add (at least one); a list, or a `CheckedMessages`.

        Returns:
            The messages to store (empty when the preprocessors left nothing).

        Raises:
            InvalidMessage: A bad message.
            TypeError: A store preprocessor returned something other than a list.
        """
        batch = msgs.check(messages, max_bytes=None)
        if not self._store_preprocessors:
            return batch
        fresh = copy.deepcopy(list(batch)) if batch is messages else list(batch)
        return pre.run(self._store_preprocessors, fresh)

    def prepare(self, cid: str, messages: list[Message]) -> list[Message]:
        """Apply the window, then the preprocessors in order. Pure.

        Args:
            cid: The conversation id.
            messages: History and the current turn, oldest first. Not mutated: a
                preprocessor not from `memoryd.preprocessors` gets deep copies.

        Returns:
            The messages to send.

        Raises:
            InvalidConversationId: A bad ``cid``.
            InvalidMessage: ``messages`` is not a list of message dicts.
            TypeError: A preprocessor returned something other than a list of dicts.
        """
        msgs.validate_conversation_id(cid)
        items = check_messages(messages)
        if self._window is not None:
            items = safe_window(items, self._window)
        if any(type(step).__module__ != pre.__name__ for step in self._preprocessors):
            items = copy.deepcopy(items)
        return pre.run(self._preprocessors, items)

    def clear(self, cid: str) -> None:
        """Clear the conversation in the store (the log keeps a ``cleared`` marker).

        Args:
            cid: The conversation id.
        """
        self.store.clear(cid)

    def __repr__(self) -> str:
        store = getattr(self._store, "name", self._store) if self._store is not None else None
        store = "default store" if store is None else store
        return f"DefaultProvider({store!r}, window={self._window!r})"


def window(n: int) -> DefaultProvider:
    """A safe window of ``n`` messages on the shared default store (started on first use).

    ``Agent(memory=memoryd.window(50))`` is beamai's ``{window, 50}``.

    Args:
        n: The window size.

    Returns:
        ``DefaultProvider.on_default_store(n)``.

    Raises:
        ValueError: ``n`` is not an int >= 0.
    """
    return DefaultProvider.on_default_store(check_window(n, "window"))

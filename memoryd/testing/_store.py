"""The store handle the contract drives: the `Store` protocol and the `make_store` factory type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Message", "Store", "StoreFactory", "assert_nothing_written"]

Message = dict[str, Any]


class Store(Protocol):
    """What the contract calls on a store handle: the methods of `memoryd.StoreHandle`.

    Arguments are typed ``Any`` where the contract passes invalid values on purpose (a
    conversation id that is not a string, a message list that is not a list) to check
    that the store refuses them.
    """

    name: str

    def add(
        self,
        cid: Any,
        messages: Any,
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Append messages as one event; return the conversation's new version."""
        ...

    def get(
        self,
        cid: Any,
        *,
        limit: int | None = None,
        at_version: int | None = None,
        system: Any = False,
    ) -> list[Message]:
        """Return the history (the last ``limit`` messages, as of ``at_version``; with
        ``system``, after the system messages stored before them)."""
        ...

    def clear(self, cid: Any) -> None:
        """Empty the conversation with one ``cleared`` event."""
        ...

    def begin(self, request: Any) -> Any:
        """Send a write built by `memoryd.store.requests`; return a `PendingWrite`."""
        ...

    def begin_on_loop(self, request: Any) -> Any:
        """`begin` from a running event loop; return an awaitable of the write's result."""
        ...

    def pop(self, cid: Any) -> Message | None:
        """Remove and return the last message, or return None when there is none."""
        ...

    def version(self, cid: Any) -> int:
        """Return the version of the conversation's last event (0 when never written)."""
        ...

    def events(self, cid: Any, *, after: int = 0, limit: int | None = None) -> list[Any]:
        """Return the conversation's `memoryd.Event` log after version ``after`` (at most
        ``limit`` events)."""
        ...

    def conversations(
        self,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int | None = None,
        include_empty: bool = False,
    ) -> list[str]:
        """List conversation ids, sorted, filtered by ``prefix`` and paged by ``after``."""
        ...

    def fork(self, source: Any, target: Any, *, at_version: int | None = None) -> int:
        """Copy ``source``'s history into ``target``; return the target's version."""
        ...

    def record(
        self,
        cid: Any,
        kind: Any,
        *,
        messages: Any = (),
        data: Any = None,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        supersede: bool = False,
    ) -> int:
        """Append a ``memo`` or ``compacted`` event; return the new version. A memo
        with ``supersede`` drops the conversation's earlier events from its log."""
        ...

    def import_events(self, cid: Any, events: Any) -> int:
        """Write exported events exactly as given; return the conversation's version."""
        ...

    def tail(self, *, after: int = 0, limit: int = 1000, timeout: float = 0.0) -> list[Any]:
        """Return the store's `memoryd.Change` feed after position ``after``."""
        ...

    def stats(self) -> dict[str, Any]:
        """Return counters, at least ``conversations`` and ``events``."""
        ...

    def refuses_writes(self) -> bool:
        """A hint: True while the store is known to refuse every write."""
        ...

    def stop(self) -> None:
        """Stop the store; later calls on the handle raise `memoryd.StoreUnavailable`."""
        ...


StoreFactory = Callable[..., Store]
"""``make_store(**options) -> Store``: starts a new, empty store on each call."""


def assert_nothing_written(store: Store, cid: str, before: tuple[int, list[Message]]) -> None:
    """Assert that ``cid`` still has the version and history captured in ``before``.

    Args:
        store: the store under test.
        cid: the conversation a refused write aimed at.
        before: ``(store.version(cid), store.get(cid))`` taken before the write.
    """
    version, history = before
    assert store.version(cid) == version
    assert store.get(cid) == history

"""The constructor check both adapters run on the store they are given. Pure: no I/O.

A user switching from ``SQLiteSession("user-1", "chat.db")`` or
``SQLChatMessageHistory(session_id, connection)`` easily passes a path, or the two
arguments in the other order; without this check the mistake surfaces at the first call
as an ``AttributeError`` deep in the adapter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_adapter_store"]


def check_adapter_store(
    store: Any, *, user: str, needs: Sequence[str], signature: str, other: Any = None
) -> None:
    """Raise a ``TypeError`` naming the fix when ``store`` is not a store handle.

    Duck-typed: an object is accepted when every method in ``needs`` is callable on it
    (a wrapper delegating to a handle passes), unless it is a path or a mapping.

    Args:
        store: What the caller passed as the store.
        user: The adapter's name, for the message.
        needs: The store methods the adapter calls.
        signature: The adapter's argument order, for the message (``"(store, cid)"``).
        other: The caller's other argument (the id): a store there means a swap.

    Raises:
        TypeError: ``store`` lacks one of ``needs``.
    """
    if _is_store(store, needs):
        return
    if other is not None and _is_store(other, needs):
        raise TypeError(
            f"{user} takes {signature}; the store and the id are swapped "
            f"(got {type(store).__name__} where the store belongs)"
        )
    hint = ""
    if isinstance(store, str | os.PathLike):
        hint = (
            f"; {os.fspath(store)!r} is a path, not a store: open one with "
            f"memoryd.LmdbStore.start({os.fspath(store)!r})"
        )
    raise TypeError(
        f"{user} needs a memoryd store handle (memoryd.LmdbStore.start(path), "
        f"memoryd.EphemeralStore.start(), memoryd.connect(address), ...), "
        f"got {type(store).__name__}{hint}"
    )


def _is_store(value: Any, needs: Sequence[str]) -> bool:
    if isinstance(value, str | bytes | os.PathLike | Mapping):
        return False  # a dict has a get(), but no conversations
    return all(callable(getattr(value, name, None)) for name in needs)

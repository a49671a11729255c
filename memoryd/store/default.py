"""The shared default store ``"memoryd.default"``: started lazily, exactly once.

It lives here, not in `memoryd.store.lookup`, because it picks a backend (LMDB in
``$MEMORYD_DATA``, ephemeral otherwise), and the lookup table names no backend:
the application tree imports it.
"""

from __future__ import annotations

import os

from memoryd.store import lookup
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore

__all__ = ["default_store"]


def default_store() -> StoreHandle:
    """The shared default store ``"memoryd.default"``, started on first use, exactly once.

    It is durable in ``$MEMORYD_DATA`` when that names a directory, ephemeral otherwise.
    """
    with lookup.lock():
        handle = lookup.whereis(lookup.DEFAULT_STORE)
        if handle is not None:
            return handle
        data = os.environ.get("MEMORYD_DATA")
        if data:
            return LmdbStore.start(data, name=lookup.DEFAULT_STORE)
        return EphemeralStore.start(name=lookup.DEFAULT_STORE)

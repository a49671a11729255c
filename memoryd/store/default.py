"""The shared default store ``"memoryd.default"``: started lazily, exactly once.

It lives here, not in `memoryd.store.lookup`, because it picks a backend (LMDB in
``$MEMORYD_DATA``, ephemeral otherwise), and the lookup table names no backend:
the application tree imports it. Its name is the wire's (`DEFAULT_STORE_NAME`):
the daemon serves this store under the same name.
"""

from __future__ import annotations

import os

from memoryd.protocol import DEFAULT_STORE_NAME
from memoryd.store import lookup
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore

__all__ = ["default_store"]


def default_store() -> StoreHandle:
    """The shared default store ``"memoryd.default"``, started on first use, exactly once.

    It is durable in ``$MEMORYD_DATA`` when that names a directory, ephemeral otherwise.
    """
    with lookup.lock():
        handle = lookup.whereis(DEFAULT_STORE_NAME)
        if handle is not None:
            return handle
        data = os.environ.get("MEMORYD_DATA")
        if data:
            return LmdbStore.start(data, name=DEFAULT_STORE_NAME)
        return EphemeralStore.start(name=DEFAULT_STORE_NAME)

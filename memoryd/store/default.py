"""The shared default store ``"memoryd.default"``: started lazily, exactly once.

It lives here, not in `memoryd.store.lookup`, because it picks a backend (LMDB in
``$MEMORYD_DATA``, ephemeral otherwise), and the lookup table names no backend:
the application tree imports it. Its name is the wire's (`DEFAULT_STORE_NAME`):
the daemon serves this store under the same name.

Should the supervision tree give up (a crash storm past its restart intensity), the
next call starts the default store again; an ephemeral one then comes back empty. That
is never silent: it is logged as an error (``default_store_recreated_empty``) and
counted in the store's ``stats()["recreated_empty"]``.
"""

from __future__ import annotations

import os

import structlog

from memoryd.protocol import DEFAULT_STORE_NAME
from memoryd.store import lookup
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore

__all__ = ["default_store"]

log = structlog.get_logger(__name__)


def default_store() -> StoreHandle:
    """The shared default store ``"memoryd.default"``, started on first use, exactly once.

    It is durable in ``$MEMORYD_DATA`` when that names a directory, ephemeral otherwise.
    An ephemeral default store started again after its tree gave up is logged as an
    error and counted (``stats()["recreated_empty"]``).
    """
    with lookup.lock():
        handle = lookup.whereis(DEFAULT_STORE_NAME)
        if handle is not None:
            return handle
        data = os.environ.get("MEMORYD_DATA")
        if data:
            return LmdbStore.start(data, name=DEFAULT_STORE_NAME)
        lost = lookup.lost(DEFAULT_STORE_NAME)
        handle = EphemeralStore.start(name=DEFAULT_STORE_NAME)
        if lost:
            times = lookup.note_recreated_empty(DEFAULT_STORE_NAME)
            log.error(
                "default_store_recreated_empty",
                store=DEFAULT_STORE_NAME,
                times=times,
                reason="the supervision tree gave up after repeated crashes; the ephemeral "
                "default store was started again, empty: the conversations it held are lost",
            )
        return handle

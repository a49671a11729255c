"""Library-level functions: the shared default store, lookup by name, shutdown."""

from __future__ import annotations

import os

from memoryd import app
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore

__all__ = ["default_store", "shutdown", "whereis"]

_KINDS: dict[str, type[LmdbStore] | type[EphemeralStore]] = {
    "lmdb": LmdbStore,
    "ephemeral": EphemeralStore,
}


def default_store() -> StoreHandle:
    """The shared default store ``"memoryd.default"``, started on first use, exactly once.

    It is durable in ``$MEMORYD_DATA`` when that names a directory, ephemeral otherwise.
    """
    with app.lock():
        handle = whereis(app.DEFAULT_STORE)
        if handle is not None:
            return handle
        data = os.environ.get("MEMORYD_DATA")
        if data:
            return LmdbStore.start(data, name=app.DEFAULT_STORE)
        return EphemeralStore.start(name=app.DEFAULT_STORE)


def whereis(name: str) -> StoreHandle | None:
    """A handle on the started store registered as ``name``, or None."""
    config = app.active_config(name)
    if config is None:
        return None
    if config.kind == "redis":  # imported on use: redis-py is an optional extra
        from memoryd.store.redis.handle import RedisStore  # noqa: PLC0415

        return RedisStore(config)
    return _KINDS[config.kind](config)


def shutdown() -> None:
    """Stop every store and the supervision tree; the next use starts a fresh tree."""
    app.shutdown()

"""StoreRegistry: the daemon's stores by name, started on first use.

The default store is durable in the data directory. A named store is durable
in ``data/stores/<name>`` (or ephemeral when started so), started by the first
request that names it unless the request asks not to (``Memoryd-Autostart: no``,
sent by handles from ``RemoteStore.start``, which behave like local handles:
once the store is stopped they raise ``StoreNotRunning``).

With a Redis backend (``memoryd serve --backend redis://...``) every store lives
in Redis instead, under a key prefix derived from its name, so several stateless
daemons can serve the same stores and any of them answers any conversation.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from memoryd.errors import AlreadyStarted, StoreNotRunning
from memoryd.protocol import DEFAULT_STORE_NAME, check_store_name
from memoryd.store import lookup as api
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore
from supervisors import whereis as actor_whereis

__all__ = ["KINDS", "StoreRegistry", "redis_prefix"]

KINDS = ("lmdb", "ephemeral")


def redis_prefix(name: str) -> str:
    """The Redis key prefix of a store: the same on every daemon serving that store."""
    if name == DEFAULT_STORE_NAME:
        return "memoryd"
    prefix = f"memoryd:{name}"
    if len(prefix) <= 64:
        return prefix
    return "memoryd:h" + hashlib.sha256(name.encode()).hexdigest()[:32]


class StoreRegistry:
    """Resolves store names to handles; starts and stops named stores. Thread-safe.

    Args:
        data: the data directory.
        max_message_bytes: the largest message the stores accept.
    """

    def __init__(self, data: Path, *, max_message_bytes: int, backend: str | None = None) -> None:
        self.data = data
        self.max_message_bytes = max_message_bytes
        self.backend = backend
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._incarnations: dict[str, tuple[str, int]] = {}

    def start_default(self) -> StoreHandle:
        """Start the durable default store in the data directory.

        Raises:
            AlreadyStarted: another process owns the directory (names its pid).
        """
        handle: StoreHandle
        if self.backend is not None:
            handle = self._start_redis(DEFAULT_STORE_NAME)
        else:
            handle = LmdbStore.start(
                self.data, name=DEFAULT_STORE_NAME, max_message_bytes=self.max_message_bytes
            )
        with self._lock:
            self._names.add(DEFAULT_STORE_NAME)
        return handle

    def resolve(self, name: str | None, *, autostart: bool = True) -> StoreHandle:
        """The handle for ``name`` (None: the default store), starting a named store if allowed.

        Raises:
            ValueError: an invalid name.
            StoreNotRunning: the store is not running and may not be started here.
        """
        name = DEFAULT_STORE_NAME if name is None else check_store_name(name)
        handle = api.whereis(name)
        if handle is not None:
            return handle
        if name == DEFAULT_STORE_NAME or not autostart:
            raise StoreNotRunning(
                f"store {name!r} is not running on the daemon; start it with "
                f"PUT /v1/stores/{name} (memoryd.connect(..., store={name!r}) does)"
            )
        handle, _ = self.start(name)
        return handle

    def start(
        self, name: str, *, kind: str = "lmdb", exclusive: bool = False
    ) -> tuple[StoreHandle, bool]:
        """Start a named store unless it runs already.

        Args:
            name: the store's name.
            kind: ``"lmdb"`` (durable in ``data/stores/<name>``) or ``"ephemeral"``.
            exclusive: raise `AlreadyStarted` if it runs already.

        Returns:
            The handle and whether this call started it.

        Raises:
            ValueError: an invalid name or kind.
            AlreadyStarted: ``exclusive`` and the store runs.
        """
        name = check_store_name(name)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, not {kind!r}")
        with self._lock:
            handle = api.whereis(name)
            if handle is not None:
                if exclusive:
                    raise AlreadyStarted(f"a store named {name!r} is already running")
                return handle, False
            if name == DEFAULT_STORE_NAME:
                raise StoreNotRunning("the default store is not running")
            started: StoreHandle
            if self.backend is not None and kind == "lmdb":
                started = self._start_redis(name)
            elif kind == "ephemeral":
                started = EphemeralStore.start(name=name, max_message_bytes=self.max_message_bytes)
            else:
                # the parent of the store directories is as private as the data directory
                (self.data / "stores").mkdir(mode=0o700, exist_ok=True)
                started = LmdbStore.start(
                    self.data / "stores" / name,
                    name=name,
                    max_message_bytes=self.max_message_bytes,
                )
            self._names.add(name)
            return started, True

    def _start_redis(self, name: str) -> StoreHandle:
        from memoryd.store.redis.handle import RedisStore  # noqa: PLC0415 - optional extra

        assert self.backend is not None
        return RedisStore.start(
            self.backend,
            name=name,
            prefix=redis_prefix(name),
            max_message_bytes=self.max_message_bytes,
        )

    def stop(self, name: str) -> bool:
        """Stop a named store. Returns False if it was not running.

        Raises:
            ValueError: an invalid name, or the default store (it stops with the daemon).
        """
        name = check_store_name(name)
        if name == DEFAULT_STORE_NAME:
            raise ValueError(
                "the default store runs as long as the daemon; stop the daemon to stop it"
            )
        with self._lock:
            handle = api.whereis(name)
            if handle is None:
                return False
            handle.stop()
            return True

    def running(self) -> list[str]:
        """Names of the running stores, sorted."""
        with self._lock:
            names = list(self._names)
        return sorted(name for name in names if api.whereis(name) is not None)

    def info(self, name: str) -> dict[str, Any] | None:
        """What a client needs to know about a running store, or None."""
        handle = api.whereis(check_store_name(name))
        if handle is None:
            return None
        config = getattr(handle, "config", None)
        return {
            "name": handle.name,
            "kind": getattr(config, "kind", "lmdb"),
            "max_message_bytes": handle.max_message_bytes,
        }

    def restarts(self) -> dict[str, int]:
        """Restarts observed per store: a new actor incarnation seen since the last look."""
        out: dict[str, int] = {}
        for name in self.running():
            ref = actor_whereis(name)
            if ref is None:
                continue
            urn, count = self._incarnations.get(name, (ref.actor_urn, 0))
            if urn != ref.actor_urn:
                count += 1
            self._incarnations[name] = (ref.actor_urn, count)
            out[name] = count
        return out

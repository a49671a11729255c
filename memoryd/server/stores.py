"""StoreRegistry: the daemon's view of its stores by name, started on first use.

Where a store runs is `memoryd.store.lookup`'s answer; this registry adds the
daemon's policy on top: which names it started, which named stores a request may
start (``Memoryd-Autostart: no``, sent by handles from ``RemoteStore.start``, makes
a stopped store raise ``StoreNotRunning`` instead; a read never creates a store that
does not exist, it is a 404; at most ``max_stores`` named stores run), and how a
durable store is started. That last one is chosen once, at daemon start (`durable_stores`): LMDB
(the default store in the data directory, named stores in ``data/stores/<name>``)
or Redis (``memoryd serve --backend redis://...``: every durable store in Redis
under a key prefix derived from its name, so several stateless daemons can serve
the same stores and any of them answers any conversation).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from memoryd.errors import AlreadyStarted, HttpError, StoreNotRunning, StoreUnavailable
from memoryd.protocol import DEFAULT_STORE_NAME, check_store_name
from memoryd.server.config import ServerConfig
from memoryd.server.footprint import make_dirs
from memoryd.store import lookup
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb.dirlock import make_dir
from memoryd.store.lmdb.handle import EphemeralStore, LmdbStore

__all__ = [
    "KINDS",
    "StartStore",
    "StoreRegistry",
    "durable_exists",
    "durable_stores",
    "lmdb_stores",
    "private_data_dir",
    "redis_prefix",
    "redis_stores",
]

KINDS = ("lmdb", "ephemeral")
"""The kinds a client may ask for when it starts a named store: ``"lmdb"`` is the wire's
word for a durable store (in whatever backend the daemon was started with)."""

StartStore = Callable[[str], StoreHandle]
"""Starts the store of a name and returns its handle (raises `AlreadyStarted` if taken)."""

log = structlog.get_logger("memoryd.server")


def private_data_dir(data: Path, made: list[Path] | None = None) -> None:
    """Create the data directory 0700 (fsynced with its parents), or make an existing
    one 0700 (logged).

    Args:
        data: the data directory.
        made: the directories created here are appended to it, outermost first (so a
            start that fails can remove them: `memoryd.server.footprint`).

    Raises:
        OSError: it cannot be created (or is not a directory), or its mode cannot be
            changed (not its owner).
    """
    make_dirs(data, made if made is not None else [])
    mode = data.stat().st_mode & 0o777
    if mode & 0o077:
        try:
            os.chmod(data, 0o700)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"the data directory {data} is mode {mode:04o}, open to other users, and "
                f"cannot be made 0700 ({exc.strerror}): chmod 700 it, or use another",
            ) from None
        log.warning("data_directory_made_private", data=str(data), was=f"{mode:04o}")


def durable_exists(config: ServerConfig) -> Callable[[str], bool]:
    """Whether a durable named store already exists, for the daemon of ``config``.

    LMDB: its directory ``data/stores/<name>`` exists. Redis: always True (starting a
    Redis store writes nothing, so a read that starts one creates nothing).
    """
    if config.backend is not None:
        return lambda name: True
    stores = config.data / "stores"
    return lambda name: (stores / name).is_dir()


def redis_prefix(name: str) -> str:
    """The Redis key prefix of a store: the same on every daemon serving that store."""
    if name == DEFAULT_STORE_NAME:
        return "memoryd"
    prefix = f"memoryd:{name}"
    if len(prefix) <= 64:
        return prefix
    return "memoryd:h" + hashlib.sha256(name.encode()).hexdigest()[:32]


def lmdb_stores(data: Path, *, max_message_bytes: int) -> StartStore:
    """Durable stores in LMDB: the default store in ``data``, others in ``data/stores/<name>``."""

    def start(name: str) -> StoreHandle:
        if name == DEFAULT_STORE_NAME:
            return LmdbStore.start(data, name=name, max_message_bytes=max_message_bytes)
        # the parent of the store directories is as private as the data directory, and
        # durable in it: a power cut must not take every named store away
        make_dir(data / "stores")
        return LmdbStore.start(
            data / "stores" / name, name=name, max_message_bytes=max_message_bytes
        )

    return start


def redis_stores(url: str, *, max_message_bytes: int, require_durable: bool = True) -> StartStore:
    """Durable stores in the Redis at ``url``, each under its `redis_prefix`; with
    ``require_durable`` a Redis that does not fsync every write is refused."""
    from memoryd.store.redis.handle import RedisStore  # noqa: PLC0415 - optional extra

    def start(name: str) -> StoreHandle:
        return RedisStore.start(
            url,
            name=name,
            prefix=redis_prefix(name),
            max_message_bytes=max_message_bytes,
            require_durable=require_durable,
        )

    return start


def durable_stores(config: ServerConfig) -> StartStore:
    """How the daemon of ``config`` starts its durable stores: Redis if it has a backend URL."""
    if config.backend is not None:
        return redis_stores(
            config.backend,
            max_message_bytes=config.max_message_bytes,
            require_durable=config.require_durable,
        )
    return lmdb_stores(config.data, max_message_bytes=config.max_message_bytes)


class StoreRegistry:
    """Resolves store names to handles; starts and stops named stores. Thread-safe.

    Args:
        durable: starts a durable store (the default one, and named ones of kind
            ``"lmdb"``); see `durable_stores`.
        max_message_bytes: the largest message the ephemeral stores accept.
        exists: whether a durable named store exists (default: every name does); a
            read of one that does not is a 404, never a new store.
        max_stores: the most named stores that may run at once (None: no limit).
    """

    def __init__(
        self,
        durable: StartStore,
        *,
        max_message_bytes: int,
        exists: Callable[[str], bool] | None = None,
        max_stores: int | None = None,
    ) -> None:
        self.max_message_bytes = max_message_bytes
        self.max_stores = max_stores
        self._exists = exists if exists is not None else (lambda name: True)
        self._starters: dict[str, StartStore] = {"lmdb": durable, "ephemeral": self._ephemeral}
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._closed = False

    def _ephemeral(self, name: str) -> StoreHandle:
        return EphemeralStore.start(name=name, max_message_bytes=self.max_message_bytes)

    def start_default(self) -> StoreHandle:
        """Start the durable default store.

        Raises:
            AlreadyStarted: another process owns the data directory (names its pid).
        """
        handle = self._starters["lmdb"](DEFAULT_STORE_NAME)
        with self._lock:
            self._names.add(DEFAULT_STORE_NAME)
        return handle

    def close(self) -> None:
        """Start no store from now on: the daemon is stopping and its requests are done.

        A start already under way finishes first (its store stops with the tree); a
        start asked later, by work that outlived the listener's grace period, raises
        `StoreUnavailable` instead of opening a store, or a new supervision tree, after
        the daemon stopped its own.
        """
        with self._lock:
            self._closed = True

    @staticmethod
    def _stopping(name: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"store {name!r} is not running: the daemon is stopping; retry once it is back"
        )

    def limit(self, max_stores: int) -> None:
        """Let at most ``max_stores`` named stores run (the file-descriptor budget's say)."""
        self.max_stores = max_stores

    def resolve(
        self, name: str | None, *, autostart: bool = True, create: bool = True
    ) -> StoreHandle:
        """The handle for ``name`` (None: the default store), starting a named store if allowed.

        Args:
            name: the store's name, or None for the default store.
            autostart: a named store that is not running may be started.
            create: a named store that does not exist yet may be created (writes);
                reads pass False.

        Raises:
            ValueError: an invalid name.
            StoreNotRunning: the store is not running and may not be started here.
            StoreUnavailable: the store is not running and the daemon is stopping.
            HttpError: 404 (a read of a store that does not exist), 409 (``max_stores``
                run already).
        """
        name = DEFAULT_STORE_NAME if name is None else check_store_name(name)
        running = lookup.whereis(name)
        if running is not None:
            return running
        if self._closed:
            raise self._stopping(name)
        if name == DEFAULT_STORE_NAME or not autostart:
            raise StoreNotRunning(
                f"store {name!r} is not running on the daemon; start it with "
                f"PUT /v1/stores/{name} (memoryd.connect(..., store={name!r}) does)"
            )
        if not create and not self._exists(name):
            raise HttpError(
                404,
                "UnknownStore",
                f"store {name!r} does not exist on the daemon; a read never creates a "
                f"store: write to it (or PUT /v1/stores/{name}) to create it",
            )
        handle, _ = self.start(name)
        return handle

    def start(
        self, name: str, *, kind: str = "lmdb", exclusive: bool = False
    ) -> tuple[StoreHandle, bool]:
        """Start a named store unless it runs already.

        Args:
            name: the store's name.
            kind: ``"lmdb"`` (durable, in the daemon's backend) or ``"ephemeral"``.
            exclusive: raise `AlreadyStarted` if it runs already.

        Returns:
            The handle and whether this call started it.

        Raises:
            ValueError: an invalid name or kind.
            AlreadyStarted: ``exclusive`` and the store runs.
            HttpError: 409 when ``max_stores`` named stores run already.
            StoreUnavailable: the registry is closed (`close`): the daemon is stopping.
        """
        name = check_store_name(name)
        starter = self._starters.get(kind) if isinstance(kind, str) else None
        if starter is None:
            raise ValueError(f"kind must be one of {list(KINDS)}, not {kind!r}")
        with self._lock:
            if self._closed:
                raise self._stopping(name)
            handle = lookup.whereis(name)
            if handle is not None:
                if exclusive:
                    raise AlreadyStarted(f"a store named {name!r} is already running")
                return handle, False
            if name == DEFAULT_STORE_NAME:
                raise StoreNotRunning("the default store is not running")
            self._check_room(name)
            started = starter(name)
            self._names.add(name)
            return started, True

    def _check_room(self, name: str) -> None:
        """Refuse a new named store past ``max_stores`` (the caller holds the lock)."""
        if self.max_stores is None:
            return
        running = sum(
            1 for n in self._names if n != DEFAULT_STORE_NAME and lookup.spec(n) is not None
        )
        if running >= self.max_stores:
            raise HttpError(
                409,
                "ValueError",
                f"cannot start store {name!r}: the daemon runs {running} named stores, its "
                f"limit (memoryd serve --max-stores {self.max_stores}); stop one "
                "(DELETE /v1/stores/NAME) or raise the limit",
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
            handle = lookup.whereis(name)
            if handle is None:
                return False
            handle.stop()
            # forgotten once stopped: a daemon that starts and stops stores of ever new
            # names keeps no trace of each one (a restart count starts again at 0)
            self._names.discard(name)
            return True

    def running(self) -> list[str]:
        """Names of the running stores, sorted."""
        with self._lock:
            names = list(self._names)
        return sorted(name for name in names if lookup.spec(name) is not None)

    def info(self, name: str) -> dict[str, Any] | None:
        """What a client needs to know about a running store, or None."""
        running = lookup.spec(check_store_name(name))
        if running is None:
            return None
        return {
            "name": running.name,
            "kind": running.backend.kind,
            "max_message_bytes": running.config.max_message_bytes,
        }

    def restarts(self) -> dict[str, int]:
        """Restarts per running store since it was started (`lookup.restarts`: every
        incarnation counted as it opens, also while a restart is under way)."""
        return {name: lookup.restarts(name) for name in self.running()}

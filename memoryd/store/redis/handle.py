"""RedisStore: a handle on a store kept in Redis or Redis Cluster.

The same contract as `LmdbStore`, on Redis Streams: one stream of msgpack events
per conversation, a small metadata hash beside it, all keys of a conversation in
one Cluster slot (see `redis_scripts`). Writes go to the store's actor, which
commits every write queued at that moment as one pipeline of atomic Lua scripts
(group commit). Reads skip the actor: the caller's thread asks Redis through the
actor's connection pool, so several daemons on one Redis answer every
conversation alike.

Durability is Redis's: with ``appendonly yes`` and ``appendfsync always`` an
acknowledged write is on the primary's disk; ``wait_replicas=N`` also waits for N
replicas of the write's primary (``WAIT``; on a Cluster, per primary). On Redis
Cluster the change feed (``tail``) is written right after each commit rather than in
the same step (see docs/redis.md).

`REDIS` is the backend's record: `RedisStoreActor` actors addressed by `RedisStore`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis

from memoryd._deadline import until
from memoryd.errors import EngineClosed, StorageError, StoreUnavailable
from memoryd.events import Change, Event
from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES
from memoryd.store import lookup
from memoryd.store.actor_handle import ActorStoreHandle
from memoryd.store.config import DEFAULT_CALL_TIMEOUT_S
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.actor import RedisStoreActor
from memoryd.store.redis.config import RedisConfig
from memoryd.store.redis.connections import CONNECTION_ERRORS, check_durable, detect_cluster
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.redis.scripts import redact
from memoryd.store.spec import Backend, StoreSpec

__all__ = ["REDIS", "URL_SCHEMES", "RedisStore"]

T = TypeVar("T")

URL_SCHEMES = ("redis", "rediss", "unix")
"""The URL schemes redis-py connects with."""

_PAUSE_S = 0.05
_MAX_BLOCK_S = 1.0


def _check_url(url: object) -> str:
    if not isinstance(url, str) or urlsplit(url).scheme not in URL_SCHEMES:
        raise ValueError(
            f"url must be a str starting with one of "
            f"{', '.join(s + '://' for s in URL_SCHEMES)}, not {url!r}"
        )
    return url


def _tail(engine: RedisEngine, *, after: int, limit: int, block: float) -> tuple[int, list[Change]]:
    return engine.tail(after, limit, block)


def _check_marker(engine: RedisEngine) -> None:
    """After a read on a new connection, check that Redis still holds the store's data
    (`memoryd.store.redis.identity`: a loss is logged and counted, the read answered)."""
    with contextlib.suppress(EngineClosed, redis.RedisError):  # checked again later
        engine.connections.check_marker(write=False)


class RedisStore(ActorStoreHandle):
    """A store in Redis or Redis Cluster; many processes and daemons may share one.

    The write path (a tell to the actor, a sliced wait, resending only writes
    never attempted) is the LMDB handle's; the reads are Redis's.

    Args:
        spec: the store's spec; its config is a `RedisConfig`.

    Raises:
        TypeError: the spec's config is not a `RedisConfig`.
    """

    config_type = RedisConfig

    def __init__(self, spec: StoreSpec[Any]) -> None:
        super().__init__(spec)
        assert isinstance(spec.config, RedisConfig)
        self._url = spec.config.url

    @classmethod
    def start(
        cls,
        url: str,
        *,
        name: str | None = None,
        prefix: str = "memoryd",
        wait_replicas: int = 0,
        cluster: bool | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        max_batch: int = 1024,
        require_durable: bool = True,
    ) -> RedisStore:
        """Start a store actor on the Redis at ``url`` under the app's tree.

        Args:
            url: ``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or
                ``unix:///path/to/redis.sock``; for a Cluster, any node's URL.
            name: the registered name (default ``"redis:<url without password>/<prefix>"``).
            prefix: the key prefix: stores with different prefixes share a server
                without seeing each other (1 to 64 of ``A-Z a-z 0-9 _ . : -``).
            wait_replicas: make every write wait for this many acknowledgements
                from the replicas of its primary (``WAIT`` on the connection that
                wrote, on every primary a batch wrote to; for up to half the call
                timeout); fewer: `WriteTimeout`, though the primary has the write.
            cluster: True for Redis Cluster, False for a single server, None to ask
                the server (``INFO cluster``), which must then be reachable.
            max_message_bytes: the largest message accepted.
            call_timeout_s: the deadline of every call through this handle.
            max_batch: the most writes sent in one pipeline.
            require_durable: refuse a Redis that does not fsync every write before it
                answers (``appendonly yes`` and ``appendfsync always``), at start and
                whenever the store reconnects (a restarted or failed-over server):
                writes to it fail with `StorageError` and nothing is sent. False
                accepts any server and logs a ``redis_not_durable`` warning instead.

        Returns:
            A handle on the running store.

        Raises:
            ValueError: a bad url, prefix or option.
            StoreUnavailable: ``cluster=None`` and the server cannot be reached.
            StorageError: ``require_durable`` and the server is not durable.
            AlreadyStarted: the name is in use.
        """
        url = _check_url(url)
        prefix = redis_scripts.check_prefix(prefix)
        if cluster is not None and not isinstance(cluster, bool):
            raise ValueError(f"cluster must be True, False or None, not {cluster!r}")
        if not isinstance(require_durable, bool):
            raise ValueError(f"require_durable must be True or False, not {require_durable!r}")
        if cluster is None:
            try:
                cluster = detect_cluster(url, min(call_timeout_s, 5.0))
            except redis.RedisError as exc:
                raise StoreUnavailable(
                    f"cannot reach Redis at {redact(url)} ({exc}); start it (a program "
                    "may also pass RedisStore.start(cluster=True/False) to start the "
                    "store before Redis is up)"
                ) from exc
        try:
            refusal = check_durable(url, min(call_timeout_s, 5.0), require=require_durable)
        except CONNECTION_ERRORS:
            refusal = None  # down now: checked before the first write reaches it
        if refusal is not None:
            raise refusal
        config = RedisConfig(
            name=name if name is not None else f"redis:{redact(url)}/{prefix}",
            max_message_bytes=max_message_bytes,
            call_timeout_s=call_timeout_s,
            max_batch=max_batch,
            url=url,
            prefix=prefix,
            cluster=cluster,
            wait_replicas=wait_replicas,
            require_durable=require_durable,
        )
        return lookup.start(REDIS, config)

    @property
    def url(self) -> str:
        """The Redis URL, without its password."""
        return redact(self._url)

    # -- reads --------------------------------------------------------------------------

    def _redis_read(self, fn: Callable[[RedisEngine], T]) -> T:
        """Run ``fn`` on the current engine, through restarts and lost connections.

        Raises:
            StoreUnavailable: the store is not running, or Redis stayed unreachable
                for the whole call timeout.
            StorageError: Redis refused the command.
        """
        deadline = until(self.call_timeout_s)
        while True:
            engine: RedisEngine = self._engine(deadline)
            try:
                found = fn(engine)
            except EngineClosed:
                continue
            except Exception as exc:
                if engine.closed:  # closed under the read by a restart: read again
                    continue
                self._read_failed(exc, deadline)
                continue
            _check_marker(engine)
            return found

    def _read_failed(self, exc: Exception, deadline: float) -> None:
        """Wait a moment after a lost connection, or raise what the caller should see."""
        if isinstance(exc, CONNECTION_ERRORS):
            if time.monotonic() + _PAUSE_S >= deadline:
                raise StoreUnavailable(
                    f"Redis at {self.url} did not answer within {self.call_timeout_s:g} s "
                    f"({exc}); the store {self.name!r} reconnects by itself once it is back"
                ) from exc
            time.sleep(_PAUSE_S)
            return
        if isinstance(exc, redis.RedisError):
            raise StorageError(f"Redis at {self.url} refused a read: {exc}") from exc
        raise exc

    def _get(self, cid: str, limit: int | None, at_version: int | None) -> list[dict[str, Any]]:
        return self._redis_read(lambda e: e.history(cid, limit, at_version))[1]

    def _get_system(self, cid: str, limit: int) -> list[dict[str, Any]]:
        return self._redis_read(lambda e: e.history_with_system(cid, limit))

    def _version(self, cid: str) -> int:
        return self._redis_read(lambda e: e.version(cid))

    def _events(self, cid: str, after: int, limit: int | None) -> list[Event]:
        return self._redis_read(lambda e: e.events(cid, after, limit))

    def _conversations(
        self, prefix: str, after: str | None, limit: int | None, include_empty: bool
    ) -> list[str]:
        return self._redis_read(lambda e: e.conversations(prefix, after, limit, include_empty))

    def _tail(self, after: int, limit: int, timeout: float) -> list[Change]:
        wait_until = time.monotonic() + timeout
        most = min(_MAX_BLOCK_S, self.call_timeout_s / 2)
        block = 0.0
        while True:
            seen, changes = self._redis_read(partial(_tail, after=after, limit=limit, block=block))
            remaining = wait_until - time.monotonic()
            if changes or remaining <= 0 or limit == 0:
                return changes
            after = seen  # positions up to here were deleted by a clear
            block = min(remaining, most)

    def stats(self) -> dict[str, Any]:
        """Counts (conversations, events, last position), commits and the Redis URL."""
        out = self._redis_read(lambda e: e.stats())
        out["name"] = self.name
        out["kind"] = self.kind
        commits = out["commits"]
        out["mean_batch"] = out["appends"] / commits if commits else 0.0
        return out


REDIS = Backend(kind="redis", actor=RedisStoreActor, handle=RedisStore)
"""The Redis backend: `RedisStore` handles on `RedisStoreActor` actors."""

"""RedisStoreActor: the store actor of a Redis-backed store; owns its redis-py client.

It is the LMDB `StoreActor` with another engine: the same ``submit`` tells, the
same group commit (every write queued at a flush goes to Redis in one pipeline;
with ``appendfsync always`` Redis fsyncs once before answering them all), the
same hand-back of writes never attempted when it stops. Only opening the engine
and committing a batch differ.

Let it crash, with one exception: a lost connection is not a crash. The batch is
resent until the call timeout (tokens make a resend harmless), then its callers
get `WriteTimeout`; redis-py reconnects on the next use. Any other Redis error
fails the batch with `StorageError` and the actor crashes and is restarted.
"""

from __future__ import annotations

import time
from typing import Any, cast

import structlog

from memoryd.errors import StorageError
from memoryd.store import engines
from memoryd.store.actor import Pending, StoreActor
from memoryd.store.config import StoreConfig
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.redis.scripts import redact
from memoryd.store.reply import Reply

__all__ = ["RedisStoreActor"]

log = structlog.get_logger(__name__)


def _fail(future: Reply, error: BaseException) -> None:
    future.set_exception((type(error), error, error.__traceback__))


class RedisStoreActor(StoreActor):
    """Owns one `RedisEngine` (a redis-py client and its connection pool).

    Args:
        config: a config of kind ``"redis"`` (``url``, ``prefix``, ``cluster``,
            ``wait_replicas``); restarts reuse it.
    """

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        self._redis: RedisEngine | None = None

    def init(self) -> None:
        """Create the engine and publish it to readers. Runs in the actor's thread.

        Connects lazily, so a restart while Redis is down still succeeds; calls
        then fail with `StoreUnavailable` until Redis is back.
        """
        cfg = self.config
        if cfg.url is None:
            raise StorageError(f"store {cfg.name!r} has kind 'redis' but no url")
        engine = RedisEngine(
            cfg.url,
            prefix=cfg.prefix,
            cluster=cfg.cluster,
            call_timeout_s=cfg.call_timeout_s,
            wait_replicas=cfg.wait_replicas,
        )
        self._redis = engine
        self._engine = cast(Any, engine)  # what StoreActor flushes, withdraws and closes
        engines.publish(cfg.name, engine)
        log.info("store_opened", store=cfg.name, url=redact(cfg.url), cluster=cfg.cluster)

    def _commit(self, batch: list[Pending]) -> None:
        """Send one batch to Redis and answer its callers. Runs in the actor's thread."""
        engine = self._redis
        assert engine is not None
        try:
            results = engine.write_batch([request for request, _ in batch], time.time())
        except Exception as exc:
            error = StorageError(f"store {self.config.name!r} failed: {type(exc).__name__}: {exc}")
            log.error("store_write_failed", store=self.config.name, error=repr(exc))
            for _, future in batch:
                _fail(future, error)
            self.crash(error)
            return
        self._answer(batch, results)

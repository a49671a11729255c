"""RedisStoreActor: the store actor of a Redis-backed store; owns its `RedisEngine`.

The same submissions, group commit and hand-back as every `StoreActor`:
every write queued at a flush goes to Redis in one pipeline (with ``appendfsync
always`` Redis fsyncs once before answering them all). Only opening the engine
and writing a batch are Redis's.

Let it crash, with one exception: a lost connection is not a crash. The batch is
resent until the call timeout (tokens make a resend harmless), then its callers
get `WriteTimeout`; redis-py reconnects on the next use. Any other Redis error
fails the batch with `StorageError` and the actor crashes and is restarted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memoryd.store.actor import StoreActor
from memoryd.store.redis.config import RedisConfig
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.redis.scripts import redact
from memoryd.store.requests import Add, Clear, WriteRequest

__all__ = ["RedisStoreActor"]


class RedisStoreActor(StoreActor[RedisConfig, RedisEngine]):
    """Owns one `RedisEngine` (a redis-py client and its connection pool).

    Args:
        config: the Redis URL, key prefix, cluster flag, replicas to wait for and
            whether to refuse a server that is not durable; restarts reuse it.
    """

    def _open_engine(self) -> RedisEngine:
        """Create the engine. Runs in the actor's thread.

        Connects lazily, so a restart while Redis is down still succeeds; calls
        then fail with `StoreUnavailable` until Redis is back.
        """
        cfg = self.config
        return RedisEngine(
            cfg.url,
            prefix=cfg.prefix,
            cluster=cfg.cluster,
            call_timeout_s=cfg.call_timeout_s,
            wait_replicas=cfg.wait_replicas,
            require_durable=cfg.require_durable,
        )

    def _write_batch(
        self, engine: RedisEngine, requests: list[WriteRequest], now: float
    ) -> list[tuple[bool, Any]]:
        """Send the batch to Redis as one pipeline. Runs in the actor's thread.

        An add's ``then_clear`` follows in a second pipeline, once the add is written:
        Redis keeps the two conversations apart (Cluster slots), so the clear comes
        after the add, never before it, and a crash between them leaves it undone.
        """
        plain = [replace(r, then_clear=None) if isinstance(r, Add) else r for r in requests]
        results = engine.write_batch(plain, now)
        clears = [
            Clear(cid=r.then_clear)
            for r, (ok, _) in zip(requests, results, strict=True)
            if ok and isinstance(r, Add) and r.then_clear is not None
        ]
        if clears:
            engine.write_batch(list(clears), now)
        return results

    def _opened_fields(self) -> dict[str, Any]:
        return {"url": redact(self.config.url), "cluster": self.config.cluster}

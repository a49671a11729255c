"""Whether a Redis server keeps what it acknowledged: ``appendonly yes`` and
``appendfsync always``, asked of the server before a store writes to it.

A Redis without an AOF fsynced on every write answers a write before it is on disk,
so a restart loses acknowledged writes without any client error. A store with
``require_durable`` (the default) refuses such a server: `RedisStore.start` raises,
and a batch bound for a node that is not durable (a server restarted or failed over
to one with other settings) fails its writes with `StorageError` without sending
them. With ``require_durable=False`` the store writes anyway and logs
``redis_not_durable`` once per connection.

Where ``CONFIG`` is disabled (renamed away by the operator), ``INFO persistence``
tells whether the AOF is on but not its fsync policy: an AOF is then accepted with a
``redis_fsync_policy_unknown`` warning.
"""

from __future__ import annotations

from typing import Any

import redis
import structlog

from memoryd.errors import StorageError
from memoryd.store.redis.scripts import redact

__all__ = ["Persistence", "check", "persistence", "problem"]

log = structlog.get_logger(__name__)

Persistence = tuple[str, str | None]
"""``(appendonly, appendfsync)`` as the server reports them; the fsync policy is None
when the server would not say (``CONFIG`` disabled)."""


def persistence(client: Any) -> Persistence:
    """Ask the server behind ``client`` (a ``redis.Redis``) how it persists writes.

    Raises:
        redis.ConnectionError, redis.TimeoutError: the server cannot be reached.
    """
    try:
        found = client.config_get("append*")
    except redis.ResponseError:  # CONFIG renamed or disabled: INFO still answers
        info = client.info("persistence")
        return ("yes" if int(info.get("aof_enabled", 0)) else "no", None)
    return (_text(found.get("appendonly", "no")), _text(found.get("appendfsync", "")) or None)


def problem(found: Persistence) -> str | None:
    """What keeps the server from being durable, or None. Pure."""
    appendonly, appendfsync = found
    if appendonly != "yes":
        return f"appendonly is {appendonly!r}"
    if appendfsync is not None and appendfsync != "always":
        return f"appendfsync is {appendfsync!r}"
    return None


def check(client: Any, *, url: str, require: bool) -> StorageError | None:
    """The error writes to the server behind ``client`` fail with, or None to write.

    Logs ``redis_not_durable`` when the server is not durable and not ``require``,
    ``redis_fsync_policy_unknown`` when it would not tell its fsync policy.

    Raises:
        redis.ConnectionError, redis.TimeoutError: the server cannot be reached.
    """
    found = persistence(client)
    where = redact(url)
    if found[0] == "yes" and found[1] is None:
        log.warning("redis_fsync_policy_unknown", url=where, appendonly="yes")
    why = problem(found)
    if why is None:
        return None
    if not require:
        log.warning(
            "redis_not_durable",
            url=where,
            appendonly=found[0],
            appendfsync=found[1],
            hint="acknowledged writes may be lost when redis-server restarts",
        )
        return None
    return StorageError(
        f"Redis at {where} is not durable ({why}): an acknowledged write would be lost "
        "when it restarts. Set `appendonly yes` and `appendfsync always` on the server "
        "(CONFIG SET or redis.conf), or pass require_durable=False "
        "(memoryd serve --redis-not-durable) to accept losing writes"
    )


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)

"""RedisConfig: how to reach one Redis-backed store, as one frozen value."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.store.config import StoreConfig, check_int

__all__ = ["RedisConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisConfig(StoreConfig):
    """Where a store's data lives in Redis (the common fields are `StoreConfig`'s).

    Attributes:
        url: the Redis URL (``redis://``, ``rediss://`` or ``unix://``).
        prefix: the key prefix: stores with different prefixes share a server.
        cluster: the URL names a Redis Cluster node.
        wait_replicas: Redis replicas that must acknowledge each write (``WAIT``).
        require_durable: refuse a server that does not fsync every write before it
            answers (``appendonly yes``, ``appendfsync always``; see `durability`).

    Raises:
        ValueError: a field is out of range (the message names it).
    """

    url: str
    prefix: str = "memoryd"
    cluster: bool = False
    wait_replicas: int = 0
    require_durable: bool = True

    def __post_init__(self) -> None:
        super(RedisConfig, self).__post_init__()
        if not isinstance(self.url, str) or not self.url:
            raise ValueError(f"url must be a non-empty str, not {self.url!r}")
        if not isinstance(self.cluster, bool):
            raise ValueError(f"cluster must be True or False, not {self.cluster!r}")
        check_int(self.wait_replicas, "wait_replicas", 0)
        if not isinstance(self.require_durable, bool):
            raise ValueError(f"require_durable must be True or False, not {self.require_durable!r}")

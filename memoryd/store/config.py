"""StoreConfig: everything a store actor needs to (re)start, as one frozen value."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "DEFAULT_MAP_SIZE", "DEFAULT_MAX_MAP_SIZE", "StoreConfig"]

DEFAULT_MAP_SIZE = 1 << 33
"""8 GiB of address space reserved up front; the file only grows as data is written."""

DEFAULT_MAX_MAP_SIZE = 1 << 44
"""16 TiB: the map never grows past this unless a store sets a smaller ``max_map_size``."""

DEFAULT_CALL_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreConfig:
    """How to open one store.

    Attributes:
        name: the registered name.
        kind: ``"lmdb"`` or ``"ephemeral"``.
        path: the data directory.
        durable: fsync every commit before acknowledging it.
        map_size: initial LMDB map size in bytes (grows by itself when full).
        max_map_size: the map never grows past this many bytes; a write that
            needs more is refused with ``StorageError`` (reads keep working).
        max_message_bytes: the largest message accepted (compact JSON, UTF-8).
        call_timeout_s: the deadline of every call made through a handle.
        max_batch: the most writes committed in one transaction.
        max_linger_s: the longest a batch waits for writers expected from the
            recent commits (group commit); 0 commits at once.
        delete_on_stop: remove ``path`` when the store stops normally.
        url: the Redis URL (kind ``"redis"``; ``path`` is unused there).
        prefix: the Redis key prefix (kind ``"redis"``).
        cluster: the Redis URL names a Redis Cluster node (kind ``"redis"``).
        wait_replicas: Redis replicas that must acknowledge each write (``WAIT``).
    """

    name: str
    kind: str
    path: Path
    durable: bool = True
    map_size: int = DEFAULT_MAP_SIZE
    max_map_size: int = DEFAULT_MAX_MAP_SIZE
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_batch: int = 1024
    max_linger_s: float = 0.001
    delete_on_stop: bool = False
    url: str | None = None
    prefix: str = "memoryd"
    cluster: bool = False
    wait_replicas: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a store name must be a non-empty str, not {self.name!r}")
        for field, low in (
            ("map_size", 1 << 16),
            ("max_message_bytes", 1),
            ("max_batch", 1),
            ("wait_replicas", 0),
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{field} must be an int >= {low}, not {value!r}")
        if isinstance(self.max_map_size, bool) or not isinstance(self.max_map_size, int):
            raise ValueError(f"max_map_size must be an int, not {self.max_map_size!r}")
        if self.max_map_size < self.map_size:
            raise ValueError(
                f"max_map_size ({self.max_map_size}) must be >= map_size ({self.map_size})"
            )
        linger = self.max_linger_s
        if isinstance(linger, bool) or not isinstance(linger, int | float) or not 0 <= linger <= 1:
            raise ValueError(f"max_linger_s must be a number of seconds in [0, 1], not {linger!r}")
        timeout = self.call_timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(f"call_timeout_s must be a number > 0, not {timeout!r}")

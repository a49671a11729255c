"""LmdbConfig: how to open one LMDB-backed store (durable or ephemeral), as one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memoryd.store.config import StoreConfig, check_int

__all__ = ["DEFAULT_MAP_SIZE", "DEFAULT_MAX_MAP_SIZE", "LmdbConfig"]

DEFAULT_MAP_SIZE = 1 << 33
"""8 GiB of address space reserved up front; the file only grows as data is written."""

DEFAULT_MAX_MAP_SIZE = 1 << 44
"""16 TiB: the map never grows past this unless a store sets a smaller ``max_map_size``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LmdbConfig(StoreConfig):
    """How to open one LMDB environment (the common fields are `StoreConfig`'s).

    Attributes:
        path: the data directory.
        durable: fsync every commit before acknowledging it.
        map_size: initial LMDB map size in bytes (grows by itself when full).
        max_map_size: the map never grows past this many bytes; a write that
            needs more is refused with ``StorageError`` (reads keep working).
        delete_on_stop: remove ``path`` once the store is stopped for good.

    Raises:
        ValueError: a field is out of range (the message names it).
    """

    path: Path
    durable: bool = True
    map_size: int = DEFAULT_MAP_SIZE
    max_map_size: int = DEFAULT_MAX_MAP_SIZE
    delete_on_stop: bool = False

    def __post_init__(self) -> None:
        super(LmdbConfig, self).__post_init__()
        if not isinstance(self.path, Path):
            raise ValueError(f"path must be a pathlib.Path, not {self.path!r}")
        check_int(self.map_size, "map_size", 1 << 16)
        if isinstance(self.max_map_size, bool) or not isinstance(self.max_map_size, int):
            raise ValueError(f"max_map_size must be an int, not {self.max_map_size!r}")
        if self.max_map_size < self.map_size:
            raise ValueError(
                f"max_map_size ({self.max_map_size}) must be >= map_size ({self.map_size})"
            )

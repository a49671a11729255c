"""A small thread-safe LRU mapping (the per-conversation snapshots and recalls)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["Lru"]


class Lru:
    """A small thread-safe LRU mapping (the per-conversation snapshots and recalls)."""

    def __init__(self, size: int) -> None:
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

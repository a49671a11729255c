"""Whether a Redis still holds what a store saw there: the store's marker.

A Redis restarted without its data (no AOF or RDB on its disk, another data
directory), emptied by someone's ``FLUSHALL``, or replaced by another server on the
same address answers every read as if the store were new: each conversation at
version 0. Nothing in a reply tells that apart from a store never written, so a store
puts a marker in Redis: a random id in its change feed's state hash (``{P}:fed``,
field ``id``; hex conversation ids never spell ``id``), written once by the first
store that finds none. Every process remembers the marker it saw for a URL and
prefix (`MARKERS`, also across restarts of the store's actor), and checks it again
after every new connection and lost connection (a restarted or failed-over server),
and when a write finds a conversation at a lower version than it last wrote (data
lost without a reconnect: a ``FLUSHALL``). A marker gone or changed means the data
this process saw there is gone: the store logs ``redis_data_lost`` (an error) and
counts it in ``stats()["data_lost"]``, then adopts the marker it finds and keeps
serving, as a default store recreated empty is reported (`RELIABILITY.md` §14).

What it cannot see: a process whose first contact is with a Redis already emptied
(it never saw the data); on a Cluster, a node other than the one holding ``{P}``
restarted empty is told only by the conversations this process wrote there going back.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

import redis
import structlog

from memoryd.store.redis import scripts as lua

__all__ = ["FIELD", "MARKERS", "Marker", "Markers"]

log = structlog.get_logger(__name__)

FIELD = "id"
"""The marker's field in the change feed's state hash."""


@dataclass(slots=True)
class Marker:
    """What this process knows of one store's marker."""

    value: bytes | None = None
    """The marker last seen (None: not seen yet)."""
    lost: int = 0
    """How often the data this process saw was found gone."""
    checking: threading.Lock = field(default_factory=threading.Lock)
    """Held by one check of this store's marker at a time, across its round trips: the
    checks of one store are ordered, and other stores' never wait for them."""


class Markers:
    """The markers this process saw, by (URL, prefix) (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], Marker] = {}

    def lost(self, url: str, prefix: str) -> int:
        """How often the store at ``url`` and ``prefix`` was found to have lost its data.
        Read by every batch: no lock (one dict read and one int read, each atomic)."""
        marker = self._known.get((url, prefix))
        return 0 if marker is None else marker.lost

    def check(self, client: Any, *, url: str, prefix: str, write: bool) -> bool:
        """Read the store's marker through ``client`` and compare it with the one this
        process saw; log ``redis_data_lost`` and count it when it is gone or changed.

        Args:
            client: a redis-py client on the server (or Cluster) holding the store.
            url: the store's URL (its password is never logged).
            prefix: the store's key prefix.
            write: write a marker where there is none (readers only compare).

        Returns:
            True when the server holds a marker now, which this process adopted.

        Raises:
            redis.RedisError: the server could not be asked.
        """
        state = lua.feed_keys(prefix)[1]
        with self._lock:  # only to find the store's entry: no round trip under it
            marker = self._known.setdefault((url, prefix), Marker())
        with marker.checking:  # this store's checks in turn; a slow Redis holds up no other
            found = client.hget(state, FIELD)
            if found is None and write:
                try:
                    client.hsetnx(state, FIELD, secrets.token_hex(16))  # the first one wins
                except redis.ResponseError as exc:  # at maxmemory: written next time
                    log.debug("redis_marker_not_written", error=repr(exc))
                else:
                    found = client.hget(state, FIELD)
            seen = marker.value
            if found is not None or seen is not None:
                marker.value = found
            lost = seen is not None and seen != found
            if lost:
                marker.lost += 1
        if lost:
            log.error(
                "redis_data_lost",
                url=lua.redact(url),
                prefix=prefix,
                hint=(
                    "Redis no longer holds the data this process saw there: it restarted "
                    "without its AOF/RDB, was flushed (FLUSHALL/FLUSHDB) or is another "
                    "server; every conversation written before is gone. Restore Redis from "
                    "a backup if that data matters"
                ),
            )
        return found is not None

    def went_back(self, url: str, prefix: str, cid: str, had: int, now: int) -> None:
        """Report a conversation found at a lower version than this process wrote
        (its data is gone, though the store's marker is still there)."""
        with self._lock:
            self._known.setdefault((url, prefix), Marker()).lost += 1
        log.error(
            "redis_data_lost",
            url=lua.redact(url),
            prefix=prefix,
            conversation=cid,
            had_version=had,
            now_version=now,
            hint=(
                "Redis holds this conversation at an older version than this process "
                "wrote: its later writes are gone (a node restarted without its data, or "
                "restored from an older backup)"
            ),
        )


MARKERS = Markers()
"""This process's markers."""

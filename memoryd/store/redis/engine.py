"""RedisEngine: one store on Redis, its reads and its batch writer, over its connections.

The engine is created and closed by its store actor; any thread may read through
it (the reads borrow pooled connections from its `Connections`). Writes come from
the actor only, as batches (group commit): every write of a batch is planned from
the actor's view of its conversation (`plan`) and sent as one `scripts.WRITE` call
(an import: one `scripts.IMPORT`), all in one pipeline (`batch`). A write whose
view was out of date (another daemon wrote meanwhile) is planned again and resent;
nothing it sent was written. Every write carries a fresh token the script
remembers, so a pipeline resent after a lost connection cannot write anything twice
(an import is recognised by its events, all stored then).

The engine sits on top of the backend's modules: it owns a `Connections`, a
`WriterState` and the commit `Counters` and hands each batch what it uses; none of
those modules knows the engine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

from memoryd import codec
from memoryd.errors import CorruptRecord, EngineClosed
from memoryd.events import Change, Event, EventKind, walk_back
from memoryd.store.redis import scripts as lua
from memoryd.store.redis.batch import Batch, Counters
from memoryd.store.redis.connections import Connections
from memoryd.store.redis.plan import Reads, WriterState
from memoryd.store.redis.scripts import redact
from memoryd.store.requests import WriteRequest
from memoryd.store.systems import with_system

__all__ = ["RedisEngine"]

OUT_OF_MEMORY_HINT_S = 1.0
"""How long a refusal at Redis's ``maxmemory`` makes `RedisEngine.refuses_writes` say
yes without asking Redis again: calls in that second stop before their tool steps, and
the first write after it finds out whether memory was freed."""

T = TypeVar("T")

_POPPED = EventKind.POPPED.value


def text(value: Any) -> str:
    """A Redis reply word as str (bytes are UTF-8)."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def decode_event(raw: Any, where: str) -> Event:
    """The event encoded in ``raw``, read from ``where``.

    Raises:
        CorruptRecord: ``raw`` is no encoded event.
    """
    if not isinstance(raw, bytes | bytearray):
        raise CorruptRecord(f"{where} holds no encoded event")
    return codec.unpack_event(raw)


def decode_messages(raw: Any, where: str) -> list[dict[str, Any]]:
    """The messages of an encoded event (all a history read needs of it).

    Raises:
        CorruptRecord: ``raw`` is no encoded event.
    """
    if not isinstance(raw, bytes | bytearray):
        raise CorruptRecord(f"{where} holds no encoded event")
    return codec.unpack_kind_and_messages(raw)[1]


class RedisEngine:
    """A store's engine on Redis (single server or Cluster).

    Args:
        url: a ``redis://``, ``rediss://`` or ``unix://`` URL.
        prefix: the key prefix (checked by `scripts.check_prefix`).
        cluster: talk to a Redis Cluster (redis-py ``RedisCluster``).
        call_timeout_s: socket timeout, and how long a batch is retried while
            Redis is unreachable.
        wait_replicas: after each batch, ``WAIT`` for this many replica acknowledgements.
        require_durable: refuse to write to a server that does not fsync every write
            (see `durability`).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str,
        cluster: bool,
        call_timeout_s: float,
        wait_replicas: int = 0,
        require_durable: bool = True,
    ) -> None:
        self.prefix = lua.check_prefix(prefix)
        self.feed_stream, self.feed_state = lua.feed_keys(self.prefix)
        self.connections = Connections(
            url,
            cluster=cluster,
            call_timeout_s=call_timeout_s,
            wait_replicas=wait_replicas,
            require_durable=require_durable,
            prefix=self.prefix,
        )
        """The pooled client readers borrow and the batch writer's own connections."""
        self.writer = WriterState(self.prefix, cluster=cluster)
        """The batch writer's views, script keys and tokens (the owner's thread only)."""
        self.counters = Counters()
        self.held_batches = 0
        """Batches the group-commit policy held back for expected writers (actor's count)."""
        self._reads = Reads(history=self.history, import_state=self.import_state)

    @property
    def closed(self) -> bool:
        """True once `close` was called: every later call raises `EngineClosed`."""
        return self.connections.closed

    def client(self) -> Any:
        """The redis-py client (see `Connections.client`).

        Raises:
            EngineClosed: the engine was closed.
        """
        return self.connections.client()

    def close(self) -> None:
        """Close the connections; later calls raise `EngineClosed`. Owner's thread."""
        self.connections.close()

    # -- reads (any thread) --------------------------------------------------------------

    def _history_raw(
        self, cid: str, at_version: int | None, limit: int | None
    ) -> tuple[int, int, list[tuple[str, list[dict[str, Any]] | None]]]:
        keys = lua.conv_keys(self.prefix, cid)
        args = ["" if at_version is None else at_version, -1 if limit is None else limit]
        raw = self.client().eval(lua.HISTORY, 1, keys.stream, *args, "0")
        return int(raw[0]), int(raw[1]), self._pairs(cid, raw)

    def history(
        self, cid: str, limit: int | None, at_version: int | None
    ) -> tuple[int, list[dict[str, Any]]]:
        """The conversation's version and history (at ``at_version``), last ``limit`` messages.

        Raises:
            ValueError: ``at_version`` is past the end or before the last clear.
        """
        if self.closed:
            raise EngineClosed(self.connections.url)
        current, first, pairs = self._history_raw(cid, at_version, limit)
        if at_version is not None:
            if at_version > current:
                raise ValueError(
                    f"at_version={at_version} is past the end of {cid!r}, "
                    f"which is at version {current}"
                )
            if 0 < at_version < first:
                raise ValueError(
                    f"version {at_version} of {cid!r} was cleared at version {first}; "
                    "history before a clear is deleted"
                )
        return current, walk_back(pairs, limit)

    def history_with_system(self, cid: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` messages after every system message before them.

        One `scripts.HISTORY` call reads the tail and the conversation's system index
        (one snapshot). A conversation without a complete index (written before there
        was one) is read whole by a second call, until its next write fills the index.
        """
        if self.closed:
            raise EngineClosed(self.connections.url)
        keys = lua.conv_keys(self.prefix, cid)
        index = lua.system_key(self.prefix, cid)
        raw = self.client().eval(lua.HISTORY, 3, keys.stream, keys.meta, index, "", limit, "1")
        if len(raw) == 2:
            return []  # never written
        block = raw[-1]
        if not isinstance(block, list):
            full = self.client().eval(lua.HISTORY, 3, keys.stream, keys.meta, index, "", -1, "0")
            return with_system(walk_back(self._pairs(cid, full), None), limit)
        tail = walk_back(self._pairs(cid, raw[:-1]), limit)
        below = int(block[0]) - len(tail)
        head: list[dict[str, Any]] = []
        for member in block[1]:
            ordinal, message = codec.unpack_value(member)
            if ordinal < below:
                head.append(message)
        return head + tail

    def _pairs(self, cid: str, raw: Sequence[Any]) -> list[tuple[str, list[dict[str, Any]] | None]]:
        pairs: list[tuple[str, list[dict[str, Any]] | None]] = []
        for i in range(2, len(raw), 2):
            kind = text(raw[i])
            messages = None if kind == _POPPED else decode_messages(raw[i + 1], f"{cid!r}")
            pairs.append((kind, messages))
        return pairs

    def import_state(self, cid: str, low: int, high: int) -> tuple[int, int, int, dict[int, Event]]:
        """What an import of versions ``low`` to ``high`` is planned from, read atomically.

        Returns:
            The conversation's version, first live version and message count, and its
            stored events from ``low`` up to ``high`` and the version, by version.
        """
        keys = lua.conv_keys(self.prefix, cid)
        raw = self.connections.call(
            lambda c: c.eval(lua.IMPORT_STATE, 2, keys.stream, keys.meta, low, high)
        )
        stored = (decode_event(record, f"{cid!r}") for record in raw[3:])
        return int(raw[0]), int(raw[1]), int(raw[2]), {e.version: e for e in stored}

    def version(self, cid: str) -> int:
        """The conversation's version (0 if never written)."""
        meta = lua.conv_keys(self.prefix, cid).meta
        raw = self.connections.call(lambda c: c.hget(meta, "v"))
        return 0 if raw is None else int(raw)

    def events(self, cid: str, after: int, limit: int | None = None) -> list[Event]:
        """The conversation's stored events above version ``after``, oldest first: at
        most ``limit`` of them (None: all)."""
        if limit == 0:
            return []
        stream = lua.conv_keys(self.prefix, cid).stream
        entries = self.connections.call(
            lambda c: c.xrange(stream, f"{after + 1}-0", "+", count=limit)
        )
        return [decode_event(fields.get(b"e"), f"{cid!r}") for _, fields in entries]

    def _meta_keys(self, cid_prefix: str) -> list[str]:
        pattern = lua.scan_pattern(self.prefix, cid_prefix)
        return [
            text(key)
            for key in self.connections.call(lambda c: list(c.scan_iter(match=pattern, count=1000)))
        ]

    def conversations(
        self, prefix: str, after: str | None, limit: int | None, include_empty: bool = False
    ) -> list[str]:
        """Ids of conversations holding messages now, in UTF-8 byte order, paged.

        Scans every metadata key under the id prefix (SCAN on every primary of a
        Cluster), so a page costs a walk over the matching keys. With
        ``include_empty`` every conversation with an event is listed: a metadata
        hash exists from a conversation's first event on.
        """
        keys = self._meta_keys(prefix)
        counts: list[Any] = [1] * len(keys)
        if not include_empty:
            pipe = self.connections.pipeline()
            for key in keys:
                pipe.hget(key, "n")
            counts = pipe.execute()
        floor = None if after is None else after.encode("utf-8")
        found: list[bytes] = []
        for key, count in zip(keys, counts, strict=True):
            cid = lua.cid_of_hex(key)
            if cid is None or count is None or int(count) <= 0:
                continue
            raw = cid.encode("utf-8")
            if floor is None or raw > floor:
                found.append(raw)
        found.sort()
        if limit is not None:
            found = found[:limit]
        return [raw.decode("utf-8") for raw in found]

    def tail(self, after: int, limit: int, block_s: float) -> tuple[int, list[Change]]:
        """Changes above position ``after`` (deleted ones skipped), up to ``limit``.

        Args:
            after: the last position the caller saw.
            limit: the most changes to return.
            block_s: when nothing is new, wait this long for a change (0: do not wait).

        Returns:
            The last feed position read (to continue from) and the changes.
        """
        out: list[Change] = []
        seen = after
        while len(out) < limit:
            want = limit - len(out)
            if block_s > 0 and not out:
                millis = max(1, int(block_s * 1000))
                streams = {self.feed_stream: f"{seen}-0"}
                reply = self.connections.call(
                    partial(_xread, streams=streams, count=want, block=millis)
                )
                entries = reply[0][1] if reply else []
                block_s = 0.0
            else:
                entries = self.connections.call(
                    partial(_xrange, name=self.feed_stream, low=f"{seen + 1}-0", count=want)
                )
            if not entries:
                break
            pipe = self.connections.pipeline()
            refs: list[tuple[int, str, int]] = []
            for entry_id, fields in entries:
                position = int(text(entry_id).split("-", 1)[0])
                cid = bytes.fromhex(text(fields[b"c"])).decode("utf-8")
                version = int(fields[b"v"])
                refs.append((position, cid, version))
                stream = lua.conv_keys(self.prefix, cid).stream
                pipe.xrange(stream, f"{version}-0", f"{version}-0")
            for (position, cid, _), found in zip(refs, pipe.execute(), strict=True):
                seen = position
                if found:  # else deleted by a later clear
                    event = decode_event(found[0][1].get(b"e"), f"{cid!r}")
                    out.append(Change.from_event(event, position=position, conversation_id=cid))
            if len(entries) < want:
                break
        return seen, out

    def refuses_writes(self) -> bool:
        """True for `OUT_OF_MEMORY_HINT_S` after Redis refused a write at its
        ``maxmemory``, unless a write went through since: a hint read without a round
        trip (`StoreHandle.refuses_writes`), so an agent run stops before a tool step
        whose result could not be recorded. Past that time a write asks Redis again."""
        at = self.counters.out_of_memory_at
        return at is not None and time.monotonic() - at < OUT_OF_MEMORY_HINT_S

    def stats(self) -> dict[str, Any]:
        """Counts: conversations holding messages, ever written, stored events, last
        position, and ``data_lost``: how often this process found the store's data gone
        from Redis (see `identity`)."""
        keys = self._meta_keys("")
        pipe = self.connections.pipeline()
        for key in keys:
            pipe.hget(key, "n")
            pipe.xlen(key[:-1] + "s")
        values = pipe.execute()
        counts, lengths = values[0::2], values[1::2]
        last = self.connections.call(lambda c: c.hget(self.feed_state, "#"))
        return {
            "url": redact(self.connections.url),
            "prefix": self.prefix,
            "cluster": self.connections.cluster,
            "wait_replicas": self.connections.wait_replicas,
            "conversations": sum(1 for n in counts if n is not None and int(n) > 0),
            "conversations_ever": len(keys),
            "events": sum(int(n) for n in lengths),
            "last_position": 0 if last is None else int(last),
            "commits": self.counters.commits,
            "held_batches": self.held_batches,
            "appends": self.counters.writes,
            "reconnects": self.connections.reconnects,
            "data_lost": self.connections.data_lost,
        }

    # -- writes (the owner's thread) -----------------------------------------------------

    def write_batch(self, requests: Sequence[WriteRequest], now: float) -> list[tuple[bool, Any]]:
        """Commit a batch of writes; returns ``(ok, value or exception)`` per request.

        See `batch.Batch`. Runs in the owning actor's thread.

        Raises:
            redis.RedisError: anything but a lost connection (the actor crashes).
        """
        if self.closed:
            raise EngineClosed(self.connections.url)
        batch = Batch(
            requests,
            now,
            connections=self.connections,
            writer=self.writer,
            reads=self._reads,
            counters=self.counters,
        )
        return batch.commit()


def _xread(client: Any, *, streams: dict[str, str], count: int, block: int) -> Any:
    return client.xread(streams, count=count, block=block)


def _xrange(client: Any, *, name: str, low: str, count: int) -> Any:
    return client.xrange(name, low, "+", count=count)

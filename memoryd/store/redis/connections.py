"""A Redis store's connections: the pooled client readers borrow, and the batch writer's own.

`Connections` makes the redis-py client (``Redis`` or ``RedisCluster``) from the
store's URL on first use and closes it; readers borrow pooled connections through it
(`Connections.call`, `Connections.pipeline`). The batch writer does not: it has one
connection per primary of its own (`Writers`), made from that node's pool settings
but never lent to readers, so a batch skips the pool's checkout (a lock and a
readiness poll per use).

redis-py's pipelines are general-purpose (a command stack, response callbacks, retries,
observability hooks), and a Cluster pipeline picks the connection of every command
itself. A batch of write scripts needs less and one thing more: ``WAIT`` counts the
replicas that acknowledged the writes *of the connection it is sent on*, so it must
follow a node's writes on that very connection. So `Connections.send` groups a batch's
scripts by the primary that holds their keys (one group on a single server), ends each
group with ``WAIT`` when the store waits for replicas, and `exchange` writes every
group to its connection before reading any reply (the primaries run and ``WAIT`` in
parallel), then reads every reply, so no connection is left with a reply unread.

This module is the only one of the Redis backend that reaches into redis-py's
connection internals (a pool's ``make_connection``, a connection's
``send_packed_command`` and ``read_response``, a Cluster client's node lookup and
``nodes_manager``); `SUPPORTED_REDIS_MAJORS` names the redis-py major versions they
are known to work with, and ``setup.cfg`` pins the same range.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
import redis.cluster
import structlog
from redis.backoff import NoBackoff
from redis.retry import Retry

from memoryd._outage import Outage
from memoryd.errors import EngineClosed, StorageError
from memoryd.store.redis import durability
from memoryd.store.redis import scripts as lua
from memoryd.store.redis.identity import MARKERS

__all__ = [
    "CONNECTION_ERRORS",
    "SUPPORTED_REDIS_MAJORS",
    "Connections",
    "Group",
    "Writers",
    "check_durable",
    "detect_cluster",
    "encode",
    "exchange",
    "node_client",
]

log = structlog.get_logger(__name__)

T = TypeVar("T")

SUPPORTED_REDIS_MAJORS: tuple[int, ...] = (5, 6, 7, 8)
"""The redis-py major versions whose connection internals this module uses as it does."""

CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)
"""The errors that mean "Redis is not reachable now", not "the request is wrong"."""

Group = tuple[Any, Sequence[Sequence[Any]]]
"""A connection to one node and the commands to send it, in order."""


class Writers:
    """The batch writer's own connections, one per node; owned by one thread.

    A connection is made (not connected) on first use from the node's pool, connects
    when it first sends, and after a failure reconnects on its next send.
    """

    def __init__(self) -> None:
        self._conns: dict[str, Any] = {}

    def get(self, name: str, client: Any) -> Any:
        """The connection to node ``name`` (made from ``client``'s pool settings)."""
        conn = self._conns.get(name)
        if conn is None:
            conn = self._conns[name] = client.connection_pool.make_connection()
        return conn

    def close(self) -> None:
        """Close every connection (later uses make new ones)."""
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            conn.disconnect()


class Connections:
    """One store's connections to Redis (a single server or a Cluster).

    Any thread may read through `client`, `call` and `pipeline` (redis-py clients are
    thread-safe, each call borrows a pooled connection); `send`, `lost` and
    `refresh_topology` belong to the batch writer's thread.

    Args:
        url: a ``redis://``, ``rediss://`` or ``unix://`` URL.
        cluster: talk to a Redis Cluster (redis-py ``RedisCluster``).
        call_timeout_s: the socket timeout (connecting: at most 2 s).
        wait_replicas: end each primary's writes with ``WAIT`` for this many replicas.
        require_durable: refuse to write to a node that does not fsync every write
            (see `durability`); checked on a node's first use and after every lost
            connection or emptied script cache (it may be another server now).
        prefix: the store's key prefix (its marker, see `identity`, is checked after
            every new or lost connection: a server restarted empty is reported).
    """

    def __init__(
        self,
        url: str,
        *,
        cluster: bool,
        call_timeout_s: float,
        wait_replicas: int = 0,
        require_durable: bool = True,
        prefix: str = "memoryd",
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.marker_checked = False
        """The store's marker was checked since the last new or lost connection."""
        self._marker_present = False
        self.cluster = cluster
        self.call_timeout_s = call_timeout_s
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, int(call_timeout_s * 500))
        """How long ``WAIT`` waits for the replicas: half the call timeout."""
        self.closed = False
        self.reconnects = 0
        """How often the batch writer found Redis unreachable and tried again."""
        self._writers = Writers()
        self._outage = Outage("redis_unreachable", "redis_still_unreachable")
        self.require_durable = require_durable
        self._loaded: set[str] = set()
        """Nodes known to hold the write script (EVALSHA; loaded again on NOSCRIPT)."""
        self._checked: set[str] = set()
        """Nodes whose persistence was checked since the last lost connection."""
        self._lock = threading.Lock()
        self._client: Any = None

    # -- the pooled client (any thread) ---------------------------------------------------

    def client(self) -> Any:
        """The redis-py client, created on first use (so a restart needs no connection).

        Raises:
            EngineClosed: the connections were closed.
        """
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self.closed:
                raise EngineClosed(self.url)
            if self._client is None:
                options: dict[str, Any] = {
                    "socket_timeout": self.call_timeout_s,
                    "socket_connect_timeout": min(self.call_timeout_s, 2.0),
                }
                if self.cluster:
                    self._client = redis.cluster.RedisCluster.from_url(self.url, **options)
                else:
                    self._client = redis.Redis.from_url(
                        self.url,
                        retry=Retry(NoBackoff(), 0),
                        redis_connect_func=self._connected,
                        **options,
                    )
            return self._client

    def _connected(self, conn: Any) -> None:
        """redis-py's hook on every new connection (a first one, or one made again
        after the server went away, perhaps restarted without its data)."""
        conn.on_connect()
        self.marker_checked = False
        self._checked.clear()  # the writer checks durability, then the marker, again

    def check_marker(self, *, write: bool) -> None:
        """Check the store's marker if a connection was made or lost since the last
        check (see `identity`); a lost marker is logged and counted there.

        Args:
            write: write a marker where there is none (the batch writer, once the
                server passed its durability check); readers only compare.

        Raises:
            redis.RedisError: the server could not be asked.
        """
        if self.closed or (self.marker_checked and (self._marker_present or not write)):
            return
        self._marker_present = MARKERS.check(
            self.client(), url=self.url, prefix=self.prefix, write=write
        )
        self.marker_checked = True

    def suspect(self) -> bool:
        """Check the marker now (a write found a conversation at a lower version than
        this process wrote). Returns True when the store's data was found lost."""
        self.marker_checked = False
        before = MARKERS.lost(self.url, self.prefix)
        try:
            self.check_marker(write=True)
        except CONNECTION_ERRORS:
            return False  # checked again at the next send
        return MARKERS.lost(self.url, self.prefix) > before

    @property
    def data_lost(self) -> int:
        """How often this process found the store's data gone from Redis."""
        return MARKERS.lost(self.url, self.prefix)

    def call(self, fn: Callable[[Any], T]) -> T:
        """``fn(client)``, unless the connections are closed.

        Raises:
            EngineClosed: the connections were closed.
        """
        if self.closed:
            raise EngineClosed(self.url)
        return fn(self.client())

    def pipeline(self) -> Any:
        """A non-transactional pipeline on the pooled client."""
        return self.client().pipeline(transaction=False)

    def close(self) -> None:
        """Close the pool and the writer's connections; later calls raise `EngineClosed`."""
        with self._lock:
            self.closed = True
            client, self._client = self._client, None
        self._writers.close()
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing a dead connection is not an error
                log.debug("redis_close_failed", error=repr(exc))

    # -- lost connections (the batch writer's thread) -------------------------------------

    def lost(self, exc: Exception) -> None:
        """Count a lost connection (one of `CONNECTION_ERRORS`) before a resend; the log
        hears of the outage once, then at most every few seconds (`Outage`)."""
        self.reconnects += 1
        self._checked.clear()
        self.marker_checked = False
        event = self._outage.lost(time.monotonic())
        if event is not None:
            log.warning(event, url=lua.redact(self.url), error=repr(exc), retrying=True)

    def reached(self) -> None:
        """A send went through: log the end of an outage, if one was going on."""
        ended = self._outage.reached(time.monotonic())
        if ended is not None:
            down_s, tries = ended
            log.info(
                "redis_reachable_again",
                url=lua.redact(self.url),
                down_s=round(down_s, 3),
                tries=tries,
            )

    def refresh_topology(self) -> None:
        """Ask a Cluster where its slots are now (after a lost node or a failover)."""
        if not self.cluster or self._client is None:
            return
        try:
            self._client.nodes_manager.initialize()
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            log.debug("redis_topology_refresh_failed", error=repr(exc))

    # -- a batch's scripts on the wire (the batch writer's thread) ------------------------

    def send(self, commands: Sequence[tuple[Any, ...]]) -> tuple[list[Any], dict[int, int]]:
        """Send a batch's write scripts, grouped by primary, each group followed by
        ``WAIT`` when the store waits for replicas.

        Args:
            commands: one ``EVALSHA`` of `scripts.WRITE` (or ``EVAL`` of ``IMPORT``)
                per write; its first key (the 4th word) tells the primary.

        Returns:
            The reply to each command (an error reply as its exception), and for each
            command whose primary's replicas came short, how many acknowledged.
            The reply of a command bound for a node that is not durable (with
            ``require_durable``) is the `StorageError` saying so: it was not sent.

        Raises:
            EngineClosed: the connections were closed.
            redis.ConnectionError: see `exchange`.
            redis.ResponseError: a node refused ``WAIT``.
        """
        client = self.client()
        groups: dict[str, tuple[Any, list[int]]] = {}
        if self.cluster:
            for i, command in enumerate(commands):
                name, node = node_client(client, command[3])
                groups.setdefault(name, (node, []))[1].append(i)
        else:
            groups[""] = (client, list(range(len(commands))))
        wire: list[Group] = []
        replies: list[Any] = [None] * len(commands)
        for name, (node, members) in list(groups.items()):
            if name not in self._checked:
                refusal = durability.check(node, url=self.url, require=self.require_durable)
                if refusal is not None:
                    del groups[name]
                    for i in members:
                        replies[i] = refusal
                    continue
                self._checked.add(name)
            # After a durability check (nothing is written to a server refused); a node
            # that cannot be asked now is asked at the next send, and a Cluster's other
            # nodes still take their writes meanwhile.
            with contextlib.suppress(*CONNECTION_ERRORS):
                self.check_marker(write=True)
            if name not in self._loaded:  # first use of the node: no NOSCRIPT round
                node.script_load(lua.WRITE)
                self._loaded.add(name)
            group = [commands[i] for i in members]
            if self.wait_replicas:
                group.append(("WAIT", self.wait_replicas, self.wait_timeout_ms))
            wire.append((self._writers.get(name, node), group))
        short: dict[int, int] = {}
        for (node, members), got in zip(groups.values(), exchange(wire), strict=True):
            if self.wait_replicas:
                acked = got.pop()
                if isinstance(acked, Exception):
                    raise acked
                if int(acked) < self.wait_replicas:
                    short.update((i, int(acked)) for i in members)
            refused = False
            for i, reply in zip(members, got, strict=True):
                replies[i] = reply
                refused = refused or isinstance(reply, Exception)
            if refused:
                self._prepare_resend(node, got)
        return replies, short

    def _prepare_resend(self, node: Any, replies: list[Any]) -> None:
        """Make a node's refused scripts sendable again (the batch writer resends them)."""
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            self._checked.clear()  # a restarted node: perhaps not as it was configured
            self.marker_checked = False  # ... or without its data
            node.script_load(lua.WRITE)  # a restarted or flushed node: load, send again
        if any(isinstance(r, redis.exceptions.MovedError) for r in replies):
            self.refresh_topology()  # the slot moved: learn where to


def encode(commands: Sequence[Sequence[Any]]) -> bytes:
    """Commands as RESP arrays of bulk strings, ready to send in one write.

    redis-py's serializer handles every kind of value, one call per word; a write
    script has two dozen words, all bytes, str or int, so this does it in one pass.

    Raises:
        TypeError: a word that is not bytes, str or int (or is a bool).
    """
    out: list[bytes] = []
    for words in commands:
        out.append(b"*%d\r\n" % len(words))
        for word in words:
            if isinstance(word, bytes):
                data = word
            elif isinstance(word, str):
                data = word.encode("utf-8")
            elif isinstance(word, int) and not isinstance(word, bool):
                data = b"%d" % word
            else:
                raise TypeError(f"a Redis command word must be bytes, str or int, not {word!r}")
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def exchange(groups: Sequence[Group]) -> list[list[Any]]:
    """Send each group's commands on its connection, then read every reply.

    Args:
        groups: ``(connection, commands)`` per node; a command is its words,
            e.g. ``("EVALSHA", sha, 1, key, arg)``.

    Returns:
        The replies of each group, in order; an error reply is returned as its
        ``redis.ResponseError`` (``NoScriptError``, ``MovedError``, ...), not raised.

    Raises:
        redis.ConnectionError: a connection failed (it is closed, as is every
            connection of the exchange not read to the end).
        redis.TimeoutError: a node did not answer within the socket timeout.
    """
    finished = 0
    try:
        for conn, commands in groups:
            conn.send_packed_command([encode(commands)], check_health=False)
        out: list[list[Any]] = []
        for conn, commands in groups:
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as exc:  # the reply was read: still in step
                    replies.append(exc)
            out.append(replies)
            finished += 1
        return out
    finally:
        for conn, _ in groups[finished:]:  # replies may be left on it: start afresh
            conn.disconnect()


def node_client(client: Any, key: str) -> tuple[str, Any]:
    """The name and ``redis.Redis`` client of the primary holding ``key`` (Cluster).

    Raises:
        redis.exceptions.SlotNotCoveredError: the client knows no node for the slot.
    """
    node = client.get_node_from_key(key)
    return str(node.name), client.get_redis_connection(node)


def _one_server(url: str, timeout_s: float) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=min(timeout_s, 2.0),
        retry=Retry(NoBackoff(), 0),
    )


def detect_cluster(url: str, timeout_s: float) -> bool:
    """True if the server at ``url`` runs in cluster mode (``INFO cluster``).

    Raises:
        redis.RedisError: the server cannot be reached or refused the command.
    """
    client = _one_server(url, timeout_s)
    try:
        info = client.info("cluster")
    finally:
        client.close()
    return bool(int(info.get("cluster_enabled", 0)))


def check_durable(url: str, timeout_s: float, *, require: bool) -> StorageError | None:
    """`durability.check` of the server at ``url`` (for a Cluster: that node).

    Raises:
        redis.RedisError: the server cannot be reached or refused the command.
    """
    client = _one_server(url, timeout_s)
    try:
        return durability.check(client, url=url, require=require)
    finally:
        client.close()

"""One batch's write scripts on the wire: one connection per primary, all sent, then read.

redis-py's pipelines are general-purpose (a command stack, response callbacks, retries,
observability hooks), and a Cluster pipeline picks the connection of every command
itself. A batch of write scripts needs less and one thing more: ``WAIT`` counts the
replicas that acknowledged the writes *of the connection it is sent on*, so it must
follow a node's writes on that very connection. So `send` groups a batch's scripts by
the primary that holds their keys (one group on a single server), ends each group
with ``WAIT`` when the store waits for replicas, and `exchange` writes every group to
its connection before reading any reply (the primaries run and ``WAIT`` in parallel),
then reads every reply, so no connection is left with a reply unread.

The connections are the batch writer's own (`Writers`): one per primary, made from
that node's pool settings but never lent to readers, so a batch skips the pool's
checkout (a lock and a readiness poll per use).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from memoryd.store.redis import scripts as lua

if TYPE_CHECKING:
    from memoryd.store.redis.engine import RedisEngine

__all__ = ["Group", "Writers", "encode", "exchange", "node_client", "send"]

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


def send(
    engine: RedisEngine, commands: Sequence[tuple[Any, ...]]
) -> tuple[list[Any], dict[int, int]]:
    """Send a batch's write scripts, grouped by primary, each group followed by ``WAIT``
    when the engine waits for replicas. Runs in the engine owner's thread.

    Args:
        engine: the store's engine (its client, own connections and ``wait_replicas``).
        commands: one ``EVALSHA`` of `redis_scripts.WRITE` (or ``EVAL`` of
            ``IMPORT``) per write; its first key (the 4th word) tells the primary.

    Returns:
        The reply to each command (an error reply as its exception), and for each
        command whose primary's replicas came short, how many acknowledged.

    Raises:
        redis.ConnectionError: see `exchange`.
        redis.ResponseError: a node refused ``WAIT``.
    """
    client = engine.client()
    groups: dict[str, tuple[Any, list[int]]] = {}
    if engine.cluster:
        for i, command in enumerate(commands):
            name, node = node_client(client, command[3])
            groups.setdefault(name, (node, []))[1].append(i)
    else:
        groups[""] = (client, list(range(len(commands))))
    wire: list[Group] = []
    for name, (node, members) in groups.items():
        if name not in engine.loaded:  # first use of the node: no NOSCRIPT round
            node.script_load(lua.WRITE)
            engine.loaded.add(name)
        group = [commands[i] for i in members]
        if engine.wait_replicas:
            group.append(("WAIT", engine.wait_replicas, engine.wait_timeout_ms))
        wire.append((engine.writers.get(name, node), group))
    replies: list[Any] = [None] * len(commands)
    short: dict[int, int] = {}
    for (node, members), got in zip(groups.values(), exchange(wire), strict=True):
        if engine.wait_replicas:
            acked = got.pop()
            if isinstance(acked, Exception):
                raise acked
            if int(acked) < engine.wait_replicas:
                short.update((i, int(acked)) for i in members)
        refused = False
        for i, reply in zip(members, got, strict=True):
            replies[i] = reply
            refused = refused or isinstance(reply, Exception)
        if refused:
            _prepare_resend(engine, node, got)
    return replies, short


def _prepare_resend(engine: RedisEngine, node: Any, replies: list[Any]) -> None:
    """Make a node's refused scripts sendable again (the batch writer resends them)."""
    if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
        node.script_load(lua.WRITE)  # a restarted or flushed node: load, send again
    if any(isinstance(r, redis.exceptions.MovedError) for r in replies):
        engine.refresh_topology()  # the slot moved: learn where to

"""The last-N read answered on the event loop, its messages copied as stored.

``GET .../messages?limit=N`` with ``Accept: application/msgpack`` (what every
`memoryd.connect` handle sends) is the daemon's busiest read. Its answer is the
stored messages, already msgpack-encoded in their event records: `packed_messages`
reads them from the store's memory map in one read-only LMDB transaction on the
loop (`memoryd.store.lmdb.reads.history_packed`: every record's checksum and
version checked, pops, clears and forks applied) and copies them into the body
without decoding them or encoding them again (`packed_parts` leaves the body in
parts, so the connection's fast lane copies them once, into the response).
Readers skip the store actor, as
DESIGN §4 allows; an environment that is closing or growing, a store that is not
running locally, a JSON client and any other parameter go the general way
(`memoryd.server.routes.get_messages`), which answers the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd import codec
from memoryd.errors import EngineBusy, EngineClosed
from memoryd.messages import validate_conversation_id
from memoryd.protocol import DEFAULT_STORE_NAME
from memoryd.store import lookup
from memoryd.store.handle import INLINE_READ_LIMIT
from memoryd.store.lmdb import reads
from memoryd.store.lmdb.engine import LmdbEngine

__all__ = ["last_n_limit", "packed_messages", "packed_parts", "wants_msgpack_only"]

_MSGPACK = b"application/msgpack"

_HEADS: dict[int, bytes] = {}
"""The head of an answer of each message count up to `INLINE_READ_LIMIT` (its map and
array headers), made once."""


def wants_msgpack_only(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """True when the request's ``Accept`` header asks for msgpack (as `wants_msgpack`)."""
    for name, value in headers:
        if name == b"accept":
            return _MSGPACK in value
    return False


def last_n_limit(query: bytes) -> int | None:
    """The ``limit`` of a query string that is exactly ``limit=<digits>`` within
    `INLINE_READ_LIMIT`, else None (the general way reads every other form)."""
    if not query.startswith(b"limit="):
        return None
    digits = query[6:]
    if not digits.isdigit() or len(digits) > 4:
        return None
    limit = int(digits)
    return limit if limit <= INLINE_READ_LIMIT else None


def packed_parts(
    store: str | None, cid: str, limit: int, *, checked: bool = False
) -> list[bytes] | None:
    """The msgpack body ``{"messages": [...]}`` of the last ``limit`` messages of ``cid``
    in the running local store ``store`` (None: the default store), as parts to join
    (the map's head, then the messages as stored), or None when the read must go the
    general way (not a local LMDB store, not running, closing, growing). ``checked``:
    ``cid`` is known valid (`validate_conversation_id` returned it).

    Raises:
        InvalidConversationId: ``cid`` is not a valid conversation id.
        CorruptRecord: a record the read needs is damaged or missing.
        StorageError: LMDB failed.
    """
    engine = lookup.engine(DEFAULT_STORE_NAME if store is None else store)
    if type(engine) is not LmdbEngine or engine.closed:
        return None
    if not checked:
        cid = validate_conversation_id(cid)
    try:
        count, chunks = engine.read(
            lambda txn, dbs: reads.last_packed(txn, dbs, cid, limit), wait=False
        )
    except (EngineClosed, EngineBusy):
        return None
    head = _HEADS.get(count)
    if head is None:
        head = _HEADS[count] = codec.pack_packed_array_map("messages", count, [])
    chunks.insert(0, head)
    return chunks


def packed_messages(store: str | None, cid: str, limit: int) -> bytes | None:
    """`packed_parts` joined: the whole body, or None (go the general way).

    Raises:
        InvalidConversationId: ``cid`` is not a valid conversation id.
        CorruptRecord: a record the read needs is damaged or missing.
        StorageError: LMDB failed.
    """
    parts = packed_parts(store, cid, limit)
    return None if parts is None else b"".join(parts)

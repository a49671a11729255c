"""The LMDB layout of a store: its sub-databases, a conversation's metadata, and the
counters a write batch advances (conversation numbers, change positions, live count).

Beside the five sub-databases of `keys`, ``sys`` holds store-wide counters and
``system`` each conversation's index of live system messages
(`memoryd.store.systems`): key conv BE8 + ordinal BE8, value the message (packed by
the codec), and the key conv BE8 alone (empty value) once the index is complete. A
conversation first written before the index existed has no such marker: its reads
fall back to one full read, and its next write fills the index.

memoryd's own bookkeeping conversations (ids in `memoryd.store.requests.HIDDEN_PREFIX`,
the run journals) numbered from the sys counter ``unlogged_from`` on are *unlogged*: their
events take no change-feed position, and clearing one erases it (events, index,
idempotency keys, metadata and name), so a finished run leaves nothing in the file. The
counter is set once, to the next conversation number, when a store is first opened by a
memoryd that knows it: hidden conversations numbered below it were written with
positions, and are cleared as any other.

Every value, in every sub-database (the index's entries and markers included), is
sealed (`memoryd.codec.seal`: a checksum of key and value) by `put` and checked by
`get`, so damaged bytes raise `CorruptRecord` instead of being read as content. Pure
functions of an open transaction, like the reads and writes beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import lmdb

from memoryd import codec
from memoryd.errors import CorruptRecord
from memoryd.store.lmdb import keys
from memoryd.store.requests import HIDDEN_PREFIX

__all__ = [
    "DAMAGED",
    "FORMAT",
    "IDENTITY",
    "LIVE",
    "SYSTEM_DB",
    "SYS_DB",
    "UNLOGGED_FROM",
    "Counters",
    "Dbs",
    "Meta",
    "counter",
    "get",
    "kept_conversations",
    "meta_of",
    "open_dbs",
    "put",
    "put_meta",
    "system_key",
    "unlogged",
]

SYS_DB = b"sys"
SYSTEM_DB = b"system"
"""Sub-database: conv BE8 + ordinal BE8 -> a live system message; conv BE8 -> b"" (indexed)."""
LIVE = b"live_conversations"
"""The sys key holding how many conversations hold messages."""
UNLOGGED_FROM = b"unlogged_from"
"""The sys key holding the first conversation number whose hidden conversations are
unlogged (no change-feed positions; erased when cleared)."""
FORMAT = b"format"
"""The sys key holding the store's format (`memoryd.codec.STORE_FORMAT`)."""
IDENTITY = b"identity"
"""The sys key holding the store's id, which its identity file repeats."""
DAMAGED = (
    "the data file is damaged; run `memoryd check --data DIR` on its directory and "
    "restore the store from a backup (`memoryd backup`)"
)
"""What a `CorruptRecord` from a store says to do."""
_META_CACHE_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class Dbs:
    """Handles of the sub-databases of one environment."""

    names: Any
    events: Any
    positions: Any
    meta: Any
    idem: Any
    sys: Any
    system: Any


def open_dbs(env: lmdb.Environment) -> Dbs:
    """Open (creating if needed) every sub-database. Call with no transaction open."""
    return Dbs(
        names=env.open_db(keys.NAMES_DB),
        events=env.open_db(keys.EVENTS_DB),
        positions=env.open_db(keys.POSITIONS_DB),
        meta=env.open_db(keys.META_DB),
        idem=env.open_db(keys.IDEMPOTENCY_DB),
        sys=env.open_db(SYS_DB),
        system=env.open_db(SYSTEM_DB),
    )


def put(txn: lmdb.Transaction, db: Any, key: bytes, value: bytes) -> None:
    """Store ``value`` under ``key``, sealed with its checksum."""
    txn.put(key, codec.seal(key, value), db=db)


def get(txn: lmdb.Transaction, db: Any, key: bytes) -> codec.Buffer | None:
    """The value under ``key`` with its checksum checked, or None if there is none.

    Raises:
        CorruptRecord: the stored bytes fail their checksum.
    """
    raw = txn.get(key, db=db)
    return None if raw is None else codec.unseal(key, raw)


@dataclass(frozen=True, slots=True)
class Meta:
    """Per-conversation metadata: its number, version, first live version, message count,
    and whether its system-message index is complete (not stored in the record: the
    ``system`` sub-database's marker says it)."""

    conv: int
    version: int
    first: int
    count: int
    cid: str
    indexed: bool = True


def system_key(conv: int, ordinal: int | None = None) -> bytes:
    """The ``system`` sub-database key of an index entry, or of the index marker (None)."""
    head = keys.conv_num_bytes(conv)
    return head if ordinal is None else head + ordinal.to_bytes(keys.U64_SIZE, "big")


def meta_of(txn: lmdb.Transaction, dbs: Dbs, cid: str, *, index: bool = True) -> Meta | None:
    """The conversation's metadata, or None if it was never written.

    With ``index=False`` the system-message index marker is not looked up (a read
    that does not use the index, such as a last-N read, needs only the name and the
    metadata records) and ``indexed`` is False.

    Raises:
        CorruptRecord: its name entry, metadata or index marker is damaged, its
            metadata is missing, or it names another conversation.
    """
    try:
        raw = get(txn, dbs.names, cid.encode("utf-8"))  # cid was validated by the handle
        if raw is None:
            return None
        conv = keys.decode_conv_num(bytes(raw))
        packed = get(txn, dbs.meta, keys.conv_num_bytes(conv))
        if packed is None:
            raise CorruptRecord("it has a number but no metadata")
        version, first, count, stored = codec.unpack_meta(packed)
        indexed = index and get(txn, dbs.system, system_key(conv)) is not None
    except CorruptRecord as exc:
        raise CorruptRecord(f"conversation {cid!r}: {exc}; {DAMAGED}") from None
    if stored != cid:
        raise CorruptRecord(f"conversation {cid!r}: its metadata names {stored!r}; {DAMAGED}")
    return Meta(conv, version, first, count, cid, indexed)


def unlogged(conv: int, cid: str, unlogged_from: int) -> bool:
    """True for a hidden conversation numbered from ``unlogged_from`` on: its events take
    no position and a clear erases it."""
    return conv >= unlogged_from and cid.startswith(HIDDEN_PREFIX)


def kept_conversations(txn: lmdb.Transaction, names: Any, sys: Any) -> int:
    """How many conversations the store keeps for good: every name entry but those of
    unlogged hidden conversations, which a clear erases. Never decreases, so the identity
    file records it as a lower bound. Reads the hidden ids' range of ``names`` only.

    Args:
        txn: a transaction of the environment.
        names: its names sub-database.
        sys: its sys sub-database.

    Raises:
        CorruptRecord: the counter or a hidden conversation's name entry is damaged.
    """
    total = int(txn.stat(names)["entries"])
    raw = txn.get(UNLOGGED_FROM, db=sys)
    if raw is None:
        return total  # no conversation is unlogged yet
    prefix = HIDDEN_PREFIX.encode("utf-8")
    key = UNLOGGED_FROM
    try:
        boundary = int.from_bytes(codec.unseal(key, raw), "big")
        cursor = txn.cursor(db=names)
        erasable = 0
        if cursor.set_range(prefix):
            for raw_key, value in cursor:
                key = bytes(raw_key)
                if not key.startswith(prefix):
                    break
                if keys.decode_conv_num(bytes(codec.unseal(key, value))) >= boundary:
                    erasable += 1
    except (CorruptRecord, ValueError) as exc:
        raise CorruptRecord(f"entry {key!r}: {exc}; {DAMAGED}") from None
    return total - erasable


def put_meta(txn: lmdb.Transaction, dbs: Dbs, meta: Meta) -> None:
    """Write a conversation's metadata (sealed)."""
    value = codec.pack_meta(meta.version, meta.first, meta.count, meta.cid)
    put(txn, dbs.meta, keys.conv_num_bytes(meta.conv), value)


def counter(txn: lmdb.Transaction, dbs: Dbs, name: bytes, default: int) -> int:
    """A store-wide counter of the sys sub-database, or ``default`` if it was never set.

    Raises:
        CorruptRecord: the counter fails its checksum.
    """
    try:
        raw = get(txn, dbs.sys, name)
    except CorruptRecord as exc:
        raise CorruptRecord(f"store counter {name.decode()!r}: {exc}; {DAMAGED}") from None
    return default if raw is None else int.from_bytes(raw, "big")


def _last_number(txn: lmdb.Transaction, db: Any, what: str) -> int:
    """The number of the last 8-byte big-endian key of ``db`` (0 when empty), its value
    checked, since the next number written continues from it."""
    cursor = txn.cursor(db=db)
    if not cursor.last():
        return 0
    key = bytes(cursor.key())
    try:
        codec.unseal(key, cursor.value())
    except CorruptRecord as exc:
        raise CorruptRecord(f"the last {what} entry: {exc}; {DAMAGED}") from None
    return int.from_bytes(key[: keys.U64_SIZE], "big")


@dataclass(slots=True)
class Counters:
    """Store-wide counters, kept in memory by the writer.

    The next conversation number and position are derived from the last keys at
    open (those keys are never deleted); only the live-conversation count is
    stored, and only in batches that change it.
    """

    next_conv: int
    next_pos: int
    live: int
    saved_live: int
    cache: dict[str, Meta] = field(default_factory=dict)
    """Committed metadata the writer has seen (shared across batches)."""
    dirty: dict[str, Meta | None] = field(default_factory=dict)
    """Metadata this batch wrote (None: erased); merged into ``cache`` only if the batch
    commits."""
    unlogged_from: int = 1
    """Hidden conversations numbered from here on are unlogged (`UNLOGGED_FROM`)."""
    saved_unlogged: bool = True
    """False until `UNLOGGED_FROM` is stored (a store first opened by this memoryd)."""
    kept: int = 0
    """Conversations kept for good (`kept_conversations`): never fewer than before."""

    @classmethod
    def load(cls, txn: lmdb.Transaction, dbs: Dbs) -> Counters:
        """Read the counters as committed."""
        live = counter(txn, dbs, LIVE, 0)
        next_conv = _last_number(txn, dbs.meta, "metadata") + 1
        unlogged_from = counter(txn, dbs, UNLOGGED_FROM, 0)
        return cls(
            next_conv=next_conv,
            next_pos=_last_number(txn, dbs.positions, "position") + 1,
            live=live,
            saved_live=live,
            unlogged_from=unlogged_from or next_conv,
            saved_unlogged=unlogged_from > 0,
            kept=kept_conversations(txn, dbs.names, dbs.sys),
        )

    def unlogged(self, meta: Meta) -> bool:
        """True for an unlogged hidden conversation (no positions; erased when cleared)."""
        return unlogged(meta.conv, meta.cid, self.unlogged_from)

    def meta(self, txn: lmdb.Transaction, dbs: Dbs, cid: str) -> Meta | None:
        """The conversation's metadata as this batch sees it (cached; else read)."""
        if cid in self.dirty:
            return self.dirty[cid]
        meta = self.cache.get(cid)
        if meta is None:
            meta = meta_of(txn, dbs, cid)
            if meta is not None:
                self.cache[cid] = meta  # committed state: safe to keep
        return meta

    def committed(self) -> None:
        """The batch committed: its metadata becomes the cached state."""
        if len(self.cache) > _META_CACHE_SIZE:
            self.cache.clear()
        for cid, meta in self.dirty.items():
            if meta is None:
                self.cache.pop(cid, None)
            else:
                self.cache[cid] = meta
        self.dirty = {}

    def save(self, txn: lmdb.Transaction, dbs: Dbs) -> None:
        """Write what changed into the batch's transaction."""
        if self.live != self.saved_live:
            put(txn, dbs.sys, LIVE, self.live.to_bytes(8, "big"))
            self.saved_live = self.live
        if not self.saved_unlogged:
            put(txn, dbs.sys, UNLOGGED_FROM, self.unlogged_from.to_bytes(8, "big"))
            self.saved_unlogged = True

    def copy(self) -> Counters:
        """A copy for one batch, kept only if it commits (the cache is shared, read-mostly)."""
        return replace(self, dirty={})

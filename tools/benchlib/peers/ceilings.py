"""Reference rows for the append targets: what ours could reach with a part taken away.

Neither is a store a user would pick. Each removes one cost of ours and keeps the rest,
so the table shows how much of a target that cost alone spends:

* ``ours-nosync``: ours' whole Python path (handle, store actor, group commit, the
  same LMDB layout) with no fsync, as `memoryd.EphemeralStore` runs it. Its appends/s
  bound ours' with any disk.
* ``raw-lmdb-layout``: the records ours writes for one append (the event, its change
  position, the conversation's metadata: three sub-databases), put by raw py-lmdb in
  one synced transaction on the calling thread. No actor, no hand-off, no checks: the
  engine's own limit for ours' layout, to set beside raw-lmdb's single put.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.ours import OursPeer
from benchlib.peers.raw_lmdb import RawLmdbPeer
from benchlib.workload import Message

_U64 = struct.Struct(">Q")
_POSITION = struct.Struct(">QQ")
_META = struct.Struct(">QQQ")


class OursNoSyncPeer(OursPeer):
    """``memoryd.EphemeralStore``: ours without the fsync; appends only."""

    name: ClassVar[str] = "ours-nosync"
    reads: ClassVar[bool] = False

    @classmethod
    def probe(cls) -> str | None:
        """Return why memoryd.EphemeralStore is unusable, or None."""
        missing = super().probe()
        if missing is None:
            import memoryd

            if not hasattr(memoryd, "EphemeralStore"):
                return "memoryd.EphemeralStore does not exist yet"
        return missing

    def notes(self) -> str:
        """Return the store's configuration."""
        return (
            "memoryd EphemeralStore.start(): ours' handle, actor, group commit and layout "
            "with no fsync (a private temporary directory); appends only, a bound on ours"
        )

    def setup(self, directory: Path) -> None:
        """Start an ephemeral store (it keeps its own temporary directory)."""
        import memoryd

        self._start(memoryd, lambda name: memoryd.EphemeralStore.start(name=name))


class RawLmdbLayoutPeer(RawLmdbPeer):
    """Raw py-lmdb putting ours' three records per append; measured for appends only
    (its reads are raw-lmdb's, over the same message records)."""

    name: ClassVar[str] = "raw-lmdb-layout"
    reads: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._positions: Any = None
        self._meta: Any = None
        self._position = 0

    def notes(self) -> str:
        """Return the environment's configuration."""
        return (
            "raw-lmdb's environment (sync=True, metasync=True); per append one write txn "
            "on the calling thread putting the event (8-byte id + 8-byte version), its "
            "change position (8 bytes -> id + version) and the conversation's metadata "
            "(id -> version, first, count): ours' sub-databases, no actor; appends only"
        )

    def setup(self, directory: Path) -> None:
        """Open raw-lmdb's environment with the two more sub-databases ours writes."""
        super().setup(directory)
        self._positions = self._env.open_db(b"positions")
        self._meta = self._env.open_db(b"meta")

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """Put the event, its position and the metadata in one synced transaction."""
        with self._env.begin(write=True) as txn:
            conv_id = self._conversation(txn, cid)
            version = self._next_seq[cid]
            self._next_seq[cid] = version + 1
            self._position += 1  # inside the write txn, which LMDB grants one thread at a time
            position = self._position
            txn.put(conv_id + _U64.pack(version), self._msgpack.packb(message), db=self._messages)
            txn.put(
                _U64.pack(position),
                _POSITION.pack(_U64.unpack(conv_id)[0], version),
                db=self._positions,
            )
            txn.put(conv_id, _META.pack(version, 1, version), db=self._meta)

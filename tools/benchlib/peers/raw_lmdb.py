"""Raw py-lmdb laid out as memoryd lays out messages: the engine's own limit.

Layout: sub-database ``names`` maps the conversation id (UTF-8) to an 8-byte id;
sub-database ``messages`` maps ``id (8 bytes) + seq (8 bytes, big-endian)`` to the
msgpack of one message. "Last N" is a reverse cursor walk inside one read transaction.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.base import Peer, ProgressFn
from benchlib.workload import Message

_U64 = struct.Struct(">Q")
_MAP_SIZE = 8 << 30


class RawLmdbPeer(Peer):
    """One synced write transaction per append; several threads queue on the writer lock."""

    name: ClassVar[str] = "raw-lmdb"

    def __init__(self) -> None:
        self._env: Any = None
        self._names: Any = None
        self._messages: Any = None
        self._ids: dict[str, bytes] = {}
        self._next_seq: dict[str, int] = {}
        self._ids_lock = threading.Lock()
        self._lmdb: Any = None
        self._msgpack: Any = None

    @classmethod
    def probe(cls) -> str | None:
        """Return why lmdb or msgpack is unusable, or None."""
        try:
            import lmdb  # noqa: F401
            import msgpack  # noqa: F401
        except ImportError as exc:
            return f"{exc.name}: {exc}"
        return None

    def notes(self) -> str:
        """Return the environment's configuration."""
        import lmdb

        engine = ".".join(str(part) for part in lmdb.version())
        return (
            f"py-lmdb {lmdb.__version__} / LMDB {engine}: sync=True, metasync=True, "
            "writemap=False, map_async=False; one write txn per append (threads serialize "
            "on LMDB's writer lock); key = 8-byte id + 8-byte BE seq, msgpack value; "
            "reads: one read txn, name lookup + reverse cursor"
        )

    def setup(self, directory: Path) -> None:
        """Open a durable environment in ``directory``."""
        import lmdb
        import msgpack

        self._lmdb = lmdb
        self._msgpack = msgpack
        self._env = lmdb.open(
            str(directory),
            map_size=_MAP_SIZE,
            max_dbs=4,
            max_readers=256,
            sync=True,
            metasync=True,
            writemap=False,
            map_async=False,
            lock=True,
            mode=0o700,
        )
        self._names = self._env.open_db(b"names")
        self._messages = self._env.open_db(b"messages")

    def _conversation(self, txn: Any, cid: str) -> bytes:
        """Return ``cid``'s 8-byte id, assigning it inside ``txn`` on first use."""
        with self._ids_lock:
            known = self._ids.get(cid)
            if known is not None:
                return known
            new_id = _U64.pack(len(self._ids) + 1)
            self._ids[cid] = new_id
            self._next_seq[cid] = 1
        txn.put(cid.encode(), new_id, db=self._names)
        return new_id

    def _put(self, txn: Any, cid: str, message: Message) -> None:
        conv_id = self._conversation(txn, cid)
        seq = self._next_seq[cid]
        self._next_seq[cid] = seq + 1
        key = conv_id + _U64.pack(seq)
        txn.put(key, self._msgpack.packb(message), db=self._messages)

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """Append in its own write transaction; ``commit`` returns after the fsyncs."""
        with self._env.begin(write=True) as txn:
            self._put(txn, cid, message)

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """Write every conversation in one transaction."""
        with self._env.begin(write=True) as txn:
            for done, (cid, messages) in enumerate(conversations, start=1):
                for message in messages:
                    self._put(txn, cid, message)
                progress(done)

    def _unpack(self, data: bytes) -> Any:
        return self._msgpack.unpackb(data, raw=False, strict_map_key=True)

    def read_last(self, cid: str, n: int) -> list[Any]:
        """Walk the conversation's range backwards from its end."""
        with self._env.begin() as txn:
            conv_id = txn.get(cid.encode(), db=self._names)
            if conv_id is None:
                return []
            prefix = conv_id
            cursor = txn.cursor(db=self._messages)
            # Step back from the first key after the range, or from the end of the table.
            found = cursor.prev() if cursor.set_range(prefix + b"\xff" * 8) else cursor.last()
            out: list[Any] = []
            while found and len(out) < n:
                if cursor.key()[:8] != prefix:
                    break
                out.append(self._unpack(cursor.value()))
                found = cursor.prev()
        out.reverse()
        return out

    def read_all(self, cid: str) -> list[Any]:
        """Walk the conversation's range forwards."""
        with self._env.begin() as txn:
            conv_id = txn.get(cid.encode(), db=self._names)
            if conv_id is None:
                return []
            prefix = conv_id
            cursor = txn.cursor(db=self._messages)
            out: list[Any] = []
            found = cursor.set_range(prefix)
            while found:
                if cursor.key()[:8] != prefix:
                    break
                out.append(self._unpack(cursor.value()))
                found = cursor.next()
        return out

    def close(self) -> None:
        """Close the environment."""
        if self._env is not None:
            self._env.close()
            self._env = None

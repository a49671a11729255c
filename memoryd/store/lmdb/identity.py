"""A store's identity file: what a data directory recorded about itself, checked at open.

LMDB keeps no checksums, and one flipped bit in a meta page's main-database root can
make an environment open as if it held nothing; a store that believed that would take
new writes at version 1 over a history it lost. So beside ``data.mdb`` every store keeps
``identity.json``: the store's id (also stored inside the environment, under the sys
key `layout.IDENTITY`), its format, and lower bounds of its counters (conversations ever
written, last change position). At open, a data file whose id, format or counters fall
short of what this file says is refused with `CorruptRecord`.

A separate small file, rather than a second LMDB environment, because it must survive
exactly the damage it detects: it is written whole (a temporary file, fsynced, renamed,
the directory fsynced) and read without LMDB. It is written before the data file is
created, and rewritten when the counters have doubled since it was last written and at
close, so it costs a handful of fsyncs over a store's life, never one per commit; the
counters it holds are therefore lower bounds, at least half the true ones.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from memoryd._json_values import loads
from memoryd.errors import CorruptRecord
from memoryd.store.lmdb.dirlock import fsync_dir, make_dir

__all__ = ["FILE_NAME", "Identity", "read", "write"]

FILE_NAME = "identity.json"
"""The identity file's name inside a data directory."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Identity:
    """What a data directory recorded about its store.

    Attributes:
        store_id: the id the environment holds too.
        format: the store's format (`memoryd.codec.STORE_FORMAT`).
        conversations: at least this many conversations were written.
        position: the change feed reached at least this position.
    """

    store_id: str
    format: int
    conversations: int = 0
    position: int = 0

    @classmethod
    def new(cls, store_format: int) -> Identity:
        """The identity of a store about to be created."""
        return cls(store_id=uuid.uuid4().hex, format=store_format)

    def grown(self, conversations: int, position: int) -> Identity:
        """This identity with counters raised to the given ones (never lowered)."""
        return Identity(
            store_id=self.store_id,
            format=self.format,
            conversations=max(self.conversations, conversations),
            position=max(self.position, position),
        )

    def outgrown_by(self, conversations: int, position: int) -> bool:
        """True when the counters doubled (or first moved) since this was written."""
        return conversations > 2 * self.conversations or position > 2 * self.position


def read(directory: Path) -> Identity | None:
    """The identity file of ``directory``, or None if it has none.

    Raises:
        CorruptRecord: the file exists but is not a valid identity file.
    """
    path = directory / FILE_NAME
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        raw = loads(text)
        identity = Identity(
            store_id=raw["store_id"],
            format=raw["format"],
            conversations=raw["conversations"],
            position=raw["position"],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecord(
            f"{path} is not a valid identity file ({exc}); restore the directory from a "
            "backup (`memoryd backup` writes one with its own identity file)"
        ) from None
    fields = (identity.format, identity.conversations, identity.position)
    if not isinstance(identity.store_id, str) or not all(type(v) is int for v in fields):
        raise CorruptRecord(f"{path} holds fields of the wrong types; restore from a backup")
    return identity


def write(directory: Path, identity: Identity, *, durable: bool = True) -> None:
    """Write ``identity`` as ``directory``'s identity file, atomically.

    Args:
        directory: the store's directory.
        identity: what to record.
        durable: fsync the file and the directory (False for a store without fsync;
            a missing directory is created durably either way, by `dirlock.make_dir`).
    """
    path = directory / FILE_NAME
    temporary = directory / (FILE_NAME + ".tmp")
    make_dir(directory)  # an existing directory costs a stat; a new one is made durable
    body = json.dumps(
        {
            "store_id": identity.store_id,
            "format": identity.format,
            "conversations": identity.conversations,
            "position": identity.position,
        }
    ).encode()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.write(fd, body)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:  # a full disk: no empty temporary file left in the store
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(directory)

"""Damaging a stopped LMDB store's records on disk, as a flipped bit or a lost page would."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb

from memoryd.store.lmdb import keys
from memoryd.store.lmdb.layout import get

__all__ = ["delete_event", "flip_event_bit"]


@contextlib.contextmanager
def _event_record(data: Path, cid: str, version: int) -> Iterator[tuple[Any, Any, bytes]]:
    """A write transaction on the stopped store in ``data``, its events database and the
    key of the event record (``cid``, ``version``)."""
    env = lmdb.open(str(data), max_dbs=8, subdir=True)
    try:
        names = env.open_db(keys.NAMES_DB, create=False)
        events = env.open_db(keys.EVENTS_DB, create=False)
        with env.begin(write=True) as txn:
            conv = keys.decode_conv_num(bytes(get(txn, names, cid.encode())))
            yield txn, events, keys.event_key(conv, version)
    finally:
        env.close()


def flip_event_bit(data: Path, cid: str, version: int) -> None:
    """Flip one bit in the middle of the event record (``cid``, ``version``) of the
    stopped store in ``data``."""
    with _event_record(data, cid, version) as (txn, events, key):
        raw = bytearray(txn.get(key, db=events))
        raw[len(raw) // 2] ^= 0x10
        txn.put(key, bytes(raw), db=events)


def delete_event(data: Path, cid: str, version: int) -> None:
    """Delete the event record (``cid``, ``version``) of the stopped store in ``data``,
    leaving a gap in its versions."""
    with _event_record(data, cid, version) as (txn, events, key):
        assert txn.delete(key, db=events)

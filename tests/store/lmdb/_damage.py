"""Damaging a stopped LMDB store's records on disk, as a flipped bit would."""

from __future__ import annotations

from pathlib import Path

import lmdb

from memoryd.store.lmdb import keys
from memoryd.store.lmdb.layout import get

__all__ = ["flip_event_bit"]


def flip_event_bit(data: Path, cid: str, version: int) -> None:
    """Flip one bit in the middle of the event record (``cid``, ``version``) of the
    stopped store in ``data``."""
    env = lmdb.open(str(data), max_dbs=8, subdir=True)
    try:
        names = env.open_db(keys.NAMES_DB, create=False)
        events = env.open_db(keys.EVENTS_DB, create=False)
        with env.begin(write=True) as txn:
            conv = keys.decode_conv_num(bytes(get(txn, names, cid.encode())))
            key = keys.event_key(conv, version)
            raw = bytearray(txn.get(key, db=events))
            raw[len(raw) // 2] ^= 0x10
            txn.put(key, bytes(raw), db=events)
    finally:
        env.close()

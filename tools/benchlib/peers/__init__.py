"""Peer adapters, one class each, and the registry ``--only`` chooses from."""

from __future__ import annotations

from benchlib.peers.adapters import (
    MemorydLangchainPeer,
    MemorydSessionNoSyncPeer,
    MemorydSessionPeer,
)
from benchlib.peers.agents_session import AgentsSessionPeer
from benchlib.peers.base import Peer, ProgressFn
from benchlib.peers.ceilings import OursNoSyncPeer, RawLmdbLayoutPeer
from benchlib.peers.langchain_sql import LangchainSqlPeer
from benchlib.peers.ours import OursPeer
from benchlib.peers.raw_lmdb import RawLmdbPeer
from benchlib.peers.sqlite_wal import SqliteWalPeer

#: Every peer, in table order; ours first.
PEERS: dict[str, type[Peer]] = {
    cls.name: cls
    for cls in (
        OursPeer,
        OursNoSyncPeer,
        RawLmdbPeer,
        RawLmdbLayoutPeer,
        SqliteWalPeer,
        AgentsSessionPeer,
        MemorydSessionPeer,
        MemorydSessionNoSyncPeer,
        LangchainSqlPeer,
        MemorydLangchainPeer,
    )
}

__all__ = [
    "PEERS",
    "AgentsSessionPeer",
    "LangchainSqlPeer",
    "MemorydLangchainPeer",
    "MemorydSessionNoSyncPeer",
    "MemorydSessionPeer",
    "OursNoSyncPeer",
    "OursPeer",
    "Peer",
    "ProgressFn",
    "RawLmdbLayoutPeer",
    "RawLmdbPeer",
    "SqliteWalPeer",
]

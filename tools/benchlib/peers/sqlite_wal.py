"""sqlite3 in WAL mode with synchronous=FULL: a well-tuned single-file SQL store."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.base import Peer, ProgressFn
from benchlib.workload import Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    conv_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (conv_id, seq)
) WITHOUT ROWID
"""
_INSERT = (
    "INSERT INTO messages (conv_id, seq, body) "
    "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conv_id = ?), ?)"
)
_LAST = "SELECT body FROM messages WHERE conv_id = ? ORDER BY seq DESC LIMIT ?"
_ALL = "SELECT body FROM messages WHERE conv_id = ? ORDER BY seq"
_BUSY_TIMEOUT_MS = 60_000


class SqliteWalPeer(Peer):
    """One ``BEGIN IMMEDIATE … COMMIT`` per append, one connection per thread."""

    name: ClassVar[str] = "sqlite-wal"

    def __init__(self) -> None:
        self._path: Path | None = None
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    def notes(self) -> str:
        """Return the connection settings."""
        return (
            f"sqlite3 {sqlite3.sqlite_version}: journal_mode=WAL, synchronous=FULL, "
            f"busy_timeout={_BUSY_TIMEOUT_MS // 1000} s; BEGIN IMMEDIATE … COMMIT per append; "
            "a connection per thread; PRIMARY KEY (conv_id, seq) WITHOUT ROWID, JSON bodies"
        )

    def setup(self, directory: Path) -> None:
        """Create the database file and its table."""
        self._path = directory / "bench.sqlite3"
        self._connection().execute(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        """Return this thread's connection, opening it on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                str(self._path), isolation_level=None, check_same_thread=False, timeout=60.0
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise RuntimeError(f"journal_mode is {mode!r}, wanted 'wal'")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """Insert one row in its own committed transaction."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_INSERT, (cid, cid, json.dumps(message)))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """Insert every conversation in one transaction."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        for done, (cid, messages) in enumerate(conversations, start=1):
            conn.executemany(
                "INSERT INTO messages (conv_id, seq, body) VALUES (?, ?, ?)",
                [(cid, seq, json.dumps(m)) for seq, m in enumerate(messages, start=1)],
            )
            progress(done)
        conn.execute("COMMIT")

    def read_last(self, cid: str, n: int) -> list[Any]:
        """Select the newest ``n`` rows, then reverse them."""
        rows = self._connection().execute(_LAST, (cid, n)).fetchall()
        return [json.loads(body) for (body,) in reversed(rows)]

    def read_all(self, cid: str) -> list[Any]:
        """Select every row of ``cid`` in order."""
        rows = self._connection().execute(_ALL, (cid,)).fetchall()
        return [json.loads(body) for (body,) in rows]

    def end_thread(self, thread_id: int) -> None:
        """Close this thread's connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            with self._all_lock:
                self._all.remove(conn)
            conn.close()

    def close(self) -> None:
        """Close every connection still open."""
        with self._all_lock:
            connections, self._all = self._all, []
        for conn in connections:
            conn.close()
        self._local = threading.local()


def default_synchronous() -> str:
    """Return this SQLite build's default ``PRAGMA synchronous`` (what untuned code gets)."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    conn = sqlite3.connect(":memory:")
    try:
        value = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    return names.get(value, str(value))

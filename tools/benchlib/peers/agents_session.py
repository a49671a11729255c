"""The OpenAI Agents SDK's ``SQLiteSession`` on a database file.

Its ``add_items`` / ``get_items`` are coroutines that run the SQL in
``asyncio.to_thread``; each SQLiteSession keeps one sqlite3 connection per worker thread
and one process-wide lock per database file, so every session on a file is serialized.
We keep one event loop per calling thread for the whole phase, so its default executor
(and the session's per-thread connection) is reused across calls, as a long-running
agent process would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from benchlib.peers.base import Peer, ProgressFn
from benchlib.peers.sqlite_wal import default_synchronous
from benchlib.workload import Message

_T = TypeVar("_T")


class AgentsSessionPeer(Peer):
    """``agents.SQLiteSession``: one session object per conversation, one file."""

    name: ClassVar[str] = "sqlite-session"

    def __init__(self) -> None:
        self._db: Path | None = None
        self._sessions: dict[str, Any] = {}
        self._sessions_lock = threading.Lock()
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._loops_lock = threading.Lock()
        self._session_cls: Any = None

    @classmethod
    def probe(cls) -> str | None:
        """Return why ``agents.SQLiteSession`` is unusable, or None."""
        try:
            from agents import SQLiteSession  # noqa: F401
        except ImportError as exc:
            return f"openai-agents: {exc}"
        return None

    def notes(self) -> str:
        """Return the session's configuration."""
        return (
            f"openai-agents {metadata.version('openai-agents')} SQLiteSession(cid, file): "
            f"journal_mode=WAL (set by the library), synchronous={default_synchronous()} "
            "(SQLite default, untouched); one commit per add_items([msg]); one session per "
            "conversation; one event loop per thread; the library serializes all sessions "
            "of one file on an in-process lock"
        )

    def setup(self, directory: Path) -> None:
        """Remember the database path; sessions are created on first use."""
        from agents import SQLiteSession

        self._session_cls = SQLiteSession
        self._db = directory / "agents.sqlite3"

    def _loop(self) -> asyncio.AbstractEventLoop:
        """Return this thread's event loop, creating it on first use."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._loops_lock:
                self._loops.append(loop)
        return loop

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self._loop().run_until_complete(coro)

    def _session(self, cid: str) -> Any:
        with self._sessions_lock:
            session = self._sessions.get(cid)
            if session is None:
                session = self._session_cls(cid, str(self._db))
                self._sessions[cid] = session
            return session

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """``await session.add_items([message])`` on this thread's loop."""
        self._run(self._session(cid).add_items([message]))

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """One ``add_items`` of all messages per conversation, through a short-lived session."""
        for done, (cid, messages) in enumerate(conversations, start=1):
            session = self._session_cls(cid, str(self._db))
            try:
                self._run(session.add_items(list(messages)))
            finally:
                session.close()
            progress(done)

    def read_last(self, cid: str, n: int) -> list[Any]:
        """``await session.get_items(limit=n)``."""
        return list(self._run(self._session(cid).get_items(limit=n)))

    def read_all(self, cid: str) -> list[Any]:
        """``await session.get_items()``."""
        return list(self._run(self._session(cid).get_items()))

    @staticmethod
    def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
        if not loop.is_closed():
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def end_thread(self, thread_id: int) -> None:
        """Shut down this thread's loop and its executor threads."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is not None:
            self._local.loop = None
            with self._loops_lock:
                self._loops.remove(loop)
            self._close_loop(loop)

    def close(self) -> None:
        """Close every session, then any loop still open."""
        with self._sessions_lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()
        with self._loops_lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            self._close_loop(loop)
        self._local = threading.local()

    @staticmethod
    def content(item: Any) -> str:
        """Return the item's ``content``."""
        return str(item["content"])

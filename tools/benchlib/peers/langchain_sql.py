"""LangChain's ``SQLChatMessageHistory`` on a SQLite file, in its default configuration."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.base import Peer, ProgressFn
from benchlib.peers.sqlite_wal import default_synchronous
from benchlib.workload import Message


class LangchainSqlPeer(Peer):
    """One ``SQLChatMessageHistory`` per conversation, all on one SQLAlchemy engine.

    The engine is made from the connection string ``sqlite:///<file>`` and shared, as an
    application would share it, instead of one engine (and pool) per history object.
    """

    name: ClassVar[str] = "langchain-sql"
    #: Each read scans the whole table (no index on session_id): keep the count small.
    max_reads: ClassVar[int | None] = 100

    def __init__(self) -> None:
        self._engine: Any = None
        self._histories: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._history_cls: Any = None
        self._human: Any = None
        self._ai: Any = None

    @classmethod
    def probe(cls) -> str | None:
        """Return why langchain-community / SQLAlchemy are unusable, or None."""
        try:
            import sqlalchemy  # noqa: F401
            from langchain_community.chat_message_histories import (  # noqa: F401
                SQLChatMessageHistory,
            )
            from langchain_core.messages import HumanMessage  # noqa: F401
        except ImportError as exc:
            return exc.name or str(exc)[:100]
        return None

    def notes(self) -> str:
        """Return the history's configuration."""
        return (
            f"langchain-community {metadata.version('langchain-community')} "
            f"SQLChatMessageHistory, SQLAlchemy {metadata.version('sqlalchemy')}: SQLite "
            f"defaults (rollback journal, synchronous={default_synchronous()}); one commit "
            "per add_message; one history per conversation on one shared engine; "
            "the library's table has no index on session_id (reads: p50 of at most 100)"
        )

    def setup(self, directory: Path) -> None:
        """Create the engine for ``sqlite:///<directory>/langchain.sqlite3``."""
        import sqlalchemy
        from langchain_community.chat_message_histories import (
            SQLChatMessageHistory,
        )
        from langchain_core.messages import AIMessage, HumanMessage

        self._history_cls = SQLChatMessageHistory
        self._human, self._ai = HumanMessage, AIMessage
        url = f"sqlite:///{directory / 'langchain.sqlite3'}"
        self._engine = sqlalchemy.create_engine(url, pool_size=16, max_overflow=16)

    def _history(self, cid: str) -> Any:
        with self._lock:
            history = self._histories.get(cid)
            if history is None:
                history = self._history_cls(session_id=cid, connection=self._engine)
                self._histories[cid] = history
            return history

    def _convert(self, message: Message) -> Any:
        kind = self._ai if message["role"] == "assistant" else self._human
        return kind(content=message["content"])

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """``history.add_message(HumanMessage(...))``: one session, one commit."""
        self._history(cid).add_message(self._convert(message))

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """One ``add_messages`` (one commit) per conversation."""
        for done, (cid, messages) in enumerate(conversations, start=1):
            self._history(cid).add_messages([self._convert(m) for m in messages])
            progress(done)
        with self._lock:
            self._histories.clear()

    def read_last(self, cid: str, n: int) -> list[Any]:
        """The API has no limit: read ``messages`` and keep the last ``n``."""
        return list(self._history(cid).messages[-n:])

    def read_all(self, cid: str) -> list[Any]:
        """``history.messages``."""
        return list(self._history(cid).messages)

    def close(self) -> None:
        """Drop the histories and dispose of the engine's pool."""
        with self._lock:
            self._histories.clear()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    @staticmethod
    def content(item: Any) -> str:
        """Return the message's ``content``."""
        return str(item.content)

"""memoryd's framework adapters on an LmdbStore, beside each framework's own SQLite store.

``memoryd-session`` drives ``MemorydSession`` exactly as ``sqlite-session`` drives the
Agents SDK's ``SQLiteSession``; ``memoryd-langchain`` drives ``MemorydChatMessageHistory``
exactly as ``langchain-sql`` drives ``SQLChatMessageHistory``. Same workload, same
calls: the difference is the storage under the framework's interface.
``session-nosync`` is a reference row: ``MemorydSession`` on an EphemeralStore,
the adapter's whole path without the disk, to set beside ``ours-nosync``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.agents_session import AgentsSessionPeer
from benchlib.peers.base import ProgressFn
from benchlib.peers.langchain_sql import LangchainSqlPeer
from benchlib.workload import Message

_names = itertools.count(1)


_POPULATE_BATCH = 50
"""Items per ``add_items`` when populating a read store (ours' ``populate_batch``)."""


def _start_store(directory: Path, *, durable: bool = True) -> Any:
    import memoryd
    from memoryd.logging import configure

    configure(level="warning")
    name = f"bench-adapter-{next(_names)}"
    if not durable:
        return memoryd.EphemeralStore.start(name=name)
    return memoryd.LmdbStore.start(str(directory / "lmdb"), name=name)


class MemorydSessionPeer(AgentsSessionPeer):
    """``memoryd.integrations.openai_agents.MemorydSession`` on a durable LmdbStore."""

    name: ClassVar[str] = "memoryd-session"

    @classmethod
    def probe(cls) -> str | None:
        """Return why the adapter or the SDK is unusable, or None."""
        try:
            from memoryd.integrations.openai_agents import MemorydSession  # noqa: F401
        except ImportError as exc:
            return f"memoryd[openai-agents]: {exc}"
        return None

    def notes(self) -> str:
        """Return the adapter's configuration."""
        return (
            "MemorydSession(cid, LmdbStore): durable (fsync before ack), group commit; "
            "driven like sqlite-session (one event loop per thread, add_items([msg]))"
        )

    def setup(self, directory: Path) -> None:
        """Start a durable store; sessions are created on first use."""
        from memoryd.integrations.openai_agents import MemorydSession

        self._store = _start_store(directory)
        self._session_cls = lambda cid, _db: MemorydSession(cid, self._store)
        self._db = directory

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """``add_items`` of 50 items at a time: the events ours' read store holds.

        One ``add_items`` is one store event; a last-50 read decodes the events that
        hold those items, so the session is populated as ours is (`OursPeer`'s
        ``populate_batch``), not as one 200-item event that every read would decode.
        """
        for done, (cid, messages) in enumerate(conversations, start=1):
            session = self._session(cid)
            for start in range(0, len(messages), _POPULATE_BATCH):
                self._run(session.add_items(list(messages[start : start + _POPULATE_BATCH])))
            progress(done)

    def stats(self) -> Mapping[str, Any] | None:
        """Return the store's ``stats()`` (fsyncs and appends, for the batch size)."""
        return dict(self._store.stats())

    def close(self) -> None:
        """Drop the sessions and loops, then stop the store."""
        with self._sessions_lock:
            self._sessions = {}
        super().close()
        self._store.stop()


class MemorydSessionNoSyncPeer(MemorydSessionPeer):
    """``MemorydSession`` on an EphemeralStore: the adapter's path without the disk."""

    name: ClassVar[str] = "session-nosync"
    reads: ClassVar[bool] = False

    def notes(self) -> str:
        """Return the adapter's configuration."""
        return (
            "MemorydSession(cid, EphemeralStore): memoryd-session's whole path with no "
            "fsync; appends only, to set beside ours-nosync"
        )

    def setup(self, directory: Path) -> None:
        """Start an ephemeral store; sessions are created on first use."""
        from memoryd.integrations.openai_agents import MemorydSession

        self._store = _start_store(directory, durable=False)
        self._session_cls = lambda cid, _db: MemorydSession(cid, self._store)
        self._db = directory


class MemorydLangchainPeer(LangchainSqlPeer):
    """``memoryd.integrations.langchain.MemorydChatMessageHistory`` on a durable LmdbStore."""

    name: ClassVar[str] = "memoryd-langchain"
    max_reads: ClassVar[int | None] = None

    @classmethod
    def probe(cls) -> str | None:
        """Return why the adapter or LangChain is unusable, or None."""
        try:
            from memoryd.integrations.langchain import MemorydChatMessageHistory  # noqa: F401
        except ImportError as exc:
            return f"memoryd[langchain]: {exc}"
        return None

    def notes(self) -> str:
        """Return the adapter's configuration."""
        return (
            "MemorydChatMessageHistory(LmdbStore, cid): durable (fsync before ack), group "
            "commit; driven like langchain-sql (add_message, messages)"
        )

    def setup(self, directory: Path) -> None:
        """Start a durable store; histories are created on first use."""
        from langchain_core.messages import AIMessage, HumanMessage

        from memoryd.integrations.langchain import MemorydChatMessageHistory

        store = _start_store(directory)
        self._store = store
        self._human, self._ai = HumanMessage, AIMessage
        self._history_cls = lambda session_id, connection: MemorydChatMessageHistory(
            store, session_id
        )
        self._engine = None

    def stats(self) -> Mapping[str, Any] | None:
        """Return the store's ``stats()`` (fsyncs and appends, for the batch size)."""
        return dict(self._store.stats())

    def close(self) -> None:
        """Drop the histories, then stop the store."""
        with self._lock:
            self._histories.clear()
        self._store.stop()

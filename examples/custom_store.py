"""A store of your own: conversations in SQLite, used by an Agent.

A store needs three methods, ``get(cid)``, ``add(cid, messages)`` and ``clear(cid)``
(`memoryd.ChatStore`, beamai's custom backend, Koog's ``ChatHistoryProvider``).
memoryd accepts it wherever it takes a store, and logs once what such a minimal store
cannot give (idempotent retries, turn-atomic commits across processes, the run journal).

    python examples/custom_store.py [DB_FILE]
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import threading
from typing import Any

import memoryd
from memoryd.llm import ScriptedModel


class SqliteStore:
    """Conversations as rows of one SQLite table: (conversation, position, message JSON)."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS messages ("
                " conversation TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL,"
                " PRIMARY KEY (conversation, position))"
            )

    def get(self, cid: str) -> list[dict[str, Any]]:
        """The conversation's messages, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT body FROM messages WHERE conversation = ? ORDER BY position", (cid,)
            ).fetchall()
        return [json.loads(body) for (body,) in rows]

    def add(self, cid: str, messages: list[dict[str, Any]]) -> None:
        """Append the messages in one transaction, committed before returning."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (last,) = self._db.execute(
                    "SELECT COALESCE(MAX(position), 0) FROM messages WHERE conversation = ?",
                    (cid,),
                ).fetchone()
                self._db.executemany(
                    "INSERT INTO messages VALUES (?, ?, ?)",
                    [(cid, last + i, json.dumps(m)) for i, m in enumerate(messages, start=1)],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def clear(self, cid: str) -> None:
        """Forget the conversation."""
        with self._lock:
            self._db.execute("DELETE FROM messages WHERE conversation = ?", (cid,))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return "SqliteStore()"


def main(path: str) -> None:
    """Two turns of one conversation through an Agent, then what SQLite holds."""
    store = SqliteStore(path)
    model = ScriptedModel(
        [
            "Noted: your order is A-100.",
            lambda sent: f"Your order is A-100 (I was sent {len(sent)} messages).",
        ]
    )
    try:
        agent = memoryd.Agent(llm=model, memory=store, system_prompt="You are a support agent.")
        for text in ("My order number is A-100.", "What is my order number?"):
            reply = agent.run(text, "support-demo")
            print(f"user: {text}\nagent: {reply.text}\n")
        print("stored in SQLite:")
        for message in store.get("support-demo"):
            print(f"  {message['role']:9} {message['content']}")
    finally:
        store.close()
        memoryd.shutdown()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory(prefix="memoryd-example-") as folder:
            main(os.path.join(folder, "chat.sqlite"))

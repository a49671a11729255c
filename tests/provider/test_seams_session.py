"""Seams an Agently user finds in a Session whose resize handler rewrites the history."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

import memoryd
from memoryd import messages


def _compacting(session: memoryd.Session, memo: Any = None) -> None:
    """Handlers that keep the last two messages as the new full context."""
    session.register_analysis_handler(lambda full, w, m, s: "compact" if len(full) > 4 else None)
    session.register_resize_handler("compact", lambda full, w, m, s: (full[-2:], w[-2:], memo))


def test_a_memo_outlives_a_resize_that_replaces_the_history(tmp_path: pathlib.Path) -> None:
    """A resize handler that replaces the full context and keeps the memo (None) leaves the
    memo stored: a new process reads it back."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    session = memoryd.Session("s", store, max_length=None)
    session.set_chat_history([messages.user(f"m{i}") for i in range(6)])
    session.set_memo({"persona": "pirate"})
    _compacting(session)
    assert len(session.context_window) == 2
    memoryd.shutdown()
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    again = memoryd.Session("s", store, max_length=None)
    assert again.memo == {"persona": "pirate"}
    assert [m["content"] for m in again.full_context] == ["m4", "m5"]


def test_a_bad_memo_from_a_resize_handler_writes_nothing(tmp_path: pathlib.Path) -> None:
    """A memo that is not a dict is refused before the handler's history replaces the stored one."""
    store = memoryd.LmdbStore.start(tmp_path / "chat")
    session = memoryd.Session("s", store, max_length=None)
    session.set_chat_history([messages.user(f"m{i}") for i in range(6)])
    version = store.version("s")
    _compacting(session, memo="not a dict")
    with pytest.raises(TypeError, match="memo must be a dict"):
        session.refresh()
    assert store.version("s") == version
    assert len(store.get("s")) == 6


def test_a_memo_that_is_not_json_is_refused_without_a_store_too() -> None:
    """A session on a provider with no store keeps its memo in memory, and refuses one
    that is not JSON-compatible as a stored session does (it used to keep a NaN)."""

    class Plain:
        def history(self, cid: str) -> list[dict[str, object]]:
            return []

        def append(self, cid: str, messages: list[dict[str, object]]) -> None:
            pass

        def prepare(self, cid: str, messages: list[dict[str, object]]) -> list[dict[str, object]]:
            return messages

        def clear(self, cid: str) -> None:
            pass

    session = memoryd.Session("plain", Plain())
    with pytest.raises(ValueError, match="memo"):
        session.set_memo({"score": float("nan")})
    with pytest.raises(TypeError, match="memo must be a dict"):
        session.set_memo(["not", "a", "dict"])  # type: ignore[arg-type]
    session.set_memo({"persona": "pirate"})
    assert session.memo == {"persona": "pirate"}

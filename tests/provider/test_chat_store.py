"""memoryd.ChatStore: a store a user writes is accepted everywhere a store is, alike."""

from __future__ import annotations

import os
import pathlib
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel
from memoryd.provider.chat_store import store_features

ROOT = pathlib.Path(__file__).resolve().parents[2]


class ListStore:
    """beamai's ChatMemory behaviour and nothing else: get, add, clear, no keywords."""

    def __init__(self) -> None:
        self.data: dict[str, list[dict[str, Any]]] = {}
        self.adds = 0

    def get(self, cid: str) -> list[dict[str, Any]]:
        return list(self.data.get(cid, []))

    def add(self, cid: str, messages: list[dict[str, Any]]) -> None:
        self.adds += 1
        self.data.setdefault(cid, []).extend(messages)

    def clear(self, cid: str) -> None:
        self.data.pop(cid, None)


class KeyedStore(ListStore):
    """A store that also honours idempotency keys and expected versions."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: dict[tuple[str, str], int] = {}
        self.versions: dict[str, int] = {}

    def version(self, cid: str) -> int:
        return self.versions.get(cid, 0)

    def add(  # type: ignore[override]
        self,
        cid: str,
        messages: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> int:
        if idempotency_key is not None and (cid, idempotency_key) in self.keys:
            return self.keys[(cid, idempotency_key)]
        if expected_version is not None and expected_version != self.version(cid):
            raise memoryd.ConflictError(expected=expected_version, actual=self.version(cid))
        super().add(cid, messages)
        self.versions[cid] = self.version(cid) + 1
        if idempotency_key is not None:
            self.keys[(cid, idempotency_key)] = self.versions[cid]
        return self.versions[cid]


class NoClear:
    """Not a store: it cannot clear."""

    def get(self, cid: str) -> list[dict[str, Any]]:
        return []

    def add(self, cid: str, messages: list[dict[str, Any]]) -> None:
        pass


@pytest.fixture
def handle() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"records-{uuid.uuid4().hex[:8]}")


def takers(handle: memoryd.StoreHandle) -> dict[str, Callable[[Any], Any]]:
    """Everything that takes a store, as one-argument constructors."""
    return {
        "DefaultProvider": memoryd.DefaultProvider,
        "Agent": lambda s: memoryd.Agent(llm=ScriptedModel([]), memory=s),
        "Session": lambda s: memoryd.Session("s", s),
        "memory_filter": memoryd.memory_filter,
        "LongTermMemory": lambda s: memoryd.LongTermMemory(s, llm=ScriptedModel([]), store=handle),
    }


def test_a_minimal_store_satisfies_the_protocol() -> None:
    """get, add and clear make a memoryd.ChatStore; a store handle is one too."""
    assert isinstance(ListStore(), memoryd.ChatStore)
    assert not isinstance(NoClear(), memoryd.ChatStore)


def test_every_store_taker_accepts_a_minimal_store(handle: memoryd.StoreHandle) -> None:
    """DefaultProvider, Agent, Session, memory_filter and LongTermMemory all take it."""
    for name, take in takers(handle).items():
        assert take(ListStore()) is not None, name


def test_every_store_taker_rejects_a_non_store_alike(handle: memoryd.StoreHandle) -> None:
    """The same TypeError, naming what is missing, from all five."""
    for name, take in takers(handle).items():
        with pytest.raises(TypeError, match=r"needs a store: .* has no clear$") as caught:
            take(NoClear())
        assert name in str(caught.value), caught.value


def test_a_minimal_store_is_warned_about_once(handle: memoryd.StoreHandle) -> None:
    """One chat_store_degraded warning per store, however many parts accept it."""
    store, other = ListStore(), ListStore()
    with capture_logs() as logs:
        for take in takers(handle).values():
            take(store)
        memoryd.DefaultProvider(other)
        memoryd.DefaultProvider(handle)
    warned = [e for e in logs if e["event"] == "chat_store_degraded"]
    assert len(warned) == 2
    assert all(e["log_level"] == "warning" for e in warned)
    assert any("idempotent retries" in phrase for phrase in warned[0]["degraded"])
    assert any("run journal" in phrase for phrase in warned[0]["degraded"])


def test_a_store_handle_is_never_warned_about(handle: memoryd.StoreHandle) -> None:
    """A memoryd store handle offers every feature."""
    with capture_logs() as logs:
        memoryd.DefaultProvider(handle)
        memoryd.memory_filter(handle)
    assert [e for e in logs if e["event"] == "chat_store_degraded"] == []
    assert store_features(handle).degraded() == []


def test_the_features_a_store_offers_are_read_from_its_methods() -> None:
    """Keyword parameters and optional methods, read once."""
    minimal, keyed = store_features(ListStore()), store_features(KeyedStore())
    assert (minimal.idempotency, minimal.expected_version, minimal.version) == (False,) * 3
    assert (keyed.idempotency, keyed.expected_version, keyed.version) == (True,) * 3
    assert not keyed.get_limit
    assert not keyed.memo


def test_default_provider_windows_a_minimal_store() -> None:
    """history reads the whole log (no limit=) and prepare keeps the last n."""
    store = ListStore()
    provider = memoryd.DefaultProvider(store, window=2)
    provider.append("c", [messages.system("persona"), messages.user("1")])
    provider.append("c", [messages.assistant("2"), messages.user("3")])
    history = provider.history("c")
    assert [m["content"] for m in history] == ["persona", "1", "2", "3"]
    assert [m["content"] for m in provider.prepare("c", history)] == ["persona", "2", "3"]
    history[0]["content"] = "changed"
    assert store.data["c"][0]["content"] == "persona"


def test_agent_on_a_minimal_store_keeps_the_conversation() -> None:
    """Two runs: the second is sent the first; each turn is one add."""
    store = ListStore()
    model = ScriptedModel(["Hello Alice", "You are Alice"])
    agent = memoryd.Agent(llm=model, memory=store)
    first = agent.run("My name is Alice", "s")
    assert first.version is None  # the store keeps no versions
    agent.run("What's my name?", "s")
    assert [m["content"] for m in model.calls[1]] == [
        "My name is Alice",
        "Hello Alice",
        "What's my name?",
    ]
    assert store.adds == 2


def test_agent_passes_the_options_a_store_takes() -> None:
    """A keyed store gets the run id and the base version: a conflict stores nothing."""
    store = KeyedStore()
    agent = memoryd.Agent(
        llm=ScriptedModel(["one", lambda sent: _write_meanwhile(store)]), memory=store
    )
    result = agent.run("first", "s")
    assert (result.version, store.keys) == (1, {("s", result.run_id): 1})
    with pytest.raises(memoryd.ConflictError, match="changed while run"):
        agent.run("second", "s")
    assert [m["content"] for m in store.get("s")] == ["first", "one", "elsewhere"]


def _write_meanwhile(store: KeyedStore) -> str:
    store.add("s", [messages.user("elsewhere")])
    return "two"


def test_session_on_a_minimal_store_keeps_its_memo_in_memory() -> None:
    """The history is the store's; the memo lives in the Session, with a warning."""
    store = ListStore()
    with capture_logs() as logs:
        session = memoryd.Session("s", store)
        session.add_chat_history([messages.user("hi")])
        session.set_memo({"k": "v"})
    assert session.memo == {"k": "v"}
    assert session.full_context == [messages.user("hi")]
    events = [e["event"] for e in logs]
    assert events == ["chat_store_degraded", "session_memo_volatile"]


def test_long_term_memory_needs_a_store_handle_for_its_records() -> None:
    """Records are events: a minimal store alone cannot hold them, and says so."""
    with pytest.raises(TypeError, match="keeps its records in a memoryd store handle"):
        memoryd.LongTermMemory(ListStore(), llm=ScriptedModel([]))


def test_the_custom_store_example_runs(tmp_path: pathlib.Path) -> None:
    """examples/custom_store.py: an Agent over SQLite; the rows hold both turns."""
    db = tmp_path / "chat.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_store.py"), str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "agent: Your order is A-100 (I was sent 4 messages)." in done.stdout
    assert done.stderr.count("chat_store_degraded") == 1
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT body FROM messages WHERE conversation = 'support-demo' ORDER BY position"
        ).fetchall()
    assert len(rows) == 4

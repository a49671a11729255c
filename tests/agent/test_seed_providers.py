"""beamai's four provider callbacks, with no keyword arguments, work everywhere a provider does."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages
from memoryd.agent.memory import check_provider_options
from memoryd.llm import ScriptedModel
from memoryd.provider.protocol import append_options


class BeamaiProvider:
    """Exactly beamai_memory_provider: history, append, prepare, clear; append says ok."""

    def __init__(self) -> None:
        self.data: dict[str, list[dict[str, Any]]] = {}
        self.appends = 0

    def history(self, cid: str) -> list[dict[str, Any]]:
        return [dict(m) for m in self.data.get(cid, [])]

    def append(self, cid: str, msgs: list[dict[str, Any]]) -> str:
        self.appends += 1
        self.data.setdefault(cid, []).extend(dict(m) for m in msgs)
        return "ok"

    def prepare(self, cid: str, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return msgs[-3:]

    def clear(self, cid: str) -> None:
        self.data.pop(cid, None)


class VersionedProvider(BeamaiProvider):
    """Offers both optional keywords by naming them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def append(  # type: ignore[override]
        self,
        cid: str,
        msgs: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> int:
        self.seen.append({"idempotency_key": idempotency_key, "expected_version": expected_version})
        super().append(cid, msgs)
        return self.appends


def contents(history: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in history]


def test_the_optional_keywords_are_read_from_the_signature() -> None:
    """A provider offers idempotency_key / expected_version by naming them."""
    assert append_options(BeamaiProvider()) == frozenset()
    assert append_options(VersionedProvider()) == {"idempotency_key", "expected_version"}


def test_a_beamai_provider_is_an_agents_memory() -> None:
    """Runs call append(cid, msgs) with no keywords; history reaches the next run."""
    provider = BeamaiProvider()
    model = ScriptedModel(["Hello Alice", "You are Alice"])
    agent = memoryd.Agent(llm=model, memory=provider)
    first = agent.run("My name is Alice", conversation_id="s")
    agent.run("What's my name?", conversation_id="s")
    assert first.version is None  # "ok" is no version
    assert contents(model.calls[1]) == ["My name is Alice", "Hello Alice", "What's my name?"]
    assert contents(provider.data["s"]) == [
        "My name is Alice",
        "Hello Alice",
        "What's my name?",
        "You are Alice",
    ]
    assert provider.appends == 2


def test_an_agent_warns_once_about_a_provider_without_the_keywords() -> None:
    """memory_provider_degraded names what the Agent cannot promise, once per provider."""
    provider = BeamaiProvider()
    with capture_logs() as logs:
        memoryd.Agent(llm=ScriptedModel([]), memory=provider)
        memoryd.Agent(llm=ScriptedModel([]), memory=provider)
        memoryd.Agent(llm=ScriptedModel([]), memory=VersionedProvider())
    warned = [e for e in logs if e["event"] == "memory_provider_degraded"]
    assert len(warned) == 1
    assert warned[0]["log_level"] == "warning"
    assert len(warned[0]["degraded"]) == 2


def test_an_agent_passes_the_keywords_a_provider_offers() -> None:
    """The run id as idempotency key and the run's starting version."""
    provider = VersionedProvider()
    agent = memoryd.Agent(llm=ScriptedModel(["a", "b"]), memory=provider)
    assert check_provider_options(provider) == {"idempotency_key", "expected_version"}
    first = agent.run("1", "s")
    agent.run("2", "s")
    assert provider.seen[0]["idempotency_key"] == first.run_id
    assert [s["expected_version"] for s in provider.seen] == [None, None]  # keeps no version


def test_a_beamai_provider_holds_a_session() -> None:
    """Session works on the provider: history, window, set and reset, memo in memory."""
    provider = BeamaiProvider()
    session = memoryd.Session("s", provider, max_length=None)
    session.add_chat_history([messages.user("1"), messages.assistant("2")])
    session.add_chat_history(messages.user("3"))
    session.add_chat_history(messages.assistant("4"))
    assert contents(session.full_context) == ["1", "2", "3", "4"]
    assert contents(session.context_window) == ["2", "3", "4"]
    session.set_memo({"turns": 2})
    assert session.memo == {"turns": 2}
    session.set_chat_history([messages.user("new")], replace=True)
    assert contents(provider.data["s"]) == ["new"]
    session.reset_chat_history()
    assert provider.data.get("s") is None


def test_a_beamai_provider_under_long_term_memory() -> None:
    """LongTermMemory wraps it (records in a store handle), offering what it offers."""
    provider = BeamaiProvider()
    records = memoryd.EphemeralStore.start(name=f"records-{uuid.uuid4().hex[:8]}")
    fact = {"facts": [{"body": {"text": "The user is Alice."}, "scope": "session"}]}
    extractor = ScriptedModel([json.dumps(fact)])
    memory = memoryd.LongTermMemory(provider, llm=extractor, store=records)
    assert append_options(memory) == frozenset()
    agent = memoryd.Agent(llm=ScriptedModel(["Hello Alice"]), memory=memory)
    result = agent.run("I am Alice", "s")
    assert result.text == "Hello Alice"
    assert contents(provider.data["s"]) == ["I am Alice", "Hello Alice"]
    assert [r.body for r in memory.records("s")] == [{"text": "The user is Alice."}]


def test_a_non_provider_is_named() -> None:
    """Something that is neither a provider nor a store is refused with the forms."""
    with pytest.raises(TypeError, match="not a memory form"):
        memoryd.Agent(llm=ScriptedModel([]), memory=42)


def test_a_provider_missing_callbacks_is_told_which() -> None:
    """A provider written with some of beamai's four callbacks, or Koog's ``store`` and
    ``load`` instead of them, is told what it has and what it lacks."""

    class Half:
        def history(self, cid: str) -> list[dict[str, Any]]:
            return []

        def append(self, cid: str, messages: list[dict[str, Any]]) -> None:
            pass

    class KoogStyle:
        def store(self, cid: str, messages: list[dict[str, Any]]) -> None:
            pass

        def load(self, cid: str) -> list[dict[str, Any]]:
            return []

    with pytest.raises(
        TypeError, match="has history, append but a MemoryProvider also needs prepare, clear"
    ):
        memoryd.Agent(llm=ScriptedModel([]), memory=Half())
    with pytest.raises(
        TypeError, match=r"none of a MemoryProvider's methods \(history, append, prepare, clear\)"
    ):
        memoryd.Agent(llm=ScriptedModel([]), memory=KoogStyle())


class StoreBackedProvider:
    """A provider over a store handle whose append takes expected_version (not the key)."""

    def __init__(self, store: memoryd.StoreHandle) -> None:
        self.store = store
        self.expected: list[int | None] = []

    def history(self, cid: str) -> list[dict[str, Any]]:
        return self.store.get(cid)

    def append(
        self, cid: str, msgs: list[dict[str, Any]], *, expected_version: int | None = None
    ) -> int:
        self.expected.append(expected_version)
        return self.store.add(cid, msgs, expected_version=expected_version)

    def prepare(self, cid: str, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return msgs

    def clear(self, cid: str) -> None:
        self.store.clear(cid)


def test_a_provider_with_expected_version_gets_the_runs_base() -> None:
    """The commit is checked by the provider's own store, atomically."""
    store = memoryd.EphemeralStore.start(name=f"versioned-{uuid.uuid4().hex[:8]}")
    provider = StoreBackedProvider(store)

    def meanwhile(sent: list[dict[str, Any]]) -> str:
        store.add("s", [messages.user("elsewhere")])
        return "late"

    agent = memoryd.Agent(llm=ScriptedModel(["a", meanwhile]), memory=provider, journal=False)
    assert agent.run("1", "s").version == 1
    with pytest.raises(memoryd.ConflictError, match="changed while run"):
        agent.run("2", "s")
    assert provider.expected == [0, 1]
    assert contents(store.get("s")) == ["1", "a", "elsewhere"]

"""DefaultProvider on real stores: window only in prepare, preprocessors, tail reads."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import DefaultProvider, MemoryProvider, messages, preprocessors
from tests.provider.test_safe_window import a, calls, label, r, s, u


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start()


def test_default_provider_is_a_memory_provider(store: memoryd.StoreHandle) -> None:
    """It satisfies the MemoryProvider protocol."""
    assert isinstance(DefaultProvider(store), MemoryProvider)


def test_append_then_history_reads_your_writes(store: memoryd.StoreHandle) -> None:
    """history sees what append stored; append returns the new version."""
    provider = DefaultProvider(store)
    assert provider.append("c", [u("1"), a("2")]) == 1
    assert provider.append("c", [u("3")]) == 2
    assert [m["content"] for m in provider.history("c")] == ["1", "2", "3"]


def test_window_is_applied_only_in_prepare_never_to_the_store(store: memoryd.StoreHandle) -> None:
    """The store keeps everything; prepare sends the safe window."""
    provider = DefaultProvider(store, window=2)
    for i in range(6):
        provider.append("c", [u(f"m{i}")])
    assert len(store.get("c")) == 6
    sent = provider.prepare("c", [*provider.history("c"), u("now")])
    assert [m["content"] for m in sent] == ["m5", "now"]


def test_history_with_a_window_reads_only_the_tail(store: memoryd.StoreHandle) -> None:
    """With window n, history returns the last n messages, not the whole conversation."""
    provider = DefaultProvider(store, window=3)
    provider.append("c", [u(f"m{i}") for i in range(100)])
    assert [m["content"] for m in provider.history("c")] == ["m97", "m98", "m99"]
    assert len(DefaultProvider(store, window=3, read_tail=False).history("c")) == 100


def test_tail_read_reaches_past_system_messages_for_n_others(store: memoryd.StoreHandle) -> None:
    """System messages in the tail do not count: the read grows until it holds n others."""
    provider = DefaultProvider(store, window=2)
    provider.append("c", [u("old"), u("m1"), s("S1"), s("S2"), s("S3"), u("m2")])
    history = provider.history("c")
    assert [m["content"] for m in provider.prepare("c", history)] == ["S1", "S2", "S3", "m1", "m2"]


def test_preprocessors_run_in_order_after_the_window(store: memoryd.StoreHandle) -> None:
    """prepare = window, then each preprocessor on the previous output."""
    seen: list[list[str]] = []

    def spy(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.append([m["content"] for m in messages])
        return messages[1:]

    provider = DefaultProvider(store, window=3, preprocessors=[spy, spy])
    out = provider.prepare("c", [u("1"), u("2"), u("3"), u("4")])
    assert seen == [["2", "3", "4"], ["3", "4"]]
    assert [m["content"] for m in out] == ["4"]


def test_prepare_is_pure_even_with_a_mutating_preprocessor(store: memoryd.StoreHandle) -> None:
    """A user preprocessor that mutates its input cannot change the caller's messages."""

    def shout(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for message in messages:
            message["content"] = message["content"].upper()
        return messages

    history = [u("hello")]
    before = copy.deepcopy(history)
    out = DefaultProvider(store, preprocessors=[shout]).prepare("c", history)
    assert out[0]["content"] == "HELLO"
    assert history == before
    assert store.version("c") == 0


def test_store_preprocessors_redact_what_is_stored(store: memoryd.StoreHandle) -> None:
    """store_preprocessors run on append: the store never holds the secret."""
    provider = DefaultProvider(store, store_preprocessors=[preprocessors.redact(r"\d{4}-\d{4}")])
    provider.append("c", [u("card 1234-5678 please")])
    assert store.get("c")[0]["content"] == "card [REDACTED] please"
    assert "1234" not in str(store.events("c"))


def test_append_stores_a_checked_batch_as_it_is(store: memoryd.StoreHandle) -> None:
    """Without store preprocessors a CheckedMessages is what the store is handed."""
    provider = DefaultProvider(store)
    checked = messages.check([u("1"), a("2")], max_bytes=None)
    assert provider.to_store(checked) is checked
    assert provider.append("c", checked) == 1
    assert store.get("c") == list(checked)


def test_store_preprocessors_change_copies_of_a_checked_batch(store: memoryd.StoreHandle) -> None:
    """A store preprocessor that mutates its input leaves the caller's checked batch whole."""

    def shout(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for message in batch:
            message["content"] = message["content"].upper()
        return batch

    provider = DefaultProvider(store, store_preprocessors=[shout])
    checked = messages.check([u("quiet")], max_bytes=None)
    provider.append("c", checked)
    assert checked[0]["content"] == "quiet"
    assert store.get("c")[0]["content"] == "QUIET"


def test_store_preprocessor_leaving_nothing_writes_nothing(store: memoryd.StoreHandle) -> None:
    """If the store preprocessors drop every message, nothing is written."""
    provider = DefaultProvider(store, store_preprocessors=[preprocessors.drop_system()])
    provider.append("c", [u("1")])
    assert provider.append("c", [s("only system")]) == 1
    assert store.version("c") == 1


def test_append_with_idempotency_key_writes_once(store: memoryd.StoreHandle) -> None:
    """A repeated idempotency key writes nothing and returns the first version."""
    provider = DefaultProvider(store)
    assert provider.append("c", [u("1")], idempotency_key="turn-1") == 1
    assert provider.append("c", [u("1")], idempotency_key="turn-1") == 1
    assert len(store.get("c")) == 1


def test_clear_empties_the_history(store: memoryd.StoreHandle) -> None:
    """clear forgets the conversation."""
    provider = DefaultProvider(store, window=5)
    provider.append("c", [u("1"), calls("x"), r("x")])
    provider.clear("c")
    assert provider.history("c") == []


def test_bad_arguments_raise_clear_errors(store: memoryd.StoreHandle) -> None:
    """Bad stores, windows, preprocessors, ids and messages are refused by name."""
    with pytest.raises(TypeError, match="DefaultProvider needs a store"):
        DefaultProvider("not a store")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window"):
        DefaultProvider(store, window=-1)
    with pytest.raises(TypeError, match="preprocessors"):
        DefaultProvider(store, preprocessors=[42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="store_preprocessors"):
        DefaultProvider(store, store_preprocessors=lambda m: m)  # type: ignore[arg-type]
    provider = DefaultProvider(store)
    with pytest.raises(memoryd.InvalidConversationId):
        provider.prepare("", [u("x")])
    with pytest.raises(memoryd.InvalidMessage):
        provider.append("c", [{"role": "robot", "content": "x"}])
    with pytest.raises(memoryd.InvalidMessage):
        provider.prepare("c", "hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window"):
        memoryd.window(-2)


def test_window_helper_uses_the_default_store_lazily() -> None:
    """memoryd.window(n) starts the default store on first use and survives a shutdown."""
    provider = memoryd.window(2)
    assert memoryd.whereis("memoryd.default") is None
    provider.append("w", [u("1"), u("2"), u("3")])
    assert memoryd.whereis("memoryd.default") is not None
    assert [m["content"] for m in provider.prepare("w", provider.history("w"))] == ["2", "3"]
    memoryd.shutdown()
    provider.append("w", [u("again")])
    assert [m["content"] for m in provider.history("w")] == ["again"]


def test_provider_history_survives_a_store_restart(tmp_path: Path) -> None:
    """A durable store stopped and started on the same path gives the same history."""
    store = memoryd.LmdbStore.start(tmp_path / "data", name="durable")
    DefaultProvider(store).append("c", [u("1"), calls("x"), r("x"), a("2")])
    store.stop()
    again = memoryd.LmdbStore.start(tmp_path / "data", name="durable")
    assert [label(m) for m in DefaultProvider(again, window=10).history("c")] == [
        "1",
        "c:x",
        "r:x",
        "2",
    ]

"""Writes that change or refuse to change a conversation: idempotency keys, expected
versions, pop, clear, and reading the history as of an earlier version."""

from __future__ import annotations

import asyncio

import pytest

import memoryd
from memoryd.store import requests
from memoryd.testing._messages import assistant, texts, user
from memoryd.testing._store import Store, assert_nothing_written

__all__ = ["WriteContract"]


def _add(cid: str, text: str, *, expected: int) -> requests.Add:
    return requests.add(
        cid, [user(text)], idempotency_key=None, expected_version=expected, max_bytes=1 << 20
    )


class WriteContract:
    """Retries, conflicts, ``pop``, ``clear`` and ``at_version``.

    Part of `memoryd.testing.StoreContract`, which provides the ``store`` fixture.
    """

    # --- idempotency ---------------------------------------------------------------------------

    def test_repeated_idempotency_key_returns_the_original_version(self, store: Store) -> None:
        """A second add with the same key returns the version the first one produced."""
        first = store.add("c", [user("a")], idempotency_key="k1")
        assert store.add("c", [user("a")], idempotency_key="k1") == first

    def test_repeated_idempotency_key_writes_nothing(self, store: Store) -> None:
        """A repeated key leaves version, history and event log unchanged."""
        store.add("c", [user("a")], idempotency_key="k1")
        before = (store.version("c"), store.get("c"))
        store.add("c", [user("a")], idempotency_key="k1")
        assert_nothing_written(store, "c", before)
        assert len(store.events("c")) == 1

    def test_repeated_idempotency_key_with_other_messages_writes_nothing(
        self, store: Store
    ) -> None:
        """The key alone decides: a repeat carrying different messages is still a no-op."""
        store.add("c", [user("a")], idempotency_key="k1")
        assert store.add("c", [user("different")], idempotency_key="k1") == 1
        assert texts(store.get("c")) == ["a"]

    def test_repeated_idempotency_key_after_later_writes(self, store: Store) -> None:
        """Retrying an old key after other writes returns its original version, writes nothing."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.add("c", [user("b")], idempotency_key="k2")
        store.add("c", [user("c")])
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.version("c") == 3
        assert texts(store.get("c")) == ["a", "b", "c"]

    def test_repeated_idempotency_key_after_clear_writes_nothing(self, store: Store) -> None:
        """A key used before a clear is still remembered after it."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.clear("c")
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.get("c") == []
        assert store.version("c") == 2

    def test_idempotency_keys_are_scoped_per_conversation(self, store: Store) -> None:
        """The same key in two conversations makes two writes."""
        assert store.add("c1", [user("x")], idempotency_key="k") == 1
        store.add("c2", [user("first")])
        assert store.add("c2", [user("y")], idempotency_key="k") == 2
        assert texts(store.get("c1")) == ["x"]
        assert texts(store.get("c2")) == ["first", "y"]

    def test_event_records_its_idempotency_key(self, store: Store) -> None:
        """An event keeps the key it was written with (None without one)."""
        store.add("c", [user("a")], idempotency_key="k1")
        store.add("c", [user("b")])
        assert [e.idempotency_key for e in store.events("c")] == ["k1", None]

    def test_retry_with_same_key_and_stale_expected_version_returns_original(
        self, store: Store
    ) -> None:
        """A retried write (same key, now-stale expected_version) is answered, not a conflict."""
        assert store.add("c", [user("a")], idempotency_key="k1", expected_version=0) == 1
        assert store.add("c", [user("a")], idempotency_key="k1", expected_version=0) == 1
        assert store.version("c") == 1

    # --- optimistic concurrency -----------------------------------------------------------------

    def test_matching_expected_version_appends(self, store: Store) -> None:
        """add(expected_version=current) succeeds."""
        assert store.add("c", [user("a")], expected_version=0) == 1
        assert store.add("c", [user("b")], expected_version=1) == 2

    def test_mismatched_expected_version_raises_conflict(self, store: Store) -> None:
        """add(expected_version != current) raises ConflictError and writes nothing."""
        store.add("c", [user("a")])
        before = (store.version("c"), store.get("c"))
        for wrong in (0, 2, 7):
            with pytest.raises(memoryd.ConflictError):
                store.add("c", [user("b")], expected_version=wrong)
        assert_nothing_written(store, "c", before)

    def test_a_version_past_what_a_store_holds_is_refused_by_name(self, store: Store) -> None:
        """expected_version (and at_version) past 2**64-1 is a ValueError naming it and
        the bound, with the number shown by its size: no store holds such a version, and
        a huge number echoed whole made a 409 kilobytes long."""
        store.add("c", [user("a")])
        before = (store.version("c"), store.get("c"))
        for huge in (2**64, 10**5000):
            with pytest.raises(
                ValueError, match=r"expected_version must be an int from 0 to 2\*\*64-1"
            ) as refused:
                store.add("c", [user("b")], expected_version=huge)
            assert len(str(refused.value)) < 200
            with pytest.raises(ValueError, match=r"at_version must be an int from 0 to 2\*\*64-1"):
                store.get("c", at_version=huge)
        assert_nothing_written(store, "c", before)
        for after in (2**64 - 1, 2**64):  # nothing can come after the last position
            with pytest.raises(ValueError, match=r"after must be at most 2\*\*64-2"):
                store.tail(after=after)
            with pytest.raises(ValueError, match=r"after must be at most 2\*\*64-2"):
                store.events("c", after=after)

    def test_conflicting_add_does_not_consume_its_idempotency_key(self, store: Store) -> None:
        """A write refused for a conflict can be made later with the same key."""
        store.add("c", [user("a")])
        with pytest.raises(memoryd.ConflictError):
            store.add("c", [user("b")], idempotency_key="k", expected_version=0)
        assert store.add("c", [user("b")], idempotency_key="k", expected_version=1) == 2
        assert texts(store.get("c")) == ["a", "b"]

    # --- begun writes (`StoreHandle.begin`) ---------------------------------------------------

    def test_a_begun_write_answers_as_its_method_does(self, store: Store) -> None:
        """begin(<an add>).result() returns the new version, and the messages are stored;
        begun writes of one caller are written in the order they were begun."""
        first = store.begin(_add("c", "a", expected=0))
        second = store.begin(_add("c", "b", expected=1))
        assert (first.result(), second.result()) == (1, 2)
        assert second.result() == 2  # asked again: the same answer, no second write
        assert texts(store.get("c")) == ["a", "b"]
        assert store.begin(requests.clear("c")).result() is None
        assert store.get("c") == []

    def test_a_begun_write_refused_raises_from_result(self, store: Store) -> None:
        """A begun add at a stale expected version raises ConflictError from result(), and
        again when asked again; nothing is written."""
        store.add("c", [user("a")])
        before = (store.version("c"), store.get("c"))
        pending = store.begin(_add("c", "b", expected=0))
        for _ in range(2):
            with pytest.raises(memoryd.ConflictError):
                pending.result()
        assert_nothing_written(store, "c", before)

    def test_a_begun_write_to_a_stopped_store_raises_from_result(self, store: Store) -> None:
        """begin() itself never raises for the store's sake: a stopped store's
        StoreUnavailable comes from result(), where every other error comes from."""
        store.add("c", [user("a")])
        store.stop()
        pending = store.begin(_add("c", "b", expected=1))
        with pytest.raises(memoryd.StoreUnavailable):
            pending.result()

    # --- writes begun from an event loop (`StoreHandle.begin_on_loop`) --------------------------

    def test_a_write_begun_on_a_loop_answers_as_submit_does(self, store: Store) -> None:
        """Adds begun on a loop, then awaited, answer their versions; of two begun
        together, the one at a stale expected version raises ConflictError when awaited
        (whichever reaches the store first) and writes nothing; a clear answers None.
        Writes begun together are not ordered on every backend: a write that depends on
        another is begun once that one is awaited."""

        async def scenario() -> tuple[object, ...]:
            first = await store.begin_on_loop(_add("c", "a", expected=0))
            second = store.begin_on_loop(_add("c", "b", expected=1))
            stale = store.begin_on_loop(_add("c", "x", expected=0))
            with pytest.raises(memoryd.ConflictError):
                await stale
            return (first, await second, await store.begin_on_loop(requests.clear("d")))

        assert asyncio.run(scenario()) == (1, 2, None)
        assert texts(store.get("c")) == ["a", "b"]

    def test_a_write_begun_on_a_loop_can_be_awaited_again_after_a_cancelled_await(
        self, store: Store
    ) -> None:
        """A task awaiting the write is cancelled at once: the write goes on, and
        awaiting it again answers its version (a run stopped with its step's write in
        flight waits for it so). Written once."""

        async def scenario() -> object:
            sending = store.begin_on_loop(_add("c", "a", expected=0))

            async def wait() -> object:
                return await sending

            waiting = asyncio.ensure_future(wait())
            await asyncio.sleep(0)  # the task is awaiting the write now
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            return await sending

        assert asyncio.run(scenario()) == 1
        assert texts(store.get("c")) == ["a"]
        assert len(store.events("c")) == 1

    def test_a_write_begun_on_a_loop_to_a_stopped_store_raises_when_awaited(
        self, store: Store
    ) -> None:
        """begin_on_loop never raises for the store's sake: StoreUnavailable comes from
        awaiting it."""
        store.add("c", [user("a")])
        store.stop()

        async def scenario() -> None:
            sending = store.begin_on_loop(_add("c", "b", expected=1))
            with pytest.raises(memoryd.StoreUnavailable):
                await sending

        asyncio.run(scenario())

    # --- pop ----------------------------------------------------------------------------------

    def test_pop_returns_and_removes_the_last_message(self, store: Store) -> None:
        """pop returns the last message and get no longer holds it."""
        store.add("c", [user("a"), assistant("b"), user("c")])
        assert store.pop("c") == user("c")
        assert texts(store.get("c")) == ["a", "b"]
        assert store.pop("c") == assistant("b")
        assert texts(store.get("c")) == ["a"]

    def test_pop_writes_a_popped_event(self, store: Store) -> None:
        """pop increments the version by one with a 'popped' event."""
        store.add("c", [user("a"), user("b")])
        store.pop("c")
        assert store.version("c") == 2
        assert [e.kind for e in store.events("c")] == ["appended", "popped"]

    def test_pop_on_empty_conversation_returns_none_and_writes_nothing(self, store: Store) -> None:
        """pop on a never-written or emptied conversation returns None, version unchanged."""
        assert store.pop("never") is None
        assert store.version("never") == 0
        store.add("c", [user("a")])
        store.pop("c")
        assert store.pop("c") is None
        assert store.version("c") == 2
        assert store.tail(after=0)[-1].kind == "popped"

    def test_add_after_pop_appends_after_the_remaining_messages(self, store: Store) -> None:
        """After a pop, new messages follow the ones that remain."""
        store.add("c", [user("a"), user("b")])
        store.pop("c")
        store.add("c", [user("c")])
        assert texts(store.get("c")) == ["a", "c"]

    # --- clear --------------------------------------------------------------------------------

    def test_clear_removes_every_message(self, store: Store) -> None:
        """After clear, get returns []."""
        store.add("c", [user("a"), user("b")])
        store.clear("c")
        assert store.get("c") == []

    def test_clear_writes_a_cleared_event(self, store: Store) -> None:
        """clear increments the version by one and the log starts at the 'cleared' marker."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        store.clear("c")
        assert store.version("c") == 3
        events = store.events("c")
        assert [(e.version, e.kind) for e in events] == [(3, "cleared")]

    def test_clear_deletes_earlier_event_payloads(self, store: Store) -> None:
        """After clear no event before the marker (nor its messages) can be read back."""
        store.add("c", [user("secret")])
        store.clear("c")
        for event in store.events("c"):
            assert event.kind != "appended"
            assert all(m.get("content") != "secret" for m in event.messages)
        with pytest.raises(ValueError):
            store.get("c", at_version=1)

    def test_clear_of_empty_conversation_writes_nothing(self, store: Store) -> None:
        """clear on a conversation holding nothing is a no-op: no event, same version."""
        store.clear("never")
        assert store.version("never") == 0
        assert store.events("never") == []
        store.add("c", [user("a")])
        store.clear("c")
        store.clear("c")
        assert store.version("c") == 2
        store.add("d", [user("a")])
        store.pop("d")
        store.clear("d")
        assert store.version("d") == 2
        assert store.tail()[-1].conversation_id == "d"
        assert store.tail()[-1].kind == "popped"

    def test_add_after_clear_continues_the_version(self, store: Store) -> None:
        """Versions keep counting across a clear; history holds only the new messages."""
        store.add("c", [user("a")])
        store.clear("c")
        assert store.add("c", [user("b")]) == 3
        assert texts(store.get("c")) == ["b"]
        assert [e.kind for e in store.events("c")] == ["cleared", "appended"]

    # --- at_version ---------------------------------------------------------------------------

    def test_at_version_returns_history_right_after_that_event(self, store: Store) -> None:
        """get(at_version=v) is the history as it was right after event v."""
        store.add("c", [user("a")])
        store.add("c", [user("b"), user("c")])
        store.pop("c")
        store.add("c", [user("d")])
        assert texts(store.get("c", at_version=1)) == ["a"]
        assert texts(store.get("c", at_version=2)) == ["a", "b", "c"]
        assert texts(store.get("c", at_version=3)) == ["a", "b"]
        assert texts(store.get("c", at_version=4)) == ["a", "b", "d"]

    def test_at_current_version_equals_get(self, store: Store) -> None:
        """get(at_version=version()) equals get()."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        assert store.get("c", at_version=store.version("c")) == store.get("c")

    def test_at_version_beyond_current_raises_value_error(self, store: Store) -> None:
        """get(at_version=v) with v above the current version raises ValueError."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError):
            store.get("c", at_version=2)

    def test_at_version_of_a_conversation_never_written_names_it(self, store: Store) -> None:
        """get(at_version=v) of a conversation never written raises ValueError naming it."""
        with pytest.raises(ValueError, match="never-written"):
            store.get("never-written", at_version=3)

    def test_at_version_before_last_clear_raises_value_error(self, store: Store) -> None:
        """History from before the last clear is gone: asking for it raises ValueError."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        store.clear("c")
        store.add("c", [user("c")])
        for gone in (1, 2):
            with pytest.raises(ValueError):
                store.get("c", at_version=gone)

    def test_at_version_of_the_clear_is_empty(self, store: Store) -> None:
        """get(at_version=<the clear's version>) returns []."""
        store.add("c", [user("a")])
        store.clear("c")
        store.add("c", [user("b")])
        assert store.get("c", at_version=2) == []
        assert texts(store.get("c", at_version=3)) == ["b"]

"""The logs a store keeps: forks between conversations, each conversation's events, the
store-wide change feed (``tail``) and the listing of conversations."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

import memoryd
from memoryd.testing._messages import assistant, system, texts, user
from memoryd.testing._store import Store
from memoryd.testing._threads import Worker

__all__ = ["LogContract"]


class LogContract:
    """``fork``, ``events``, ``tail`` and ``conversations``.

    Part of `memoryd.testing.StoreContract`, which provides the ``store`` fixture.
    """

    # --- fork ---------------------------------------------------------------------------------

    def test_fork_copies_the_source_history(self, store: Store) -> None:
        """After fork, the target holds a copy of the source's messages."""
        store.add("src", [system("s"), user("a")])
        store.add("src", [assistant("b")])
        store.fork("src", "dst")
        assert store.get("dst") == store.get("src")

    def test_fork_returns_the_target_version(self, store: Store) -> None:
        """fork returns the target's new version (one 'forked' event)."""
        store.add("src", [user("a")])
        store.add("src", [user("b")])
        assert store.fork("src", "dst") == 1
        assert store.version("dst") == 1

    def test_fork_writes_a_forked_event_on_the_target(self, store: Store) -> None:
        """The target's log holds one 'forked' event carrying the copied messages."""
        store.add("src", [user("a"), assistant("b")])
        store.fork("src", "dst")
        events = store.events("dst")
        assert [(e.version, e.kind) for e in events] == [(1, "forked")]
        assert list(events[0].messages) == [user("a"), assistant("b")]

    def test_fork_leaves_the_source_unchanged(self, store: Store) -> None:
        """fork writes nothing to the source."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        assert store.version("src") == 1
        assert [e.kind for e in store.events("src")] == ["appended"]

    def test_fork_at_version_copies_that_history(self, store: Store) -> None:
        """fork(at_version=v) copies the source history as it was at v."""
        store.add("src", [user("a")])
        store.add("src", [user("b")])
        store.add("src", [user("c")])
        store.fork("src", "dst", at_version=2)
        assert texts(store.get("dst")) == ["a", "b"]

    def test_fork_at_version_beyond_source_raises_value_error(self, store: Store) -> None:
        """fork(at_version=v) with v above the source version raises ValueError, writes nothing."""
        store.add("src", [user("a")])
        with pytest.raises(ValueError):
            store.fork("src", "dst", at_version=5)
        assert store.version("dst") == 0

    @pytest.mark.parametrize("at_version", [None, 1])
    def test_fork_of_an_unknown_conversation_raises_and_writes_nothing(
        self, store: Store, at_version: int | None
    ) -> None:
        """Forking a source never written raises UnknownConversation (a LookupError) and
        creates nothing: no target version, no listing, no change in the feed."""
        store.add("other", [user("a")])
        position = store.tail()[-1].position
        with pytest.raises(memoryd.UnknownConversation, match="never written") as caught:
            store.fork("nobody", "dst", at_version=at_version)
        assert isinstance(caught.value, LookupError)
        assert store.version("dst") == 0
        assert store.version("nobody") == 0
        assert store.conversations(include_empty=True) == ["other"]
        assert store.tail(after=position) == []

    def test_fork_into_a_target_with_messages_raises_conflict(self, store: Store) -> None:
        """A target that holds messages refuses the fork with ConflictError; nothing written."""
        store.add("src", [user("a")])
        store.add("dst", [user("mine")])
        with pytest.raises(memoryd.ConflictError):
            store.fork("src", "dst")
        assert texts(store.get("dst")) == ["mine"]
        assert store.version("dst") == 1

    def test_fork_into_a_cleared_target_is_allowed(self, store: Store) -> None:
        """A target emptied by clear holds no messages, so it accepts a fork."""
        store.add("src", [user("a")])
        store.add("dst", [user("old")])
        store.clear("dst")
        assert store.fork("src", "dst") == 3
        assert texts(store.get("dst")) == ["a"]

    def test_fork_onto_itself_raises_value_error(self, store: Store) -> None:
        """fork(x, x) raises ValueError and writes nothing."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError):
            store.fork("c", "c")
        assert store.version("c") == 1

    def test_forked_conversations_evolve_independently(self, store: Store) -> None:
        """Writes to source or target after a fork do not show in the other."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        store.add("src", [user("src only")])
        store.add("dst", [user("dst only")])
        store.pop("src")
        assert texts(store.get("src")) == ["a"]
        assert texts(store.get("dst")) == ["a", "dst only"]

    def test_fork_between_prefix_sharing_ids(self, store: Store) -> None:
        """Forking "a" into "ab" copies only "a"'s messages."""
        store.add("a", [user("from a")])
        store.add("a/b", [user("from a/b")])
        store.fork("a", "ab")
        assert texts(store.get("ab")) == ["from a"]

    # --- events -------------------------------------------------------------------------------

    def test_events_list_every_write_in_order(self, store: Store) -> None:
        """events returns one event per write, versions 1..n, with their kinds."""
        store.add("c", [user("a")])
        store.add("c", [user("b"), user("c")])
        store.pop("c")
        store.add("c", [user("d")])
        assert [(e.version, e.kind) for e in store.events("c")] == [
            (1, "appended"),
            (2, "appended"),
            (3, "popped"),
            (4, "appended"),
        ]

    def test_event_carries_messages_timestamp_and_type(self, store: Store) -> None:
        """An Event is a memoryd.Event with a tuple of messages and a time.time() stamp."""
        before = time.time()
        store.add("c", [user("a"), assistant("b")])
        after = time.time()
        (event,) = store.events("c")
        assert isinstance(event, memoryd.Event)
        assert event.version == 1
        assert event.kind == "appended"
        assert isinstance(event.messages, tuple)
        assert list(event.messages) == [user("a"), assistant("b")]
        assert isinstance(event.timestamp, float)
        assert before <= event.timestamp <= after
        assert event.idempotency_key is None

    def test_events_are_frozen(self, store: Store) -> None:
        """Assigning to an Event field raises FrozenInstanceError."""
        store.add("c", [user("a")])
        event = store.events("c")[0]
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.version = 99

    def test_events_after_returns_only_later_events(self, store: Store) -> None:
        """events(after=v) returns the events with version > v."""
        for i in range(5):
            store.add("c", [user(str(i))])
        assert [e.version for e in store.events("c", after=3)] == [4, 5]
        assert store.events("c", after=5) == []

    def test_events_limit_gives_the_oldest_and_pages_on_with_after(self, store: Store) -> None:
        """events(limit=n) returns the n oldest events after ``after``; pages read on from
        the last version of the page before add up to the whole log."""
        for i in range(5):
            store.add("c", [user(str(i))])
        assert [e.version for e in store.events("c", limit=2)] == [1, 2]
        assert [e.version for e in store.events("c", after=2, limit=2)] == [3, 4]
        assert [e.version for e in store.events("c", after=4, limit=2)] == [5]
        assert store.events("c", after=5, limit=2) == []
        assert store.events("c", limit=0) == []
        assert [e.version for e in store.events("c", limit=10**6)] == [1, 2, 3, 4, 5]
        assert store.events("nobody", limit=3) == []

    def test_events_limit_counts_from_the_first_event_a_clear_left(self, store: Store) -> None:
        """After a clear the log starts at the clear's event: a page of the log starts
        there too, wherever ``after`` points before it."""
        for i in range(3):
            store.add("c", [user(str(i))])
        store.clear("c")
        store.add("c", [user("after")])
        whole = store.events("c")
        assert store.events("c", limit=1) == whole[:1]
        assert store.events("c", after=1, limit=1) == whole[:1]
        paged, after = [], 0
        while page := store.events("c", after=after, limit=1):
            paged += page
            after = page[-1].version
        assert paged == whole

    @pytest.mark.parametrize("limit", [-1, "2", 2.0, True])
    def test_a_bad_events_limit_is_refused_naming_it(self, store: Store, limit: Any) -> None:
        """A limit that is no count is a ValueError naming ``limit``; nothing is read."""
        store.add("c", [user("a")])
        with pytest.raises(ValueError, match="limit"):
            store.events("c", limit=limit)

    # --- tail ---------------------------------------------------------------------------------

    def test_tail_of_an_empty_store_is_empty(self, store: Store) -> None:
        """A new store has no changes."""
        assert store.tail() == []

    def test_tail_positions_start_at_one_and_increase(self, store: Store) -> None:
        """Change positions are 1, 2, 3, ... in commit order."""
        for i in range(4):
            store.add(f"c{i % 2}", [user(str(i))])
        assert [c.position for c in store.tail()] == [1, 2, 3, 4]

    def test_tail_orders_changes_across_conversations(self, store: Store) -> None:
        """The global feed interleaves conversations in the order writes were made."""
        store.add("a", [user("1")])
        store.add("b", [user("2")])
        store.add("a", [user("3")])
        store.add("ab", [user("4")])
        changes = store.tail()
        assert [(c.conversation_id, c.version) for c in changes] == [
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("ab", 1),
        ]
        assert [texts(c.messages) for c in changes] == [["1"], ["2"], ["3"], ["4"]]

    def test_tail_change_carries_every_field(self, store: Store) -> None:
        """A Change is a memoryd.Change with position, id, version, kind, messages, key, time."""
        before = time.time()
        store.add("c", [user("a")], idempotency_key="k")
        after = time.time()
        (change,) = store.tail()
        assert isinstance(change, memoryd.Change)
        assert change.position == 1
        assert change.conversation_id == "c"
        assert change.version == 1
        assert change.kind == "appended"
        assert list(change.messages) == [user("a")]
        assert change.idempotency_key == "k"
        assert before <= change.timestamp <= after

    def test_tail_records_every_kind_of_write(self, store: Store) -> None:
        """pop, fork and clear appear in the feed with their kinds."""
        store.add("c", [user("a"), user("b")])
        kinds = []
        for write in (
            lambda: store.pop("c"),
            lambda: store.fork("c", "d"),
            lambda: store.clear("c"),
        ):
            last = store.tail()[-1].position
            write()
            (change,) = store.tail(after=last)
            kinds.append((change.conversation_id, change.version, change.kind))
        assert kinds == [("c", 2, "popped"), ("d", 1, "forked"), ("c", 3, "cleared")]

    def test_tail_after_excludes_earlier_positions(self, store: Store) -> None:
        """tail(after=p) returns only changes with position > p."""
        for i in range(5):
            store.add("c", [user(str(i))])
        assert [c.position for c in store.tail(after=3)] == [4, 5]
        assert store.tail(after=5) == []

    def test_tail_limit_pages_through_the_feed(self, store: Store) -> None:
        """tail(limit=n) returns at most n changes; paging with after walks all of them."""
        for i in range(7):
            store.add(f"c{i % 3}", [user(str(i))])
        assert len(store.tail(limit=3)) == 3
        seen: list[int] = []
        after = 0
        while page := store.tail(after=after, limit=3):
            assert len(page) <= 3
            seen.extend(c.position for c in page)
            after = page[-1].position
        assert seen == [1, 2, 3, 4, 5, 6, 7]

    def test_tail_with_zero_timeout_returns_empty_when_nothing_is_new(self, store: Store) -> None:
        """tail(after=last, timeout=0) returns [] at once when there is nothing newer."""
        store.add("c", [user("a")])
        assert store.tail(after=1, timeout=0.0) == []

    def test_tail_blocks_until_a_change_arrives(self, store: Store) -> None:
        """tail(timeout=5) waiting for a change returns it once another thread writes."""
        store.add("c", [user("before")])

        def write_later() -> None:
            time.sleep(0.2)
            store.add("late", [user("late")])

        writer = Worker(write_later)
        writer.start()
        changes = store.tail(after=1, timeout=5.0)
        writer.outcome()
        assert [(c.position, c.conversation_id) for c in changes] == [(2, "late")]

    def test_tail_times_out_with_an_empty_list(self, store: Store) -> None:
        """tail(timeout=t) with nothing new returns [] once the timeout passes."""
        store.add("c", [user("a")])
        assert store.tail(after=1, timeout=0.1) == []

    # --- conversations listing ----------------------------------------------------------------

    def test_conversations_are_listed_sorted(self, store: Store) -> None:
        """conversations() lists every conversation holding messages, sorted."""
        ids = ["b", "a", "a\u00e9", "ab", "a/b", "\U0001f600", "Z"]
        for cid in ids:
            store.add(cid, [user(cid)])
        assert store.conversations() == sorted(ids)

    def test_conversations_prefix_filters(self, store: Store) -> None:
        """conversations(prefix=p) lists only ids starting with p."""
        for cid in ("a", "ab", "a/b", "b", "ba", "A"):
            store.add(cid, [user(cid)])
        assert store.conversations(prefix="a") == ["a", "a/b", "ab"]
        assert store.conversations(prefix="ab") == ["ab"]
        assert store.conversations(prefix="zzz") == []

    def test_conversations_after_is_exclusive(self, store: Store) -> None:
        """conversations(after=x) starts strictly after x."""
        for cid in ("a", "b", "c", "d"):
            store.add(cid, [user(cid)])
        assert store.conversations(after="b") == ["c", "d"]
        assert store.conversations(after="bb") == ["c", "d"]

    def test_conversations_limit_paging_walks_all(self, store: Store) -> None:
        """Paging with limit and after visits every conversation exactly once, in order."""
        ids = [f"conv-{i:02d}" for i in range(11)] + ["other"]
        for cid in ids:
            store.add(cid, [user(cid)])
        seen: list[str] = []
        after: str | None = None
        while page := store.conversations(prefix="conv-", after=after, limit=4):
            assert len(page) <= 4
            seen.extend(page)
            after = page[-1]
        assert seen == [f"conv-{i:02d}" for i in range(11)]

    def test_emptied_conversations_are_not_listed(self, store: Store) -> None:
        """Cleared conversations, and ones popped to empty, are not listed."""
        for cid in ("cleared", "kept", "popped"):
            store.add(cid, [user(cid)])
        store.clear("cleared")
        store.pop("popped")
        assert store.conversations() == ["kept"]

    def test_include_empty_lists_every_conversation_with_events(self, store: Store) -> None:
        """include_empty=True adds cleared, popped-to-empty and memo-only logs, sorted, paged."""
        for cid in ("cleared", "kept", "popped"):
            store.add(cid, [user(cid)])
        store.clear("cleared")
        store.pop("popped")
        store.record("memo-only", "memo", data={"note": "no messages here"})
        assert store.conversations() == ["kept"]
        every = ["cleared", "kept", "memo-only", "popped"]
        assert store.conversations(include_empty=True) == every
        assert store.conversations(include_empty=True, prefix="m") == ["memo-only"]
        assert store.conversations(include_empty=True, after="kept", limit=1) == ["memo-only"]
        assert "never-written" not in store.conversations(include_empty=True)

    def test_include_empty_must_be_a_bool(self, store: Store) -> None:
        """A non-bool include_empty is refused, naming the argument."""
        with pytest.raises(ValueError, match="include_empty"):
            store.conversations(include_empty="yes")  # type: ignore[arg-type]

    def test_forked_target_is_listed(self, store: Store) -> None:
        """A fork's target holds messages, so it is listed."""
        store.add("src", [user("a")])
        store.fork("src", "dst")
        assert store.conversations() == ["dst", "src"]

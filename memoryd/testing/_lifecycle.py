"""A store's life: concurrent writers, crashes and restarts under supervision, its
registered name, stop and shutdown, and its counters."""

from __future__ import annotations

import functools
import threading
import uuid

import pytest

import memoryd
import supervisors
from memoryd.testing._messages import texts, user
from memoryd.testing._store import Store, StoreFactory
from memoryd.testing._threads import Worker

__all__ = ["LifecycleContract"]


class LifecycleContract:
    """Concurrency, crash and restart, the name registry, stop, shutdown and ``stats``.

    Part of `memoryd.testing.StoreContract`, which provides the ``store`` fixture and
    whose subclass provides ``make_store``.
    """

    # --- concurrency --------------------------------------------------------------------------

    def test_concurrent_adds_lose_nothing_and_keep_each_threads_order(self, store: Store) -> None:
        """8 threads x 500 adds: every add lands once, versions unique, per-thread order kept."""
        threads, per_thread = 8, 500
        barrier = threading.Barrier(threads)

        def writer(t: int) -> list[int]:
            barrier.wait()
            return [store.add("shared", [user(f"t{t}-{i}")]) for i in range(per_thread)]

        workers = [Worker(functools.partial(writer, t), name=f"writer-{t}") for t in range(threads)]
        for w in workers:
            w.start()
        versions = {t: w.outcome(timeout=120) for t, w in enumerate(workers)}

        total = threads * per_thread
        all_versions = [v for vs in versions.values() for v in vs]
        assert sorted(all_versions) == list(range(1, total + 1))
        assert store.version("shared") == total
        history = texts(store.get("shared"))
        assert len(history) == total
        for t in range(threads):
            assert versions[t] == sorted(versions[t])
            mine = [m for m in history if m.startswith(f"t{t}-")]
            assert mine == [f"t{t}-{i}" for i in range(per_thread)]
        by_version = {e.version: texts(e.messages) for e in store.events("shared")}
        for t in range(threads):
            for i, v in enumerate(versions[t]):
                assert by_version[v] == [f"t{t}-{i}"]

    def test_write_is_visible_to_reads_from_another_thread(self, store: Store) -> None:
        """Once add returned, a get from any other thread sees it (read-your-writes)."""
        for i in range(100):
            version = store.add("c", [user(str(i))])
            seen = Worker(lambda: (store.version("c"), texts(store.get("c", limit=1))))
            seen.start()
            assert seen.outcome() == (version, [str(i)])

    # --- crash, restart, registry -------------------------------------------------------------

    def test_acknowledged_writes_survive_an_actor_crash(self, store: Store) -> None:
        """After supervisors.kill, the restarted store still holds every acknowledged write."""
        for i in range(20):
            store.add(f"c{i % 3}", [user(str(i))], idempotency_key=f"k{i}")
        before = {cid: store.get(cid) for cid in ("c0", "c1", "c2")}
        supervisors.kill(store.name)
        assert {cid: store.get(cid) for cid in ("c0", "c1", "c2")} == before
        assert store.version("c0") == 7

    def test_handle_keeps_working_after_a_crash(self, store: Store) -> None:
        """The same handle writes to the restarted store; versions continue."""
        store.add("c", [user("a")])
        supervisors.kill(store.name)
        assert store.add("c", [user("b")]) == 2
        assert texts(store.get("c")) == ["a", "b"]

    def test_idempotency_keys_survive_a_crash(self, store: Store) -> None:
        """A key acknowledged before a crash is still deduplicated after it."""
        store.add("c", [user("a")], idempotency_key="k1")
        supervisors.kill(store.name)
        assert store.add("c", [user("a")], idempotency_key="k1") == 1
        assert store.version("c") == 1

    def test_tail_positions_continue_after_a_crash(self, store: Store) -> None:
        """Feed positions keep increasing across a restart."""
        store.add("c", [user("a")])
        store.add("c", [user("b")])
        supervisors.kill(store.name)
        store.add("c", [user("c")])
        assert [c.position for c in store.tail()] == [1, 2, 3]

    def test_store_keeps_its_name_after_a_crash(self, store: Store) -> None:
        """After a crash the restarted store is registered under the same name."""
        store.add("c", [user("a")])
        supervisors.kill(store.name)
        again = memoryd.whereis(store.name)
        assert again is not None
        assert texts(again.get("c")) == ["a"]

    def test_store_is_registered_under_its_name(self, make_store: StoreFactory) -> None:
        """whereis(name) returns a handle to the same store."""
        name = f"contract-{uuid.uuid4().hex[:8]}"
        store = make_store(name=name)
        assert store.name == name
        other = memoryd.whereis(name)
        assert other is not None
        store.add("c", [user("a")])
        assert texts(other.get("c")) == ["a"]

    def test_whereis_unknown_name_returns_none(self, store: Store) -> None:
        """whereis of a name nobody registered returns None."""
        assert memoryd.whereis(f"nobody-{uuid.uuid4().hex}") is None

    def test_starting_with_a_taken_name_raises_already_started(
        self, make_store: StoreFactory
    ) -> None:
        """A second store under a name in use raises AlreadyStarted; the first keeps working."""
        first = make_store(name="taken")
        first.add("c", [user("a")])
        with pytest.raises(memoryd.AlreadyStarted):
            make_store(name="taken")
        assert texts(first.get("c")) == ["a"]

    def test_stopped_store_raises_store_unavailable(self, store: Store) -> None:
        """Calls on a stopped store raise StoreUnavailable."""
        store.add("c", [user("a")])
        store.stop()
        with pytest.raises(memoryd.StoreUnavailable):
            store.get("c")
        with pytest.raises(memoryd.StoreUnavailable):
            store.add("c", [user("b")])

    def test_stopped_store_frees_its_name(self, make_store: StoreFactory) -> None:
        """After stop, whereis(name) is None and the name can be started again."""
        store = make_store(name="reusable")
        store.stop()
        assert memoryd.whereis("reusable") is None
        again = make_store(name="reusable")
        assert again.version("c") == 0

    def test_shutdown_stops_every_store(self, make_store: StoreFactory) -> None:
        """memoryd.shutdown() stops all stores; the next start works on a fresh tree."""
        one, two = make_store(name="one"), make_store(name="two")
        memoryd.shutdown()
        for handle in (one, two):
            with pytest.raises(memoryd.StoreUnavailable):
                handle.version("c")
        assert memoryd.whereis("one") is None
        fresh = make_store(name="one")
        assert fresh.add("c", [user("a")]) == 1

    # --- stats --------------------------------------------------------------------------------

    def test_a_store_that_takes_writes_does_not_say_it_refuses_them(self, store: Store) -> None:
        """``refuses_writes()`` is a hint agents read before each tool step: a store that
        takes writes answers False, before and after one (a backend that cannot know
        keeps the base class's False)."""
        assert store.refuses_writes() is False
        store.add("c", [user("x")])
        assert store.refuses_writes() is False

    def test_stats_counts_conversations_and_events(self, store: Store) -> None:
        """stats() reports at least 'conversations' and 'events'."""
        store.add("a", [user("1")])
        store.add("a", [user("2")])
        store.add("b", [user("3"), user("4")])
        stats = store.stats()
        assert stats["conversations"] == 2
        assert stats["events"] == 3

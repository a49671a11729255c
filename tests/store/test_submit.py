"""`StoreHandle.submit`: the awaitable write path that answers an event loop directly."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import resource
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages as msgs
from memoryd.errors import ConflictError, InvalidMessage, WriteTimeout
from memoryd.store import actor as store_actor
from memoryd.store import requests
from memoryd.store.handle import StoreHandle
from memoryd.store.requests import Add
from supervisors import kill, whereis
from tests.helpers import wait_until


@pytest.fixture(params=["lmdb", "ephemeral"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHandle]:
    handle: StoreHandle
    if request.param == "lmdb":
        handle = memoryd.LmdbStore.start(tmp_path / "data", name="submit-test", call_timeout_s=2.0)
    else:
        handle = memoryd.EphemeralStore.start(name="submit-test", call_timeout_s=2.0)
    yield handle
    handle.stop()


def _add(
    store: StoreHandle, cid: str, text: str, *, key: str | None = None, expected: int | None = None
) -> Add:
    return requests.add(
        cid,
        [msgs.user(text)],
        idempotency_key=key,
        expected_version=expected,
        max_bytes=store.max_message_bytes,
    )


def test_submitted_writes_return_what_the_methods_return(store: StoreHandle) -> None:
    """add -> version, pop -> the message, clear -> None, fork -> the target's version."""

    async def main() -> list[object]:
        first = await store.submit(_add(store, "c", "one"))
        second = await store.submit(_add(store, "c", "two"))
        popped = await store.submit(requests.pop("c"))
        forked = await store.submit(requests.fork("c", "d", at_version=None))
        cleared = await store.submit(requests.clear("c"))
        return [first, second, popped, forked, cleared]

    assert asyncio.run(main()) == [1, 2, msgs.user("two"), 1, None]
    assert store.get("d") == [msgs.user("one")]
    assert store.get("c") == []


def test_a_write_begun_on_a_loop_is_sent_before_it_is_awaited(store: StoreHandle) -> None:
    """begin_on_loop hands the write to the actor at once, not from a task: while the
    loop is held (no callback runs), the write commits; awaiting it then answers."""

    async def main() -> int:
        sending = store.begin_on_loop(_add(store, "c", "one"))
        wait_until(lambda: store.version("c") == 1, timeout=10)  # blocks the loop
        return int(await sending)

    assert asyncio.run(main()) == 1
    assert store.get("c") == [msgs.user("one")]


def test_writes_begun_together_on_a_loop_reach_a_store_actor_in_order(
    store: StoreHandle,
) -> None:
    """Twenty adds begun together, each at the version the one before it makes: a store
    actor takes them in the order begun, so every one is written (a reordering would
    refuse some with ConflictError)."""

    async def main() -> list[int]:
        sending = [store.begin_on_loop(_add(store, "c", f"m{n}", expected=n)) for n in range(20)]
        return [int(await s) for s in sending]

    assert asyncio.run(main()) == list(range(1, 21))
    assert [m["content"] for m in store.get("c")] == [f"m{n}" for n in range(20)]


def test_errors_arrive_at_the_awaiting_task(store: StoreHandle) -> None:
    """A conflict raised in the actor reaches the awaiter; a retried key writes once."""

    async def main() -> None:
        await store.submit(_add(store, "c", "one", key="k1"))
        again = await store.submit(_add(store, "c", "one", key="k1"))
        assert again == 1
        with pytest.raises(ConflictError):
            await store.submit(_add(store, "c", "late", expected=0))

    asyncio.run(main())
    assert store.get("c") == [msgs.user("one")]


def test_bad_input_is_refused_before_anything_is_sent(store: StoreHandle) -> None:
    """The builders raise in the caller; nothing reaches the store."""
    with pytest.raises(InvalidMessage):
        requests.add(
            "c",
            [{"role": "nobody"}],
            idempotency_key=None,
            expected_version=None,
            max_bytes=store.max_message_bytes,
        )
    with pytest.raises(ValueError, match="itself"):
        requests.fork("c", "c", at_version=None)
    assert store.version("c") == 0


def test_a_checked_batch_is_sent_as_it_is_within_the_store_limit(store: StoreHandle) -> None:
    """requests.add sends a CheckedMessages itself, and still applies the store's size limit."""
    checked = msgs.check([msgs.user("small")], max_bytes=None)
    request = requests.add(
        "c", checked, idempotency_key=None, expected_version=None, max_bytes=1000
    )
    assert request.messages is checked
    assert asyncio.run(store.submit(request)) == 1
    big = msgs.check([msgs.user("x" * 2000)], max_bytes=None)
    with pytest.raises(InvalidMessage, match="the limit is 1000"):
        requests.add("c", big, idempotency_key=None, expected_version=None, max_bytes=1000)
    assert store.get("c") == [msgs.user("small")]


def test_concurrent_submits_of_one_loop_share_commits(store: StoreHandle) -> None:
    """Requests of one loop thread are separate writers: they land once each, batched."""
    before = store.stats()

    async def main() -> list[int]:
        return await asyncio.gather(  # type: ignore[no-any-return]
            *(store.submit(_add(store, f"c{i % 10}", f"m{i}")) for i in range(200))
        )

    versions = asyncio.run(main())
    assert sorted(versions) == sorted(v for _ in range(10) for v in range(1, 21))
    after = store.stats()
    commits = after["commits"] - before["commits"]
    assert commits < 200  # at least some requests shared a commit
    assert sum(len(store.get(f"c{i}")) for i in range(10)) == 200


def test_a_write_to_a_restarting_store_lands(store: StoreHandle) -> None:
    """Killed actor: the write waits for the restart (thread path) and lands once."""
    kill(store.name, "test")

    async def main() -> object:
        return await store.submit(_add(store, "c", "after the crash"))

    assert asyncio.run(main()) == 1
    assert store.get("c") == [msgs.user("after the crash")]
    assert whereis(store.name) is not None


@contextlib.contextmanager
def _commits_held(store: StoreHandle) -> Iterator[threading.Event]:
    """Hold every commit of ``store`` (for at most 10 s) until the yielded event is set;
    on the way out the event is set and the hook removed."""
    release = threading.Event()

    def hold(point: str, name: str) -> None:
        if point == "before_commit" and name == store.name:
            release.wait(10)

    store_actor.fault_hook = hold
    try:
        yield release
    finally:
        release.set()
        store_actor.fault_hook = None


def test_a_held_commit_times_out_without_blocking_the_loop(store: StoreHandle) -> None:
    """WriteTimeout at the handle's deadline; the loop kept turning all along."""
    with _commits_held(store) as release:

        async def main() -> tuple[int, bool]:
            ticks = 0
            write = asyncio.create_task(store.submit(_add(store, "c", "held")))
            while not write.done():
                await asyncio.sleep(0.01)
                ticks += 1
            held_still = not release.is_set()  # the answer came before the hold ended
            with pytest.raises(WriteTimeout):
                write.result()
            return ticks, held_still

        ticks, held_still = asyncio.run(main())
    assert held_still  # the handle's 2 s deadline answered, not the 10 s hold
    assert ticks > 50  # the loop kept turning while the write waited


def test_a_begun_write_gets_its_whole_deadline_once_waited_for() -> None:
    """The deadline of a begun write counts from ``result()``: a caller busy for longer
    than the handle's 0.3 s deadline before it waits, on a commit held for 0.5 s, still
    gets the version (counted from ``begin``, the wait would have timed out)."""
    store = memoryd.EphemeralStore.start(name="begun-deadline", call_timeout_s=0.3)
    with _commits_held(store) as release:
        pending = store.begin(_add(store, "c", "held"))
        threading.Timer(0.5, release.set).start()
        time.sleep(0.4)  # the caller's own work, past the 0.3 s deadline
        assert pending.result() == 1
    assert [m["content"] for m in store.get("c")] == ["held"]


def test_a_lone_fast_writer_is_never_held_back(store: StoreHandle) -> None:
    """One writer awaiting each write in turn: no batch waits for a second writer.

    The awaiting loop sends its next write the moment it is answered; counted after
    the answers, that write looked like a second writer and every next batch lingered.
    """

    async def main() -> None:
        for i in range(200):
            await store.submit(_add(store, "c", f"m{i}"))

    before = store.stats()["held_batches"]
    asyncio.run(main())
    assert store.stats()["held_batches"] == before
    assert store.version("c") == 200


def test_concurrent_writers_are_waited_for(store: StoreHandle) -> None:
    """The counter counts: eight concurrent writers do make batches wait for each other."""

    def write(i: int) -> None:
        for n in range(100):
            store.add(f"w{i}", [msgs.user(f"m{n}")])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.stats()["held_batches"] > 0
    assert sum(store.version(f"w{i}") for i in range(8)) == 800


def test_only_small_reads_of_an_open_local_store_run_inline(store: StoreHandle) -> None:
    """reads_inline: up to INLINE_READ_LIMIT records while open; never all, never stopped."""
    from memoryd.store.handle import INLINE_READ_LIMIT

    assert store.reads_inline(50)
    assert store.reads_inline(INLINE_READ_LIMIT)
    assert not store.reads_inline(INLINE_READ_LIMIT + 1)
    assert not store.reads_inline(None)
    assert not store.reads_inline(-1)
    store.stop()
    assert not store.reads_inline(50)


class _CountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the wake-ups other threads ask of it: calls of
    ``call_soon_threadsafe``, and runs of the callbacks of descriptors it watches.
    """

    def __init__(self) -> None:
        super().__init__()
        self.threadsafe_calls = 0
        self.fd_wakes = 0

    def call_soon_threadsafe(self, callback: Any, *args: Any, context: Any = None) -> Any:
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(callback, *args, context=context)

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:
        def counted(*args: Any) -> None:
            self.fd_wakes += 1
            callback(*args)

        super().add_reader(fd, counted, *args)

    @property
    def wakes(self) -> int:
        return self.threadsafe_calls + self.fd_wakes


class _ReaderlessLoop(_CountingLoop):
    """A loop that watches no descriptors: its ``add_reader`` is
    `asyncio.AbstractEventLoop`'s own, which refuses (as Windows' proactor loop's does,
    and as a loop written for a GUI toolkit may)."""

    add_reader = asyncio.AbstractEventLoop.add_reader


class _WatchlessLoop(_CountingLoop):
    """A loop that can watch no more descriptors: ``add_reader`` raises ``OSError``
    (``ENOSPC``), as epoll does once a user's ``max_user_watches`` are all taken."""

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device (epoll watches)")


def test_writes_of_one_loop_iteration_share_one_hand_off_and_one_commit(
    store: StoreHandle,
) -> None:
    """Writes submitted in one loop iteration reach the actor as one batch: one commit.

    The interpreter switches threads as often as it can, so an actor handed the writes
    one by one would start committing before the last of them arrived.
    """

    async def main() -> list[int]:
        return await asyncio.gather(*(store.submit(_add(store, f"c{i}", "x")) for i in range(20)))

    before = store.stats()["commits"]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        results = asyncio.run(main())
    finally:
        sys.setswitchinterval(switch)
    assert results == [1] * 20

    stats = store.stats()
    assert stats["commits"] - before == 1
    assert stats["appends"] == 20


def _open_fds() -> set[str]:
    """This process's open descriptors, after collecting garbage. A test compares sets,
    never counts: a descriptor another thread or a finaliser closes meanwhile must not
    read as one this test's code failed to open, nor hide one it left open."""
    gc.collect()
    return set(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def _no_descriptor_left() -> Iterator[None]:
    """Lower this process's descriptor limit to its lowest free descriptor number, so the
    kernel refuses every new descriptor (``EMFILE``) until the block ends."""
    probe = os.dup(0)
    os.close(probe)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (probe, hard))
    try:
        with pytest.raises(OSError, match="Too many open files"):
            os.close(os.dup(0))
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    ("descriptors", "loop_type"),
    [
        (True, _CountingLoop),
        (False, _CountingLoop),
        (False, _ReaderlessLoop),
        (False, _WatchlessLoop),
    ],
    ids=["eventfd", "none-left", "loop-watches-none", "no-watch-left"],
)
def test_the_answers_to_one_batch_wake_the_loop_once(
    store: StoreHandle, descriptors: bool, loop_type: type[_CountingLoop]
) -> None:
    """Each committed batch wakes the loop once, however many of its writes it answers:
    twenty writes cost as many cross-thread wake-ups as commits, not twenty. The loop is
    woken through an eventfd it watches (no ``call_soon_threadsafe``); when the process
    has no descriptor left for one, or the loop watches no descriptors, its writes still
    succeed, woken with ``call_soon_threadsafe``, and no eventfd is left open."""
    loop = loop_type()
    open_before = _open_fds()
    try:
        before = []

        async def main() -> list[int]:
            await store.submit(_add(store, "warm", "x"))
            before.append(store.stats()["commits"])
            loop.threadsafe_calls = loop.fd_wakes = 0
            return await asyncio.gather(
                *(store.submit(_add(store, f"c{i}", "x")) for i in range(20))
            )

        no_eventfd = loop_type is _CountingLoop and not descriptors
        with _no_descriptor_left() if no_eventfd else contextlib.nullcontext():
            assert loop.run_until_complete(main()) == [1] * 20
        if loop_type in (_ReaderlessLoop, _WatchlessLoop):
            assert _open_fds() <= open_before  # its eventfd was closed
        commits = store.stats()["commits"] - before[0]
        # the actor may split the hand-off over a commit or two, never one per write
        assert commits < 20
        assert loop.wakes == commits
        assert (loop.fd_wakes if descriptors else loop.threadsafe_calls) == commits
    finally:
        loop.close()


def test_a_platform_without_eventfd_wakes_the_loop_with_call_soon_threadsafe(
    store: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``os.eventfd`` does not exist (every platform but Linux), a loop's writes
    succeed all the same, each committed batch waking the loop by
    ``call_soon_threadsafe``, and no descriptor is opened for it."""
    monkeypatch.delattr(os, "eventfd")
    loop = _CountingLoop()
    open_before = _open_fds()
    try:

        async def main() -> list[int]:
            await store.submit(_add(store, "warm", "x"))
            return await asyncio.gather(
                *(store.submit(_add(store, f"c{i}", "x")) for i in range(5))
            )

        assert loop.run_until_complete(main()) == [1] * 5
        assert loop.fd_wakes == 0 and loop.threadsafe_calls >= 1
        assert _open_fds() <= open_before
    finally:
        loop.close()


def test_a_lone_write_from_a_loop_is_committed_without_company(store: StoreHandle) -> None:
    """A single write is handed over at the end of its iteration and answered by itself."""

    async def main() -> int:
        return await store.submit(_add(store, "solo", "x"))

    assert asyncio.run(main()) == 1
    assert store.stats()["commits"] == 1


def test_a_lone_write_reaches_the_store_before_the_loop_turns_again(store: StoreHandle) -> None:
    """A write made when nothing else is ready in its loop is handed over at once: it
    commits while its loop is still busy in the step that made it."""

    async def main() -> int:
        steps = store.submit(_add(store, "c", "alone")).__await__()
        pending = steps.send(None)  # runs the write path up to its wait for the answer
        wait_until(lambda: store.version("c") == 1)  # the loop does not turn meanwhile
        pending._asyncio_future_blocking = False  # taken, as a task takes it
        await pending
        try:
            steps.send(None)
        except StopIteration as done:
            return int(done.value)
        raise AssertionError("the write waited twice")

    assert asyncio.run(main()) == 1


class _TimerCountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the timers armed on it."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def test_a_loop_watches_its_writes_with_one_timer_not_one_per_write(store: StoreHandle) -> None:
    """Two hundred writes awaited one by one arm the deadline watchdog about once per
    slice of time they took (it looks every 50 ms), not once per write."""
    loop = _TimerCountingLoop()
    try:

        async def main() -> None:
            for i in range(200):
                await store.submit(_add(store, "c", f"m{i}"))

        started = time.monotonic()
        loop.run_until_complete(main())
        elapsed = time.monotonic() - started
    finally:
        loop.close()
    assert store.version("c") == 200
    assert loop.timers <= 2 + 2 * elapsed / 0.05


def test_a_dropped_loop_is_not_kept_alive_by_its_writes(store: StoreHandle) -> None:
    """The link a loop's writes use does not outlive the loop."""
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(store.submit(_add(store, "c", "x"))) == 1
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None


def test_loop_writes_of_a_batch_never_attempted_are_sent_again_after_the_restart(
    store: StoreHandle,
) -> None:
    """The actor crashes before committing a loop's batch: nobody answers, and the loop's
    watchdog, finding the actor dead, sends each write again to the restarted store,
    where each lands once."""
    crashed: list[str] = []

    def crash_once(point: str, name: str) -> None:
        if point == "before_commit" and name == store.name and not crashed:
            crashed.append(name)
            raise RuntimeError("injected: crash before the commit")

    store_actor.fault_hook = crash_once
    try:

        async def main() -> list[int]:
            return await asyncio.gather(
                *(store.submit(_add(store, f"c{i}", "once")) for i in range(5))
            )

        assert asyncio.run(main()) == [1] * 5
    finally:
        store_actor.fault_hook = None
    assert crashed
    assert [store.get(f"c{i}") for i in range(5)] == [[msgs.user("once")]] * 5


def test_every_held_loop_write_times_out(store: StoreHandle) -> None:
    """Several writes in flight on one loop, one watchdog: each gets WriteTimeout."""
    with _commits_held(store):

        async def main() -> list[BaseException | int]:
            return await asyncio.gather(
                *(store.submit(_add(store, f"c{i}", "held")) for i in range(3)),
                return_exceptions=True,
            )

        outcomes = asyncio.run(main())
    assert [type(o) for o in outcomes] == [WriteTimeout] * 3


def _write_in_own_loop(store: StoreHandle, cid: str, count: int, out: list[int]) -> None:
    async def main() -> None:
        for n in range(count):
            out.append(await store.submit(_add(store, cid, f"m{n}")))

    asyncio.run(main())


def test_loops_in_many_threads_all_get_their_answers(store: StoreHandle) -> None:
    """Eight threads, each awaiting writes on a loop of its own: the loops a batch
    answered are woken one by another, and every write is answered, in order."""
    outs: list[list[int]] = [[] for _ in range(8)]
    threads = [
        threading.Thread(target=_write_in_own_loop, args=(store, f"w{i}", 50, outs[i]))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert outs == [list(range(1, 51))] * 8


def test_a_loop_that_never_passes_its_turn_delays_no_other_loop(store: StoreHandle) -> None:
    """Three loops answered by one batch: the first is busy in a long callback when its
    turn to wake comes, and does not pass the turn on; the other two still get their
    answers (their own watchdogs deliver them) before the first loop is free again."""
    go, hold_a, a_sent = threading.Event(), threading.Event(), threading.Event()
    held: list[str] = []

    def hold_first_commit(point: str, name: str) -> None:
        if point == "before_commit" and name == store.name and not held:
            held.append(name)
            go.wait(10)

    results: dict[str, object] = {}

    def loop_a() -> None:
        async def main() -> None:
            write = asyncio.ensure_future(store.submit(_add(store, "a", "x")))
            while _queued(store) < 1:  # a's write is first in the inbox
                await asyncio.sleep(0)
            a_sent.set()
            hold_a.wait(60)  # the loop is running, but busy: it cannot pass its turn on
            results["a"] = await write

        asyncio.run(main())

    def loop_other(cid: str) -> None:
        results[cid] = asyncio.run(store.submit(_add(store, cid, "x")))

    store_actor.fault_hook = hold_first_commit
    try:
        first = threading.Thread(target=store.add, args=("first", [msgs.user("x")]))
        first.start()
        wait_until(lambda: held)
        commits_before = store.stats()["commits"]
        a = threading.Thread(target=loop_a)
        a.start()
        assert a_sent.wait(10)
        others = [threading.Thread(target=loop_other, args=(cid,)) for cid in ("b", "c")]
        for thread in others:
            thread.start()
        wait_until(lambda: _queued(store) == 3)
        go.set()
        for thread in others:
            thread.join(5)
        delivered_while_a_was_busy = not any(thread.is_alive() for thread in others)
        hold_a.set()
        a.join(10)
        first.join(10)
    finally:
        go.set()
        hold_a.set()
        store_actor.fault_hook = None
    assert delivered_while_a_was_busy
    assert results == {"a": 1, "b": 1, "c": 1}
    assert store.stats()["commits"] - commits_before == 2  # the held one, then a, b, c


def _queued(store: StoreHandle) -> int:
    """Writes waiting in the store actor's inbox."""
    ref = whereis(store.name)
    assert ref is not None
    inbox = ref.actor_inbox
    assert isinstance(inbox, store_actor._Inbox)
    return inbox.writes()


def test_dropped_loops_leave_no_descriptor_open(store: StoreHandle) -> None:
    """Whatever a loop's writes use to wake it is released with the loop."""

    async def write(i: int) -> int:
        return await store.submit(_add(store, f"c{i}", "x"))

    asyncio.run(write(-1))  # the first loop may load what stays loaded
    gc.collect()
    before = _open_fds()
    for i in range(20):
        assert asyncio.run(write(i)) == 1
    gc.collect()
    assert _open_fds() <= before

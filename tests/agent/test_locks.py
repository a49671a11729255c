"""Per-conversation locks and active runs (memoryd.agent.locks): one run id runs once at
a time in a process, runs on one conversation take turns, and nothing is left behind."""

from __future__ import annotations

import threading

import pytest

from memoryd.agent import locks
from memoryd.agent.locks import active_runs, conversation_lock, run_active, run_turn


def _idle() -> bool:
    return not locks._locks and not locks._active


def test_run_turn_marks_the_run_active_and_cleans_up_after() -> None:
    """Inside the block the run is listed as active; after it nothing remains."""
    with run_turn("r1", ("store", "c")):
        assert "r1" in active_runs()
    assert "r1" not in active_runs()
    assert _idle()


def test_run_turn_refuses_a_run_already_running_and_leaves_the_first_alone() -> None:
    """The same run id twice: the second entry fails with ValueError, holding nothing."""
    with run_turn("r1", ("store", "c")):
        with (
            pytest.raises(ValueError, match="still running in this process"),
            run_turn("r1", ("store", "other")),
        ):
            pass  # pragma: no cover - never entered
        with pytest.raises(ValueError, match="still running in this process"), run_active("r1"):
            pass  # pragma: no cover - never entered
        assert "r1" in active_runs()
        assert set(locks._locks) == {("store", "c")}
    assert _idle()


def test_run_turn_releases_everything_when_the_block_raises() -> None:
    """An exception inside the block still frees the lock and the run id."""
    with pytest.raises(RuntimeError), run_turn("r1", ("store", "c")):
        raise RuntimeError("boom")
    assert _idle()
    with run_turn("r1", ("store", "c")):  # usable again at once
        pass


def test_runs_on_one_conversation_take_turns() -> None:
    """A second run on the same conversation waits until the first leaves its block."""
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with run_turn("a", ("store", "c")):
            order.append("a in")
            inside.set()
            release.wait(5)
            order.append("a out")

    def second() -> None:
        with run_turn("b", ("store", "c")):
            order.append("b in")

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(5)
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.2)  # b cannot get in while a holds the conversation
    assert order == ["a in"]
    assert locks._locks[("store", "c")].users == 2
    release.set()
    t1.join(5)
    t2.join(5)
    assert order == ["a in", "a out", "b in"]
    assert _idle()


def test_runs_on_different_conversations_run_at_once() -> None:
    """Holding one conversation's lock does not keep a run off another conversation."""
    with run_turn("a", ("store", "c1")):
        entered = threading.Event()

        def other() -> None:
            with run_turn("b", ("store", "c2")):
                entered.set()

        thread = threading.Thread(target=other)
        thread.start()
        assert entered.wait(5)
        thread.join(5)
    assert _idle()


def test_conversation_lock_alone_is_shared_with_run_turn() -> None:
    """`conversation_lock` (a resume's claim) and `run_turn` guard the same lock."""
    with conversation_lock(("store", "c")):
        got = threading.Event()

        def run() -> None:
            with run_turn("r", ("store", "c")):
                got.set()

        thread = threading.Thread(target=run)
        thread.start()
        assert not got.wait(0.2)
    thread.join(5)
    assert got.is_set()
    assert _idle()


def test_conversations_sharing_a_guard_stripe_keep_their_own_locks() -> None:
    """Two keys of one stripe (1 and 1 + stripes hash alike modulo the stripes): holding
    one does not hold the other, and a second holder of the first waits for it."""
    first, second = 1, 1 + locks._STRIPES
    assert locks._guard(first) is locks._guard(second)
    entered = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with conversation_lock(first):
            entered.set()
            release.wait(10)
            order.append("holder leaves")

    def waiter() -> None:
        with conversation_lock(first):
            order.append("waiter enters")

    thread = threading.Thread(target=holder)
    thread.start()
    assert entered.wait(10)
    with run_turn("r-other", second):  # the same stripe, another key: not held
        order.append("other key")
    blocked = threading.Thread(target=waiter)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # waits for the holder
    release.set()
    thread.join(10)
    blocked.join(10)
    assert order == ["other key", "holder leaves", "waiter enters"]
    assert _idle()


def _race(run_id: str, threads: int) -> tuple[int, int]:
    """``threads`` threads claim ``run_id`` at once; the winner holds it until every
    other was refused. How many entered, how many were refused."""
    start = threading.Barrier(threads)
    entered: list[int] = []
    refused: list[int] = []
    done = threading.Event()

    def claim(n: int) -> None:
        start.wait(10)
        try:
            with run_active(run_id):
                entered.append(n)
                done.wait(10)
        except ValueError:
            refused.append(n)
            if len(refused) == threads - 1:
                done.set()

    running = [threading.Thread(target=claim, args=(n,)) for n in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(10)
    return len(entered), len(refused)


def test_many_threads_claiming_one_run_id_let_exactly_one_in() -> None:
    """The active-run claim needs no guard, yet of 16 threads racing for one run id at a
    time exactly one enters, in every one of 200 rounds."""
    for round_ in range(200):
        assert _race(f"race-{round_}", 16) == (1, 15)
    assert _idle()

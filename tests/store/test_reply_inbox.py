"""The write path's hand-over parts: `Reply` (one answer per write) and the actor inbox."""

from __future__ import annotations

import threading
import time

import pytest

from memoryd.errors import ConflictError
from memoryd.store.actor import _Inbox
from memoryd.store.reply import Reply


def test_a_reply_hands_over_its_value_across_threads() -> None:
    """The waiter sleeps until the other thread answers, then sees the value."""
    reply = Reply()
    answered = threading.Timer(0.05, reply.set, args=(7,))
    answered.start()
    assert reply.wait(5.0)
    assert reply.result() == 7
    assert reply.wait(0.0)  # answered once, waited for any number of times


def test_an_unanswered_reply_times_out() -> None:
    """wait() returns False at its timeout and leaves the reply open for a later answer."""
    reply = Reply()
    assert not reply.wait(0.02)
    assert not reply.wait(-1.0)  # a negative timeout is a poll
    assert not reply.answered
    reply.set(3)
    assert reply.wait(0.0)
    assert reply.result() == 3


def test_an_error_reply_raises_the_error() -> None:
    """set_exception takes an exc_info tuple (as the actors send) or an exception."""
    reply = Reply()
    error = ConflictError(expected=1, actual=2)
    reply.set_exception((type(error), error, None))
    assert reply.wait(1.0)
    with pytest.raises(ConflictError):
        reply.result()
    other = Reply()
    other.set_exception(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        other.result()


def test_only_the_first_answer_counts() -> None:
    """A second answer neither overwrites the first nor fails."""
    reply = Reply()
    reply.set(1)
    reply.set(2)
    reply.set_exception(RuntimeError("late"))
    assert reply.result() == 1


def test_the_inbox_waits_for_a_count_of_messages() -> None:
    """wait_for(n) returns True once n messages are queued, False at its timeout."""
    inbox = _Inbox()
    inbox.put("a")
    assert not inbox.wait_for(3, 0.02)

    def put_two() -> None:
        time.sleep(0.02)
        inbox.put("b")
        time.sleep(0.02)
        inbox.put("c")

    feeder = threading.Thread(target=put_two)
    feeder.start()
    assert inbox.wait_for(3, 5.0)
    feeder.join()
    assert [inbox.get_nowait() for _ in range(3)] == ["a", "b", "c"]


def test_after_a_counted_wait_one_message_wakes_a_plain_get() -> None:
    """The count is reset: the actor loop's blocking get() wakes for a single message."""
    inbox = _Inbox()
    assert not inbox.wait_for(5, 0.01)
    got: list[str] = []
    getter = threading.Thread(target=lambda: got.append(inbox.get(timeout=5.0)))
    getter.start()
    time.sleep(0.02)
    inbox.put("x")
    getter.join(5.0)
    assert got == ["x"]

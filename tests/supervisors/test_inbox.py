"""The borrowable inbox: a borrow's end wakes the actor's thread only when it has
something to do, a message or its own end."""

from __future__ import annotations

import threading
from typing import Any

from supervisors import Inbox

from ._support import wait_until


def _counting_notifies(inbox: Inbox) -> list[int]:
    """Record every notify of the condition the actor's thread waits on."""
    cond: Any = inbox._arrived
    assert cond is not None
    calls: list[int] = []
    notify = cond.notify

    def counted(n: int = 1) -> None:
        calls.append(n)
        notify(n)

    cond.notify = counted
    return calls


def test_a_borrow_given_back_does_not_wake_an_actor_that_has_no_message() -> None:
    """An actor's thread waiting for a message is woken by the message, not by each
    borrow given back meanwhile (a borrowed call's hot path)."""
    inbox = Inbox()
    taken: list[object] = []
    getter = threading.Thread(target=lambda: taken.append(inbox.get()), daemon=True)
    getter.start()
    wait_until(lambda: inbox._arrived is not None and not inbox.busy)
    notifies = _counting_notifies(inbox)
    for _ in range(3):
        assert inbox.borrow(idle=True)
        inbox.give_back()
    given_back = list(notifies)
    inbox.put("message")
    getter.join(2.0)
    assert given_back == []
    assert taken == ["message"] and notifies == [1]


def test_an_end_waits_until_the_borrow_is_given_back() -> None:
    """wait_given_back (an actor's thread before it terminates) returns once the caller
    that borrowed the inbox gives it back."""
    inbox = Inbox()
    assert inbox.borrow()
    ender = threading.Thread(target=inbox.wait_given_back, daemon=True)
    ender.start()
    wait_until(lambda: inbox._ending)
    assert ender.is_alive()
    inbox.give_back()
    ender.join(2.0)
    assert not ender.is_alive()

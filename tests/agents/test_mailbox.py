"""Mailboxes (memoryd.agents.mailbox): addresses are checked once per slot, and a call
placed on a slot retired meanwhile lands on the instance's new slot."""

from __future__ import annotations

from typing import cast

import pytest

from memoryd import AgentSystemStopped, Overloaded, UnknownAgent
from memoryd.agent.agent import RunResult
from memoryd.agents.instance import Call, State
from memoryd.agents.mailbox import Mailboxes, Placed


def mailboxes(stopped: list[bool] | None = None) -> tuple[Mailboxes, list[str]]:
    counted: list[str] = []
    flag = stopped if stopped is not None else [False]
    boxes = Mailboxes(
        system="crew",
        agent_types=["echo"],
        mailbox=2,
        clock=lambda: 0.0,
        count=counted.append,
        stopped=lambda: flag[0],
    )
    return boxes, counted


def test_address_makes_one_slot_per_instance_and_finds_it_again() -> None:
    """The first call to an address makes its slot; later calls get the same one."""
    boxes, _ = mailboxes()
    slot = boxes.address("echo", "a")
    assert (slot.name, slot.cid) == ("crew/echo/a", "echo/a")
    assert boxes.address("echo", "a") is slot
    assert boxes.slots() == [slot]


def test_address_refuses_a_stopped_system_an_unknown_type_and_a_bad_key() -> None:
    """Nothing is made for a refused address."""
    stopped = [False]
    boxes, _ = mailboxes(stopped)
    with pytest.raises(UnknownAgent):
        boxes.address("writer", "a")
    with pytest.raises(ValueError, match="instance key"):
        boxes.address("echo", "")
    assert boxes.slots() == []
    boxes.address("echo", "a")
    stopped[0] = True
    with pytest.raises(AgentSystemStopped):
        boxes.address("echo", "a")


def test_a_call_on_a_slot_retired_meanwhile_lands_on_the_new_slot() -> None:
    """A slot forgotten between `address` and `submit` is looked up again: the call is
    queued on the instance's new slot, never on the forgotten one."""
    boxes, counted = mailboxes()
    old = boxes.address("echo", "a")
    with old.mutex:
        old.state = State.RETIRED
    boxes.retire(old)
    slot, call, placed = boxes.submit(old, "hi", None, float("inf"))
    assert slot is not old
    assert slot is boxes.address("echo", "a")
    assert list(slot.queue) == [call] and not old.queue
    assert placed is Placed.DOWN  # no incarnation drains it: the caller activates it
    assert counted == ["calls"]


def test_a_full_mailbox_refuses_but_a_resume_is_always_queued() -> None:
    """Past ``mailbox`` waiting calls a call is refused; a resumed run is not."""
    boxes, counted = mailboxes()
    slot = boxes.address("echo", "a")
    for n in range(2):
        boxes.submit(slot, f"m{n}", None, float("inf"))
    with pytest.raises(Overloaded, match="mailbox=2"):
        boxes.submit(slot, "m2", None, float("inf"))
    _, call, _ = boxes.submit(slot, None, None, float("inf"), resume="run-1")
    assert call.resume and call.run_id == "run-1"
    assert len(slot.queue) == 3
    assert counted == ["calls", "calls", "overloaded", "calls"]


def test_a_call_answered_by_a_stop_keeps_that_answer_when_its_run_ends_after() -> None:
    """`fail_all` answers a running call; the run's own end (a result, or an error)
    comes after and changes nothing, and raises nothing into the instance's thread."""
    boxes, _ = mailboxes()
    slot = boxes.address("echo", "a")
    call = Call(input="hi", run_id="r1")
    slot.current = call  # running in its caller's thread: no future yet
    stopped = AgentSystemStopped("the system stopped")
    boxes.fail_all(stopped)
    assert call.future is not None and call.future.exception() is stopped
    call.answer(cast(RunResult, "a result that came too late"))
    call.fail(RuntimeError("an error that came too late"))
    assert call.future.exception() is stopped


def test_a_withdrawn_call_leaves_the_queue_and_its_future_is_cancelled() -> None:
    """A call withdrawn while queued never runs: out of the queue, its future cancelled;
    one already running goes on (its future is not cancelled)."""
    boxes, _ = mailboxes()
    slot = boxes.address("echo", "a")
    queued, running = Call(input="q", run_id="r1"), Call(input="r", run_id="r2")
    slot.queue.append(queued)
    queued.waited()
    assert boxes.withdraw(slot, queued).cancelled()
    assert list(slot.queue) == []
    running.waited().set_running_or_notify_cancel()
    future = boxes.withdraw(slot, running)
    assert future.running() and not future.cancelled()

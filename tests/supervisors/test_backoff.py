"""Restart backoff: the pure delays and window, then a supervisor that never gives up on
a child with a backoff (its crash loop is slowed, not escalated)."""

from __future__ import annotations

import threading

import pytest

from supervisors import (
    Backoff,
    BackoffWindow,
    ChildSpec,
    ChildSpecError,
    Supervisor,
    kill,
    whereis,
)

from ._support import FakeClock, Journal, Worker, wait_until


def test_delays_grow_by_the_factor_up_to_the_cap() -> None:
    """0 inside the window; past it initial, initial x factor, ... capped at max_s."""
    backoff = Backoff(initial_s=0.1, max_s=1.0, factor=2.0)
    assert [backoff.delay(n) for n in range(7)] == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(10_000) == 1.0


@pytest.mark.parametrize(
    "fields",
    [
        {"initial_s": 0.0},
        {"initial_s": -1.0},
        {"initial_s": float("nan")},
        {"max_s": 0.01, "initial_s": 0.1},
        {"factor": 0.5},
        {"factor": True},
    ],
)
def test_bad_backoff_fields_are_refused_by_name(fields: dict[str, float]) -> None:
    """Each bad field raises ChildSpecError naming it."""
    with pytest.raises(ChildSpecError, match=next(iter(fields))):
        Backoff(**fields)


def test_a_spec_refuses_a_backoff_that_is_not_a_backoff() -> None:
    with pytest.raises(ChildSpecError, match="backoff must be a Backoff"):
        ChildSpec(id="x", start=lambda: None, backoff=2.0)  # type: ignore[arg-type]


def test_restarts_inside_the_window_are_immediate_past_it_delayed() -> None:
    """max_restarts=2 in 5 s: two at once, then growing delays while the window is full."""
    clock = FakeClock()
    window = BackoffWindow(Backoff(initial_s=0.5, max_s=4.0), max_restarts=2, period_s=5.0)
    delays = []
    for _ in range(6):
        delays.append(window.next_delay(clock()))
        clock.advance(0.1)
    assert delays == [0.0, 0.0, 0.5, 1.0, 2.0, 4.0]
    assert window.over == 4


def test_a_quiet_window_makes_restarts_immediate_again() -> None:
    """Once the window holds max_restarts or fewer, the next restart is at once and
    the delays start over from initial_s."""
    clock = FakeClock()
    window = BackoffWindow(Backoff(initial_s=0.5, max_s=4.0), max_restarts=1, period_s=5.0)
    assert [window.next_delay(clock()) for _ in range(3)] == [0.0, 0.5, 1.0]
    clock.advance(5.001)
    assert window.next_delay(clock()) == 0.0
    assert window.over == 0
    assert window.next_delay(clock()) == 0.5


def _backed_off(journal: Journal, wid: str, fail: dict[str, bool]) -> ChildSpec:
    return ChildSpec(
        id=wid,
        start=lambda: Worker.start(journal, wid, name=wid, fail_init=lambda: fail["on"]),
        backoff=Backoff(initial_s=0.001, max_s=0.02),
    )


def test_a_crash_loop_past_the_intensity_does_not_stop_the_supervisor() -> None:
    """max_restarts=1: a child with a backoff is killed 20 times; the supervisor and the
    sibling live on, and the child is running again after each kill."""
    journal = Journal()
    fail = {"on": False}
    sup = Supervisor.start(
        max_restarts=1,
        clock=FakeClock(),
        children=[
            _backed_off(journal, "b", fail),
            ChildSpec(id="s", start=lambda: Worker.start(journal, "s", name="s")),
        ],
    )
    sibling = whereis("s")
    for _ in range(20):
        old = wait_until(lambda: whereis("b"))
        kill("b")
        wait_until(lambda old=old: (ref := whereis("b")) is not None and ref is not old)
    assert sup.is_alive()
    assert whereis("s") is sibling
    # the new incarnation is registered a moment before its init is journaled
    wait_until(lambda: journal.count("init", "b") == 21)
    sup.stop()


def test_a_child_that_cannot_start_is_retried_with_backoff_until_it_can() -> None:
    """Its init keeps failing: retried again and again (never given up), and it runs as
    soon as the fault clears; the supervisor's intensity was never used up."""
    journal = Journal()
    fail = {"on": False}
    sup = Supervisor.start(
        max_restarts=1, clock=FakeClock(), children=[_backed_off(journal, "b", fail)]
    )
    fail["on"] = True
    kill("b")
    wait_until(lambda: journal.count("init_failed", "b") >= 10)
    assert sup.is_alive()
    assert whereis("b") is None
    fail["on"] = False
    wait_until(lambda: whereis("b"))
    assert sup.is_alive()
    sup.stop()


def test_a_terminated_child_is_not_restarted_by_a_pending_delay() -> None:
    """terminate_child cancels the delayed restart of a child waiting for it: its timer
    ends at once (not 60 s later) and the child stays stopped until restarted by hand."""
    journal = Journal()
    spec = ChildSpec(
        id="b",
        start=lambda: Worker.start(journal, "b", name="b"),
        backoff=Backoff(initial_s=60.0, max_s=60.0),
    )
    sup = Supervisor.start(max_restarts=0, clock=FakeClock(), children=[spec])
    kill("b")  # max_restarts=0: the restart waits 60 s
    timer = wait_until(
        lambda: next((t for t in threading.enumerate() if isinstance(t, threading.Timer)), None)
    )
    assert whereis("b") is None
    sup.terminate_child("b")
    timer.join(5.0)
    assert not timer.is_alive()
    assert journal.count("init", "b") == 1
    sup.restart_child("b")
    assert journal.count("init", "b") == 2
    sup.stop()

"""Deadlines: a handle's call raises CallTimeout after ``call_timeout_s`` whichever path
it takes (the supervisor goes on with the request, as OTP's gen_server:call), and a
supervisor's own start has no fixed limit beyond its children's start timeouts."""

from __future__ import annotations

import math
import threading

import pytest

from supervisors import (
    CallTimeout,
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    StartError,
    SupervisedActor,
    Supervisor,
    registered,
    whereis,
)

from ._support import Journal, Slow, Worker, wait_until, worker_spec


def test_terminate_child_of_an_idle_supervisor_times_out_and_the_stop_goes_on() -> None:
    """A child whose terminate() outlasts the call's deadline: terminate_child raises
    CallTimeout at the deadline, and the supervisor still stops the child."""
    journal, gate = Journal(), threading.Event()
    sup = Supervisor.start(
        name="dl.term",
        call_timeout_s=0.2,
        children=[
            ChildSpec(id="w", start=lambda: Slow.start(journal, "dl.term.w", stop_gate=gate))
        ],
    )
    with pytest.raises(CallTimeout, match="terminate_child"):
        sup.terminate_child("w")
    gate.set()
    wait_until(lambda: journal.of("exit:shutdown") == ["dl.term.w"])
    wait_until(lambda: [c.ref for c in sup.which_children()] == [None])
    assert whereis("dl.term.w") is None
    sup.stop()


def test_start_child_of_an_idle_supervisor_times_out_and_the_child_is_kept() -> None:
    """A child whose init() outlasts the call's deadline: start_child raises CallTimeout,
    and the supervisor goes on: the child starts and is kept as one of its children."""
    journal, gate = Journal(), threading.Event()
    sup = DynamicSupervisor.start(name="dl.start", call_timeout_s=0.2)
    spec = ChildSpec(id="s", start=lambda: Slow.start(journal, "dl.start.s", init_gate=gate))
    with pytest.raises(CallTimeout, match="start_child"):
        sup.start_child(spec)
    gate.set()
    wait_until(lambda: [c.id for c in sup.which_children() if c.ref is not None] == ["s"])
    assert whereis("dl.start.s") is not None
    sup.stop()


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1", True])
def test_a_call_timeout_that_is_not_a_finite_positive_number_is_refused(bad: object) -> None:
    """call_timeout_s is checked before anything starts: a ValueError naming it."""
    journal = Journal()
    with pytest.raises(ValueError, match="call_timeout_s"):
        Supervisor.start(
            name="dl.bad", children=[worker_spec(journal, "dl.bad.w")], call_timeout_s=bad
        )  # type: ignore[arg-type]
    assert journal.of("init") == []
    assert whereis("dl.bad") is None


def test_a_supervisors_start_is_bounded_by_its_childrens_start_timeouts_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two children, each well within its own start timeout, that together take longer
    than the start timeout of an actor started on its own: the supervisor starts."""
    monkeypatch.setattr(SupervisedActor, "start_timeout_s", 0.15)
    journal = Journal()
    specs = [
        ChildSpec(
            id=wid,
            start=lambda wid=wid: Worker.start(journal, wid, name=wid, init_delay_s=0.1),
            start_timeout_s=1.0,
        )
        for wid in ("dl.slow.a", "dl.slow.b")
    ]
    sup = Supervisor.start(name="dl.slow", children=specs)
    assert journal.of("init") == ["dl.slow.a", "dl.slow.b"]
    sup.stop()


def test_an_explicit_start_timeout_bounds_the_whole_start() -> None:
    """Supervisor.start(start_timeout_s=...) fails a start that takes longer, naming the
    supervisor; the child it had started is stopped and its name is free."""
    journal, gate = Journal(), threading.Event()
    specs = [
        worker_spec(journal, "dl.cap.a"),
        ChildSpec(id="b", start=lambda: Slow.start(journal, "dl.cap.b", init_gate=gate)),
    ]
    try:
        with pytest.raises(StartError, match=r"supervisor 'dl\.cap' failed to start"):
            Supervisor.start(name="dl.cap", children=specs, start_timeout_s=0.2)
        assert "dl.cap" not in registered() and "dl.cap.a" not in registered()
    finally:
        gate.set()
    wait_until(lambda: journal.of("exit:shutdown") == ["dl.cap.b"])
    wait_until(lambda: not {"dl.cap", "dl.cap.a", "dl.cap.b"} & set(registered()))
    assert journal.count("terminate", "dl.cap.a") == 1


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, "1"])
def test_a_bad_start_timeout_is_refused(bad: object) -> None:
    """start_timeout_s must be None, a number > 0, or math.inf."""
    with pytest.raises(ChildSpecError, match="start_timeout_s"):
        Supervisor.start(name="dl.badstart", start_timeout_s=bad)  # type: ignore[arg-type]

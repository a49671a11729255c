"""Supervisor: ordered starts, strategies, restart kinds, intensity, escalation."""

from __future__ import annotations

from typing import Any

import pykka
import pytest
from pykka.messages import ProxyCall

from supervisors import (
    ChildRunning,
    ChildSpec,
    ChildSpecError,
    DynamicSupervisor,
    Restart,
    StartError,
    Strategy,
    SupervisedActor,
    Supervisor,
    UnknownChild,
    kill,
    whereis,
)

from ._support import FakeClock, Journal, wait_until, worker_spec


def call(ref: pykka.ActorRef, method: str, *args: object) -> Any:
    return ref.ask(ProxyCall(attr_path=(method,), args=args, kwargs={}), timeout=5)


def refs(sup: Supervisor) -> dict[str, pykka.ActorRef | None]:
    return {c.id: c.ref for c in sup.which_children()}


def restarted(name: str, old: pykka.ActorRef) -> pykka.ActorRef:
    """Wait for a new incarnation under ``name`` that answers."""

    def ready() -> pykka.ActorRef | None:
        ref = whereis(name)
        return ref if ref is not None and ref is not old else None

    new = wait_until(ready)
    assert call(new, "ping") == f"pong:{name}"
    return new


def start_abc(journal: Journal, strategy: Strategy, **kwargs: Any) -> Supervisor:
    return Supervisor.start(
        strategy=strategy,
        max_restarts=100,
        children=[worker_spec(journal, w, **kwargs) for w in ("a", "b", "c")],
    )


# -- start and stop ---------------------------------------------------------


def test_children_start_in_order_and_stop_in_reverse() -> None:
    """init runs a, b, c; stop terminates c, b, a."""
    journal = Journal()
    sup = start_abc(journal, Strategy.ONE_FOR_ONE)
    assert journal.of("init") == ["a", "b", "c"]
    sup.stop()
    assert journal.of("terminate") == ["c", "b", "a"]
    assert journal.of("exit:shutdown") == ["c", "b", "a"]
    assert not sup.is_alive()


def test_a_child_failing_to_start_fails_the_whole_start() -> None:
    """b fails: StartError names it, a is stopped again, c never starts."""
    journal = Journal()
    specs = [
        worker_spec(journal, "a"),
        worker_spec(journal, "b", fail_init=lambda: True),
        worker_spec(journal, "c"),
    ]
    with pytest.raises(StartError, match="b refuses to start"):
        Supervisor.start(name="sup.failing", children=specs)
    assert journal.of("init") == ["a"]
    assert journal.of("exit:shutdown") == ["a"]
    assert "c" not in journal.of("init_failed") + journal.of("init")
    assert whereis("sup.failing") is None
    assert whereis("a") is None


def test_a_start_function_that_does_not_start_a_supervised_actor_is_refused() -> None:
    """Returning something other than the linked actor fails the start clearly."""
    spec = ChildSpec(id="odd", start=lambda: 42)
    with pytest.raises(StartError, match="must return the SupervisedActor"):
        Supervisor.start(children=[spec])


# -- strategies ---------------------------------------------------------------


def test_one_for_one_restarts_only_the_dead_child() -> None:
    """Killing b gives b a new incarnation; a and c keep theirs."""
    journal = Journal()
    sup = start_abc(journal, Strategy.ONE_FOR_ONE)
    before = refs(sup)
    kill("b")
    restarted("b", before["b"])
    after = refs(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert journal.of("init") == ["a", "b", "c", "b"]


def test_one_for_all_restarts_every_child_siblings_stopped_in_reverse() -> None:
    """Killing b stops c then a, then starts a, b, c again."""
    journal = Journal()
    sup = start_abc(journal, Strategy.ONE_FOR_ALL)
    before = refs(sup)
    kill("b")
    wait_until(lambda: journal.of("init") == ["a", "b", "c", "a", "b", "c"])
    after = refs(sup)
    assert all(after[k] is not before[k] and after[k] is not None for k in "abc")
    assert journal.of("exit:killed") == ["b"]
    assert journal.of("exit:shutdown") == ["c", "a"]


def test_rest_for_one_restarts_the_dead_child_and_those_after_it() -> None:
    """Killing b restarts b and c; a keeps running."""
    journal = Journal()
    sup = start_abc(journal, Strategy.REST_FOR_ONE)
    before = refs(sup)
    kill("b")
    wait_until(lambda: journal.of("init") == ["a", "b", "c", "b", "c"])
    after = refs(sup)
    assert after["a"] is before["a"]
    assert after["b"] is not before["b"] and after["c"] is not before["c"]


# -- restart types ----------------------------------------------------------------


def test_permanent_child_is_restarted_even_after_a_normal_exit() -> None:
    """A permanent child that quits is started again."""
    journal = Journal()
    Supervisor.start(children=[worker_spec(journal, "p", restart=Restart.PERMANENT)])
    old = whereis("p")
    call(old, "quit")
    restarted("p", old)


def test_transient_child_is_not_restarted_after_a_normal_exit() -> None:
    """A transient child that quits stays down; its spec is kept."""
    journal = Journal()
    sup = Supervisor.start(children=[worker_spec(journal, "t", restart=Restart.TRANSIENT)])
    call(whereis("t"), "quit")
    wait_until(lambda: refs(sup) == {"t": None})
    assert journal.of("init") == ["t"]


def test_transient_child_is_restarted_after_a_crash() -> None:
    """An abnormal exit restarts a transient child."""
    journal = Journal()
    Supervisor.start(children=[worker_spec(journal, "t", restart=Restart.TRANSIENT)])
    old = whereis("t")
    with pytest.raises(ValueError):
        call(old, "boom")
    restarted("t", old)


def test_temporary_child_is_never_restarted_and_is_forgotten() -> None:
    """A crashed temporary child is removed from the supervisor."""
    journal = Journal()
    sup = Supervisor.start(
        children=[worker_spec(journal, "tmp", restart=Restart.TEMPORARY), worker_spec(journal, "k")]
    )
    kill("tmp")
    wait_until(lambda: [c.id for c in sup.which_children()] == ["k"])
    assert journal.of("init") == ["tmp", "k"]


def test_temporary_sibling_taken_down_by_one_for_all_is_not_restarted() -> None:
    """OTP: temporary children are not restarted even when a sibling's death stops them."""
    journal = Journal()
    sup = Supervisor.start(
        strategy=Strategy.ONE_FOR_ALL,
        children=[
            worker_spec(journal, "tmp", restart=Restart.TEMPORARY),
            worker_spec(journal, "k"),
        ],
    )
    old = whereis("k")
    kill("k")
    restarted("k", old)
    assert [c.id for c in sup.which_children()] == ["k"]
    assert journal.of("init").count("tmp") == 1


# -- intensity and escalation ------------------------------------------------------


def test_exceeding_the_intensity_stops_all_children_and_the_supervisor() -> None:
    """max_restarts=2: the third death in the window makes the supervisor give up."""
    journal = Journal()
    clock = FakeClock()
    sup = Supervisor.start(
        max_restarts=2,
        period_s=5.0,
        clock=clock,
        children=[worker_spec(journal, "a"), worker_spec(journal, "b")],
    )
    for _ in range(2):
        old = whereis("b")
        kill("b")
        restarted("b", old)
    kill("b")
    wait_until(lambda: not sup.is_alive())
    # The supervisor is dead to observers first, then stops its children.
    wait_until(lambda: whereis("a") is None and whereis("b") is None)
    assert journal.of("exit:shutdown") == ["a"]


def test_restarts_spread_wider_than_the_period_never_exhaust_the_supervisor() -> None:
    """With the fake clock moved past the window between deaths, it keeps restarting."""
    journal = Journal()
    clock = FakeClock()
    sup = Supervisor.start(
        max_restarts=1, period_s=5.0, clock=clock, children=[worker_spec(journal, "a")]
    )
    for _ in range(5):
        old = whereis("a")
        kill("a")
        restarted("a", old)
        clock.advance(5.001)
    assert sup.is_alive()


def test_the_window_edge_is_inclusive_in_the_supervisor() -> None:
    """A death exactly period_s after the last restart still counts: max_restarts=1 gives up."""
    journal = Journal()
    clock = FakeClock()
    sup = Supervisor.start(
        max_restarts=1, period_s=5.0, clock=clock, children=[worker_spec(journal, "a")]
    )
    old = whereis("a")
    kill("a")
    restarted("a", old)
    clock.advance(5.0)
    kill("a")
    wait_until(lambda: not sup.is_alive())


def test_escalation_through_two_levels() -> None:
    """Inner gives up -> outer restarts it; again -> outer gives up too."""
    journal = Journal()
    clock = FakeClock()

    def inner() -> Supervisor:
        return Supervisor.start(
            name="inner", max_restarts=0, clock=clock, children=[worker_spec(journal, "w")]
        )

    outer = Supervisor.start(
        name="outer",
        max_restarts=1,
        clock=clock,
        children=[ChildSpec(id="inner", start=inner, supervisor=True), worker_spec(journal, "x")],
    )
    first_inner = whereis("inner")
    old = whereis("w")
    kill("w")  # inner exceeds 0 restarts, exits; outer restarts inner (1 restart)
    restarted("w", old)
    assert whereis("inner") is not first_inner
    assert outer.is_alive()
    kill("w")  # inner gives up again; outer's second restart exceeds 1
    wait_until(lambda: not outer.is_alive())
    # A supervisor that gives up is dead to observers before it stops its children (the
    # tree is seen gone at once), so its children are unregistered a moment later.
    wait_until(lambda: whereis("inner") is None and whereis("w") is None and whereis("x") is None)
    assert whereis("inner") is None and whereis("w") is None and whereis("x") is None


def test_a_restart_that_cannot_start_is_retried_until_the_intensity_stops_it() -> None:
    """A child whose init starts failing is retried, each try counted, then the supervisor exits."""
    journal = Journal()
    failing = {"on": False}
    sup = Supervisor.start(
        max_restarts=3,
        clock=FakeClock(),
        children=[worker_spec(journal, "f", fail_init=lambda: failing["on"])],
    )
    failing["on"] = True
    kill("f")
    wait_until(lambda: not sup.is_alive())
    assert journal.of("init_failed") == ["f", "f", "f"]


# -- the handle's calls ---------------------------------------------------------


def test_start_terminate_restart_delete_child() -> None:
    """The child-management calls behave as OTP's."""
    journal = Journal()
    sup = Supervisor.start(children=[worker_spec(journal, "a")])
    ref = sup.start_child(worker_spec(journal, "b"))
    assert call(ref, "ping") == "pong:b"
    with pytest.raises(ChildSpecError, match="already has a child 'b'"):
        sup.start_child(worker_spec(journal, "b"))
    with pytest.raises(ChildRunning):
        sup.delete_child("b")
    sup.terminate_child("b")
    assert refs(sup)["b"] is None and whereis("b") is None
    assert sup.count_children() == {"specs": 2, "active": 1, "supervisors": 0, "workers": 2}
    sup.restart_child("b")
    with pytest.raises(ChildRunning):
        sup.restart_child("b")
    sup.terminate_child("b")
    sup.delete_child("b")
    assert [c.id for c in sup.which_children()] == ["a"]
    with pytest.raises(UnknownChild):
        sup.terminate_child("b")


def test_start_child_that_fails_leaves_no_spec_behind() -> None:
    """A failed start_child raises StartError and the id stays free."""
    journal = Journal()
    sup = Supervisor.start()
    with pytest.raises(StartError):
        sup.start_child(worker_spec(journal, "bad", fail_init=lambda: True))
    assert sup.which_children() == []


def test_terminated_child_is_not_restarted_by_its_exit() -> None:
    """terminate_child is not a crash: the supervisor does not bring it back."""
    journal = Journal()
    sup = Supervisor.start(children=[worker_spec(journal, "a")])
    sup.terminate_child("a")
    sup.start_child(worker_spec(journal, "probe"))  # a later call: the exit was processed
    assert refs(sup)["a"] is None
    assert journal.of("init") == ["a", "probe"]


def test_dynamic_supervisor_starts_children_on_demand_and_forgets_them() -> None:
    """Children come and go; terminate_child removes them."""
    journal = Journal()
    dyn = DynamicSupervisor.start(name="dyn")
    for wid in ("d1", "d2", "d3"):
        dyn.start_child(worker_spec(journal, wid))
    dyn.terminate_child("d2")
    assert [c.id for c in dyn.which_children()] == ["d1", "d3"]
    old = whereis("d3")
    kill("d3")
    restarted("d3", old)
    dyn.stop()
    assert journal.of("exit:shutdown") == ["d2", "d3", "d1"]


def test_dynamic_supervisor_refuses_other_strategies() -> None:
    """DynamicSupervisor is one_for_one by definition."""
    with pytest.raises(ChildSpecError, match="ONE_FOR_ONE"):
        DynamicSupervisor.start(strategy=Strategy.ONE_FOR_ALL)


class Exclusive(SupervisedActor):
    """Owns a process-wide resource that must never be held twice (like an LMDB env)."""

    held: set[str] = set()
    overlaps = 0

    def __init__(self, key: str) -> None:
        super().__init__(name=key)
        self.key = key

    def init(self) -> None:
        if self.key in Exclusive.held:
            Exclusive.overlaps += 1
            raise RuntimeError("resource still held by the previous incarnation")
        Exclusive.held.add(self.key)

    def terminate(self, exit: object) -> None:
        Exclusive.held.discard(self.key)

    def ping(self) -> str:
        return f"pong:{self.key}"


def test_a_restarted_child_never_overlaps_its_previous_incarnation() -> None:
    """Across 50 kills the new incarnation always finds the resource released."""
    sup = Supervisor.start(
        max_restarts=1000, children=[ChildSpec(id="ex", start=lambda: Exclusive.start("ex"))]
    )
    for _ in range(50):
        old = whereis("ex")
        kill("ex")
        restarted("ex", old)
    assert Exclusive.overlaps == 0
    sup.stop()
    assert Exclusive.held == set()

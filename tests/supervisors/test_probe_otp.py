"""Where supervisors must behave as OTP's supervisor does, checked with real actors.

A child that outlives its shutdown is killed (here: abandoned, dead to everyone) so the
restart or the stop goes on; a start that timed out frees the name for the next try; a
terminated temporary child leaves no spec; a permanent child's exit is an error report.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka
import pytest
from pykka._envelope import Envelope
from pykka.messages import ProxyCall
from structlog.testing import capture_logs

from supervisors import (
    ChildSpec,
    Exit,
    Restart,
    Strategy,
    SupervisedActor,
    Supervisor,
    UnknownChild,
    kill,
    whereis,
)

from ._support import FakeClock, Journal, wait_until, worker_spec


def call(ref: pykka.ActorRef[Any], method: str, timeout: float = 5.0) -> Any:
    return ref.ask(ProxyCall(attr_path=(method,), args=(), kwargs={}), timeout=timeout)


def send(ref: pykka.ActorRef[Any], method: str) -> None:
    ref.tell(ProxyCall(attr_path=(method,), args=(), kwargs={}))


class Gated(SupervisedActor):
    """A registered actor whose ``block`` handler waits for a gate; records its exits."""

    def __init__(
        self, journal: Journal, name: str, gate: threading.Event, *, hold_init: int = 0
    ) -> None:
        super().__init__(name=name)
        self.journal = journal
        self.gate = gate
        self.hold_init = hold_init

    def init(self) -> None:
        self.journal.add("init", self.name or "")
        if len(self.journal.of("init")) == self.hold_init:
            self.gate.wait(30)  # this incarnation's init hangs until the gate opens

    def block(self) -> None:
        self.gate.wait(30)

    def ping(self) -> str:
        return "pong"

    def terminate(self, exit: Exit) -> None:
        self.journal.add(f"exit:{exit.describe()}", self.name or "")


def fresh(name: str, old: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
    """Wait for a new incarnation registered under ``name`` that answers."""

    def ready() -> pykka.ActorRef[Any] | None:
        ref = whereis(name)
        return ref if ref is not None and ref is not old else None

    ref: pykka.ActorRef[Any] = wait_until(ready)
    assert call(ref, "ping") == "pong"
    return ref


# -- shutdown timeouts: OTP kills the child once its shutdown time is up -----------------


def test_a_child_that_outlives_its_shutdown_is_killed_and_the_restart_goes_on() -> None:
    """one_for_all: b is stuck in a handler past its shutdown_s when a dies; b is killed,
    its name freed, both restart (OTP: exit(B, kill)), and b terminates once it returns."""
    journal, gate = Journal(), threading.Event()
    sup = Supervisor.start(
        strategy=Strategy.ONE_FOR_ALL,
        max_restarts=3,
        clock=FakeClock(),
        children=[
            ChildSpec(id="a", start=lambda: Gated.start(journal, "a", gate)),
            ChildSpec(id="b", start=lambda: Gated.start(journal, "b", gate), shutdown_s=0.05),
        ],
    )
    old_a, old_b = whereis("a"), whereis("b")
    assert old_a is not None and old_b is not None
    send(old_b, "block")
    kill("a")
    fresh("b", old_b)
    fresh("a", old_a)
    assert sup.is_alive()
    assert not old_b.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        call(old_b, "ping")  # refused at once, not queued behind the stuck handler
    gate.set()
    wait_until(lambda: journal.of("exit:killed: shutdown_timeout") == ["b"])
    sup.stop()


def test_a_stopped_supervisor_leaves_no_stuck_child_alive_under_its_name() -> None:
    """stop() with a child stuck past its shutdown_s: once stop returns the child is dead
    and unnamed (not an orphan outliving its tree); it terminates when its handler returns."""
    journal, gate = Journal(), threading.Event()
    sup = Supervisor.start(
        children=[ChildSpec(id="s", start=lambda: Gated.start(journal, "s", gate), shutdown_s=0.05)]
    )
    stuck = whereis("s")
    assert stuck is not None
    send(stuck, "block")
    sup.stop()
    assert whereis("s") is None
    assert not stuck.is_alive()
    gate.set()
    wait_until(lambda: journal.of("exit:killed: shutdown_timeout") == ["s"])


# -- a start that timed out: OTP kills it, so the retry can register the name -------------


def test_a_restart_whose_start_timed_out_frees_the_name_for_the_retry() -> None:
    """The restarted incarnation's init hangs past start_timeout_s: the retry (counted)
    starts a third incarnation under the same name instead of failing on NameTaken until
    the supervisor gives up."""
    journal, gate = Journal(), threading.Event()
    sup = Supervisor.start(
        max_restarts=3,
        clock=FakeClock(),
        children=[
            ChildSpec(
                id="h",
                start=lambda: Gated.start(journal, "h", gate, hold_init=2),
                start_timeout_s=0.05,
            )
        ],
    )
    old = whereis("h")
    assert old is not None
    kill("h")
    wait_until(lambda: journal.of("init") == ["h", "h", "h"])
    third: pykka.ActorRef[Any] = wait_until(lambda: sup.which_children()[0].ref)
    assert whereis("h") is third
    assert call(third, "ping") == "pong"
    assert sup.is_alive()
    gate.set()
    wait_until(lambda: journal.of("exit:start_failed: start_timeout") == ["h"])
    sup.stop()


# -- child management -------------------------------------------------------------------


def test_a_terminated_temporary_child_leaves_no_spec_behind() -> None:
    """OTP: a temporary child's spec is deleted as soon as it terminates, so
    restart_child and delete_child do not know it."""
    journal = Journal()
    sup = Supervisor.start(
        children=[worker_spec(journal, "tmp", restart=Restart.TEMPORARY), worker_spec(journal, "k")]
    )
    sup.terminate_child("tmp")
    assert [c.id for c in sup.which_children()] == ["k"]
    with pytest.raises(UnknownChild):
        sup.restart_child("tmp")


# -- logs -------------------------------------------------------------------------------


def test_a_permanent_child_exiting_normally_is_reported_as_an_error() -> None:
    """OTP reports every exit of a permanent child (it is restarted: it was unexpected);
    a transient child's normal exit stays at info."""
    journal = Journal()
    with capture_logs() as logs:
        Supervisor.start(
            children=[
                worker_spec(journal, "p", restart=Restart.PERMANENT),
                worker_spec(journal, "t", restart=Restart.TRANSIENT),
            ]
        )
        for name in ("p", "t"):
            ref = whereis(name)
            assert ref is not None
            call(ref, "quit")
        wait_until(lambda: len([e for e in logs if e["event"] == "child_terminated"]) == 2)
    levels = {e["child"]: e["log_level"] for e in logs if e["event"] == "child_terminated"}
    assert levels == {"p": "error", "t": "info"}


# -- callers of a crashing actor ----------------------------------------------------------


def test_callers_of_a_killed_actor_get_an_error_never_a_hang() -> None:
    """A caller waiting behind a kill gets ActorDeadError, well within its deadline."""
    journal, gate = Journal(), threading.Event()
    Supervisor.start(children=[ChildSpec(id="c", start=lambda: Gated.start(journal, "c", gate))])
    ref = whereis("c")
    assert ref is not None
    send(ref, "block")
    kill(ref)
    behind = ref.ask(ProxyCall(attr_path=("ping",), args=(), kwargs={}), block=False)
    gate.set()
    with pytest.raises(pykka.ActorDeadError):
        behind.get(timeout=10)
    fresh("c", ref)


def test_a_message_that_passed_the_liveness_check_as_the_actor_ended_is_refused() -> None:
    """Pykka's ask checks is_alive() and then puts the message; one put after the dying
    actor emptied its inbox used to wait for nothing (a hang without a timeout, a full
    deadline with one). It is refused at once. The test puts it just as ask does, after
    the actor's thread has ended."""
    baseline = threading.active_count()
    journal = Journal()
    ref = Gated.start(journal, "late", threading.Event())
    ref.stop(block=True, timeout=5)
    wait_until(lambda: threading.active_count() <= baseline)  # its loop and teardown ended
    future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
    ref.actor_inbox.put(
        Envelope(ProxyCall(attr_path=("ping",), args=(), kwargs={}), reply_to=future)
    )
    with pytest.raises(pykka.ActorDeadError):
        future.get(timeout=5)


class OwnInbox(Gated):
    """An actor with an inbox of its own (as memoryd's store actor has)."""

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.Queue()


def test_a_stuck_child_with_an_inbox_of_its_own_is_killed_too() -> None:
    """The restart after a shutdown timeout also frees the name of an actor whose inbox is
    not supervisors' (a store actor's): the new incarnation takes it."""
    journal, gate = Journal(), threading.Event()
    sup = Supervisor.start(
        max_restarts=3,
        clock=FakeClock(),
        children=[
            ChildSpec(id="o", start=lambda: OwnInbox.start(journal, "o", gate), shutdown_s=0.05)
        ],
    )
    stuck = whereis("o")
    assert stuck is not None
    send(stuck, "block")
    sup.terminate_child("o")
    assert whereis("o") is None and not stuck.is_alive()
    sup.restart_child("o")
    fresh("o", stuck)
    gate.set()
    wait_until(lambda: journal.of("exit:killed: shutdown_timeout") == ["o"])

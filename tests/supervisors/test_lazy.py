"""Actors whose thread starts lazily, and calls that borrow an idle actor: ``init()`` runs
in the starting thread, the actor's thread starts on its first message, a shutdown of an
actor that never started its thread runs in the caller's thread, and a supervisor that
handles no message runs a handle's call in the caller's thread when the call cannot
outlast its deadline."""

from __future__ import annotations

import math
import threading
from typing import Any

import pykka
import pytest
from pykka.messages import ProxyCall

from supervisors import (
    ChildSpec,
    DynamicSupervisor,
    Exit,
    Inbox,
    Restart,
    StartError,
    SupervisedActor,
    kill,
    shutdown_actor,
    whereis,
)

from ._support import Journal, Worker, wait_until


class Lazy(Worker):
    """A Worker whose thread starts on its first message; it notes the threads it ran in."""

    lazy_thread = True

    def __init__(self, journal: Journal, wid: str, **kwargs: Any) -> None:
        super().__init__(journal, wid, **kwargs)
        self.threads: dict[str, str] = {}

    def init(self) -> None:
        self.threads["init"] = threading.current_thread().name
        super().init()

    def terminate(self, exit: Exit) -> None:
        self.threads["terminate"] = threading.current_thread().name
        super().terminate(exit)

    def where(self) -> str:
        return threading.current_thread().name


def call(ref: pykka.ActorRef[Any], method: str, *args: object) -> object:
    return ref.ask(ProxyCall(attr_path=(method,), args=args, kwargs={}), timeout=5)


def actor_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("Lazy-")]


def test_a_lazy_actor_runs_init_in_the_starting_thread_and_no_thread_till_a_message() -> None:
    """start() runs init() here; the first message starts the actor's own thread."""
    journal = Journal()
    ref = Lazy.start(journal, "w", name="lazy.w")
    actor = ref.actor_inbox.owner()  # type: ignore[attr-defined]
    assert actor.threads["init"] == threading.current_thread().name
    assert journal.of("init") == ["w"]
    assert actor_threads() == []
    assert call(ref, "where") == "Lazy-lazy.w"
    assert call(ref, "ping") == "pong:w"
    assert actor_threads() == ["Lazy-lazy.w"]
    ref.stop()
    assert journal.of("exit:normal") == ["w"]


def test_a_shutdown_of_an_actor_without_a_thread_runs_in_the_callers_thread() -> None:
    """shutdown_actor stops it here, with reason shutdown; no thread is ever started, and
    what is asked of it afterwards fails as with any dead actor."""
    journal = Journal()
    ref = Lazy.start(journal, "w", name="lazy.stop")
    actor = ref.actor_inbox.owner()  # type: ignore[attr-defined]
    assert shutdown_actor(ref, 5.0, "passivated")
    assert actor.threads["terminate"] == threading.current_thread().name
    assert journal.of("exit:shutdown") == ["w"]
    assert actor.exit_reason.detail == "passivated"
    assert not ref.is_alive() and whereis("lazy.stop") is None
    with pytest.raises(pykka.ActorDeadError):
        call(ref, "ping")
    assert actor_threads() == []


def test_a_shutdown_while_a_caller_borrows_the_inbox_waits_for_the_actors_thread() -> None:
    """A caller running code on the actor holds it: the shutdown goes through the inbox,
    starts the actor's thread and is handled once the inbox is given back."""
    journal = Journal()
    ref = Lazy.start(journal, "w")
    inbox: Inbox = ref.actor_inbox  # type: ignore[assignment]
    assert inbox.borrow()
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(shutdown_actor(ref, 5.0)))
    stopper.start()
    wait_until(inbox.control_pending)
    assert journal.of("terminate") == [] and ref.is_alive()
    inbox.give_back()
    stopper.join(5)
    assert stopped == [True]
    assert journal.of("exit:shutdown") == ["w"]


def test_a_kill_of_a_child_that_never_started_its_thread_restarts_it() -> None:
    """The kill starts the actor's thread, which crashes; its supervisor starts a new
    incarnation (in its own thread, with no thread of the child's)."""
    journal = Journal()
    sup = DynamicSupervisor.start(name="lazy.sup", max_restarts=3, period_s=5.0)
    spec = ChildSpec(id="c", start=lambda: Lazy.start(journal, "c", name="lazy.c"))
    first = sup.start_child(spec)
    assert actor_threads() == []
    assert kill("lazy.c")
    wait_until(lambda: (ref := whereis("lazy.c")) is not None and ref is not first)
    assert journal.of("exit:killed") == ["c"]
    assert journal.of("init") == ["c", "c"]
    assert call(whereis("lazy.c"), "ping") == "pong:c"  # type: ignore[arg-type]
    sup.stop()


def test_a_lazy_init_slower_than_the_start_timeout_fails_the_start_once_it_returns() -> None:
    """init() cannot be abandoned in the starting thread: the start fails after it, and
    what init() acquired is released."""
    journal = Journal()

    class Slow(Lazy):
        start_timeout_s = 0.05

    with pytest.raises(StartError, match="did not finish init"):
        Slow.start(journal, "slow", name="lazy.slow", init_delay_s=0.2)
    assert journal.of("exit:start_failed") == ["slow"]
    assert whereis("lazy.slow") is None


def test_a_lazy_init_failure_raises_start_error_and_releases() -> None:
    """As with a threaded actor: StartError with the cause, terminate() ran, name free."""
    journal = Journal()
    with pytest.raises(StartError, match="refuses to start") as info:
        Lazy.start(journal, "w", name="lazy.fail", fail_init=lambda: True)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert journal.of("exit:start_failed") == ["w"]
    assert whereis("lazy.fail") is None


def test_a_lazy_actor_needs_a_supervisors_inbox() -> None:
    """An inbox of another kind could not start the thread: refused at creation."""
    import queue

    class Plain(SupervisedActor):
        lazy_thread = True

        @staticmethod
        def _create_actor_inbox() -> Any:
            return queue.Queue()

    with pytest.raises(TypeError, match="Inbox"):
        Plain.start()


def test_a_call_to_an_idle_supervisor_runs_in_the_callers_thread() -> None:
    """start_child and terminate_child of a child whose start timeout and shutdown are
    shorter than the call's deadline (5 s and 4 s, against 30 s) run here: a lazy child's
    init() and terminate() run in the calling thread, and no thread is started for it."""
    journal = Journal()
    sup = DynamicSupervisor.start(name="lazy.idle")
    sup.start_child(
        ChildSpec(
            id="c",
            start=lambda: Lazy.start(journal, "c", name="lazy.idle.c"),
            restart=Restart.TRANSIENT,
            start_timeout_s=5.0,
            shutdown_s=4.0,
        )
    )
    actor = whereis("lazy.idle.c").actor_inbox.owner()  # type: ignore[union-attr]
    me = threading.current_thread().name
    assert actor.threads["init"] == me
    sup.terminate_child("c")
    assert actor.threads["terminate"] == me
    assert journal.of("exit:shutdown") == ["c"]
    assert sup.which_children() == []
    assert actor_threads() == []
    sup.stop()


@pytest.mark.parametrize("limit_s", [1.0, math.inf])
def test_a_call_that_could_outlast_its_deadline_runs_in_the_supervisors_thread(
    limit_s: float,
) -> None:
    """A child whose start timeout and shutdown are not shorter than the call's deadline
    (1 s): start_child and terminate_child go through the supervisor's thread even when
    it is idle, so the deadline holds; a lazy child's init() and terminate() run there,
    and no thread is started for it."""
    journal = Journal()
    sup = DynamicSupervisor.start(name="lazy.hop", call_timeout_s=1.0)
    sup.start_child(
        ChildSpec(
            id="c",
            start=lambda: Lazy.start(journal, "c", name="lazy.hop.c"),
            restart=Restart.TRANSIENT,
            start_timeout_s=limit_s,
            shutdown_s=limit_s,
        )
    )
    actor = whereis("lazy.hop.c").actor_inbox.owner()  # type: ignore[union-attr]
    me = threading.current_thread().name
    assert actor.threads["init"].startswith("_SupervisorActor")
    sup.terminate_child("c")
    assert actor.threads["terminate"].startswith("_SupervisorActor")
    assert me not in actor.threads.values()
    assert journal.of("exit:shutdown") == ["c"]
    assert sup.which_children() == []
    assert actor_threads() == []
    sup.stop()


def test_a_call_to_a_supervisor_another_caller_holds_waits_its_turn() -> None:
    """While one caller runs a start in its thread (the supervisor's inbox borrowed),
    another caller's call goes through the inbox and is answered right after."""
    journal = Journal()
    sup = DynamicSupervisor.start(name="lazy.turns")
    entered, release = threading.Event(), threading.Event()

    def slow_start() -> Any:
        entered.set()
        assert release.wait(5)
        return Lazy.start(journal, "a", name="lazy.turns.a")

    first = threading.Thread(target=lambda: sup.start_child(ChildSpec(id="a", start=slow_start)))
    first.start()
    assert entered.wait(5)
    seen: list[list[str]] = []
    second = threading.Thread(target=lambda: seen.append([c.id for c in sup.which_children()]))
    second.start()
    second.join(0.2)
    assert second.is_alive() and seen == []  # it waits: the supervisor is held
    release.set()
    first.join(5)
    second.join(5)
    assert seen == [["a"]]
    sup.stop()


def test_an_idle_actor_is_borrowed_only_between_messages() -> None:
    """borrow(idle=True) is refused while the actor handles a message or has one
    waiting, and granted once it waits for the next."""
    journal = Journal()
    gate, inside = threading.Event(), threading.Event()

    class Busy(Lazy):
        def hold(self) -> None:
            inside.set()
            assert gate.wait(5)

    ref = Busy.start(journal, "b")
    inbox: Inbox = ref.actor_inbox  # type: ignore[assignment]
    assert inbox.borrow(idle=True)  # no thread yet, nothing waiting
    inbox.give_back()
    pending = ref.ask(ProxyCall(attr_path=("hold",), args=(), kwargs={}), block=False)
    assert inside.wait(5)
    assert not inbox.borrow(idle=True)  # handling a message
    ref.tell(ProxyCall(attr_path=("ping",), args=(), kwargs={}))
    gate.set()
    pending.get(timeout=5)
    wait_until(lambda: inbox.borrow(idle=True))
    inbox.give_back()
    ref.stop()

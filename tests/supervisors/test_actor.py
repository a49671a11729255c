"""SupervisedActor: synchronous start, exit reasons on every path, crash on purpose."""

import threading

import pykka
import pytest
from pykka.messages import ProxyCall
from structlog.testing import capture_logs

from supervisors import Exit, Killed, NameTaken, StartError, SupervisedActor, kill, whereis

from ._support import Journal, Worker, wait_until


def call(ref: pykka.ActorRef, method: str, *args: object) -> object:
    return ref.ask(ProxyCall(attr_path=(method,), args=args, kwargs={}), timeout=5)


def test_start_returns_after_init_has_run() -> None:
    """init() is done in the actor's thread before start() returns."""
    journal = Journal()
    ref = Worker.start(journal, "w", init_delay_s=0.2)
    assert journal.of("init") == ["w"]
    assert call(ref, "ping") == "pong:w"
    ref.stop()


def test_init_failure_raises_start_error_with_the_cause_and_releases() -> None:
    """A failing init() becomes StartError; terminate() still runs; the name is free."""
    journal = Journal()
    with pytest.raises(StartError, match="refuses to start") as info:
        Worker.start(journal, "w", name="act.fail", fail_init=lambda: True)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert journal.of("exit:start_failed") == ["w"]
    assert whereis("act.fail") is None


class _Listener(SupervisedActor):
    """Keeps a helper thread of its own in ``self._thread``, as memoryd's HTTP listener
    does, and stops and joins it in terminate(); its init() may fail before starting it."""

    def __init__(self, journal: Journal, *, fail: bool) -> None:
        super().__init__(name="act.listener")
        self.journal = journal
        self.fail = fail
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    def init(self) -> None:
        if self.fail:
            raise OSError("the address is in use")
        self._thread = threading.Thread(target=self._done.wait, daemon=True)
        self._thread.start()

    def terminate(self, exit: Exit) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._done.set()
            thread.join(5.0)
        self.journal.add("released", exit.kind.value)


def test_a_failed_init_terminates_an_actor_whose_own_attribute_is_named_thread() -> None:
    """An actor whose init() raises before it set its own ``_thread`` runs terminate() to
    the end (nothing logged as terminate_failed): the actor's thread is not what a
    subclass keeps in ``self._thread``, which terminate() joins."""
    journal = Journal()
    with capture_logs() as logs, pytest.raises(StartError, match="address is in use"):
        _Listener.start(journal, fail=True)
    assert journal.of("released") == ["start_failed"]
    assert [e for e in logs if e["event"] == "terminate_failed"] == []
    assert whereis("act.listener") is None


def test_an_actor_with_its_own_thread_attribute_stops_and_joins_it() -> None:
    """The same actor started: a stop runs its terminate() to the end too."""
    journal = Journal()
    with capture_logs() as logs:
        ref = _Listener.start(journal, fail=False)
        ref.stop()
    assert journal.of("released") == ["normal"]
    assert [e for e in logs if e["event"] == "terminate_failed"] == []


def test_init_slower_than_the_start_timeout_is_abandoned() -> None:
    """start() gives up after the timeout; the late actor stops itself when init returns."""
    journal = Journal()

    class Slow(Worker):
        start_timeout_s = 0.05

    with pytest.raises(StartError, match="did not finish init"):
        Slow.start(journal, "slow", name="act.slow", init_delay_s=0.5)
    wait_until(lambda: journal.of("exit:start_failed") == ["slow"])
    wait_until(lambda: whereis("act.slow") is None)


def test_normal_stop_runs_terminate_once_with_reason_normal() -> None:
    """ActorRef.stop() is a normal exit."""
    journal = Journal()
    ref = Worker.start(journal, "w")
    ref.stop()
    assert journal.of("terminate") == ["w"]
    assert journal.of("exit:normal") == ["w"]


def test_stop_from_inside_is_a_normal_exit() -> None:
    """An actor may stop itself; that is normal too."""
    journal = Journal()
    ref = Worker.start(journal, "w")
    call(ref, "quit")
    wait_until(lambda: journal.of("exit:normal") == ["w"])


def test_crash_fails_the_caller_and_stops_the_actor() -> None:
    """crash() then raise: the caller gets the error, the actor stops as crashed."""
    journal = Journal()
    ref = Worker.start(journal, "w", name="act.crash")
    with pytest.raises(ValueError, match="w broke"):
        call(ref, "boom")
    wait_until(lambda: not ref.is_alive())
    assert journal.of("exit:crashed") == ["w"]
    assert whereis("act.crash") is None


def test_an_exception_without_crash_keeps_the_actor_running() -> None:
    """Pykka's own rule, kept: a raising ask handler alone does not stop the actor."""
    journal = Journal()
    ref = Worker.start(journal, "w")
    with pytest.raises(ValueError, match="handled"):
        call(ref, "raise_only")
    assert call(ref, "ping") == "pong:w"
    ref.stop()


def test_messages_queued_behind_a_crash_are_failed_not_lost() -> None:
    """Callers waiting behind a crash get ActorDeadError rather than hanging."""
    journal = Journal()
    ref = Worker.start(journal, "w")
    boom = ref.ask(ProxyCall(attr_path=("boom",), args=(), kwargs={}), block=False)
    later = ref.ask(ProxyCall(attr_path=("ping",), args=(), kwargs={}), block=False)
    with pytest.raises(ValueError):
        boom.get(timeout=5)
    with pytest.raises(pykka.ActorDeadError):
        later.get(timeout=5)


def test_kill_crashes_the_named_actor_with_reason_killed() -> None:
    """kill(name) makes the actor raise Killed; terminate sees reason killed."""
    journal = Journal()
    ref = Worker.start(journal, "w", name="act.kill")
    assert kill("act.kill") is True
    wait_until(lambda: not ref.is_alive())
    assert journal.of("exit:killed") == ["w"]


def test_kill_of_an_unknown_name_reports_false() -> None:
    """Nothing to kill is not an error; something that names no actor is a TypeError."""
    assert kill("act.nobody") is False
    for target in (5, None, b"act.nobody"):
        with pytest.raises(TypeError, match="a registered name or an ActorRef"):
            kill(target)  # type: ignore[arg-type]


def test_a_registered_name_is_taken_until_the_actor_dies() -> None:
    """A second actor cannot start under a live actor's name; after it stops it can."""
    journal = Journal()
    first = Worker.start(journal, "one", name="act.name")
    with pytest.raises(NameTaken):
        Worker.start(journal, "two", name="act.name")
    first.stop()
    second = Worker.start(journal, "two", name="act.name")
    assert whereis("act.name") is second
    second.stop()


def test_killed_is_an_exception_type_of_its_own() -> None:
    """Killed can be told apart from real errors in exit reasons."""
    assert issubclass(Killed, Exception)


def test_a_crash_while_a_caller_borrows_the_actor_is_restarted_without_delay() -> None:
    """crash() run in a caller's thread that borrowed the (threaded) actor's inbox: the
    supervisor does not wait on the caller's thread (it holds nothing of the actor's)
    but restarts the child at once; the old incarnation's own thread ends."""
    from supervisors import Supervisor
    from supervisors._control import borrowed_if_idle

    from ._support import worker_spec

    journal = Journal()
    sup = Supervisor.start(name="act.borrow", children=[worker_spec(journal, "act.borrow.w")])
    old = whereis("act.borrow.w")
    assert old is not None

    def crash_borrowed() -> object:
        with borrowed_if_idle(old) as actor:
            if actor is None:
                return None  # not idle yet
            actor.crash(RuntimeError("crashed while borrowed"))
            return actor

    actor = wait_until(crash_borrowed)
    # Well under the child's 5 s shutdown_s, which the supervisor waited on the caller.
    wait_until(lambda: whereis("act.borrow.w") not in (None, old), timeout=2.0)
    assert journal.of("exit:crashed") == ["act.borrow.w"]
    wait_until(lambda: not actor._sv_thread.is_alive(), timeout=2.0)
    sup.stop()

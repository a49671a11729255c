"""SupervisedActor: a Pykka actor that starts synchronously and reports its exit.

Pykka gives actors but no links: an actor that dies tells nobody, an exception
in an ``ask`` handler leaves the actor running, and ``on_stop`` is skipped after
a failure. ``SupervisedActor`` closes those gaps:

* ``start()`` returns only after ``init()`` finished in the actor's thread (a
  ready handshake with a timeout); if ``init()`` raised, ``start()`` raises
  ``StartError`` with the cause chained, after ``terminate()`` released what
  ``init()`` had acquired.
* Every exit path (start failure, stop, crash, kill, shutdown by the supervisor)
  runs ``terminate(exit)`` exactly once, frees the actor's registered name, and
  then tells the parent supervisor, in that order, so a restarted incarnation
  never overlaps the resources of the old one.
* ``crash(error)`` is the way to crash on purpose from an ``ask`` handler: the
  caller still gets the exception, and the actor stops after the handler.
* An actor class with ``lazy_thread = True`` pays for a thread only once it has a
  message to process: ``init()`` runs in the thread that calls ``start()``, the
  actor's thread starts when the first message arrives in its inbox, and
  ``shutdown_actor`` stops an actor that never started its thread in the caller's
  thread. A caller may meanwhile run code on the actor in its own thread by borrowing
  its inbox (`Inbox.borrow`).

Subclasses implement ``init()`` and ``terminate(exit)`` instead of Pykka's
``on_start``/``on_stop``/``on_failure``, and call ``super().__init__(name=...)``.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, ClassVar, Self, cast

import pykka
from pykka._envelope import Envelope

from supervisors._errors import StartError
from supervisors._exit import Exit, ExitKind
from supervisors._flag import StopFlag
from supervisors._inbox import NUDGE, Inbox
from supervisors._link import AMBIENT_KEYS, Link, Starting, ambient, wait_arg
from supervisors._log import EventLog
from supervisors._registry import register, unregister

__all__ = ["Killed", "SupervisedActor", "abandon"]

log = EventLog("supervisors")


class Killed(Exception):
    """Raised inside an actor by ``supervisors.kill``."""


class SupervisedActor(pykka.ThreadingActor):
    """A Pykka actor with a synchronous start, exit reasons and a parent link.

    Args:
        name: if given, the actor registers under this name for its lifetime
            (``supervisors.whereis(name)``); a restarted incarnation takes it back.

    Raises:
        NameTaken: from ``start()`` if ``name`` belongs to a live actor.
    """

    start_timeout_s: ClassVar[float] = 10.0
    """How long ``start()`` waits for ``init()`` when no supervisor sets it
    (``math.inf``: as long as it takes)."""

    use_daemon_thread: ClassVar[bool] = True
    """Supervised actors run on daemon threads, so a program that forgets to stop its
    supervision tree still exits (as an OTP node stops with its VM); an application
    stops its tree cleanly from an ``atexit`` handler."""

    lazy_thread: ClassVar[bool] = False
    """True: ``init()`` runs in the thread that calls ``start()``, and the actor's own
    thread starts only when the first message arrives in its inbox (an actor that never
    gets one never costs a thread). ``init()`` is then not interrupted by the start
    timeout: a start whose ``init()`` took longer fails after it returned."""

    @staticmethod
    def _create_actor_inbox() -> Any:  # Pykka's hook for actor types' inboxes
        return Inbox()

    @property
    def _lazy_inbox(self) -> Inbox:
        """The inbox of a ``lazy_thread`` actor (checked to be an `Inbox` at creation)."""
        inbox = self.actor_inbox
        assert isinstance(inbox, Inbox)
        return inbox

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__()
        # pykka's Event, swapped for a flag before anything looks at it (the ref shares it)
        flag = cast(threading.Event, StopFlag())
        self.actor_stopped = self.actor_ref.actor_stopped = flag
        if self.lazy_thread and not isinstance(self.actor_inbox, Inbox):
            raise TypeError(
                f"{type(self).__name__} has lazy_thread = True, so its inbox must be a "
                f"supervisors Inbox, not {type(self.actor_inbox).__name__}"
            )
        if isinstance(self.actor_inbox, Inbox):
            self.actor_inbox.owner = weakref.ref(self)
        self.name = name
        self._sv_thread: threading.Thread | None = None
        """The actor's thread once it runs (a ``lazy_thread`` actor's once started).
        Named apart from what subclasses use: an actor may keep a thread of its own in
        ``self._thread`` (memoryd's HTTP listener does) without hiding this one."""
        self._unthreaded_exit = False
        starting = getattr(ambient, "starting", None)
        if starting is not None and starting.urn is None:
            starting.urn = self.actor_urn
        else:
            starting = Starting(None)
        self._starting: Starting | None = starting  # until init() has answered
        self._link = starting.link
        self._exit: Exit | None = None
        self._lock = threading.Lock()
        """Guards ``_exit``, and ``_sv_thread`` and ``_unthreaded_exit`` (``lazy_thread``)."""
        if name is not None:
            register(name, self.actor_ref)

    # -- start ------------------------------------------------------------

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Self]:
        """Start the actor and wait until its ``init()`` has finished.

        Arguments are passed to the constructor. Inside a supervisor's start
        function the actor is linked to that supervisor.

        Returns:
            The ref of the running actor.

        Raises:
            StartError: ``init()`` raised (the cause is chained) or did not finish
                within the start timeout.
            NameTaken: the requested name belongs to a live actor.
        """
        link: Link | None = getattr(ambient, "link", None)
        if link is not None and link.child_urn is not None:
            link = None  # the link was taken by an earlier actor of this start function
        timeout = getattr(ambient, "start_timeout_s", None) or cls.start_timeout_s
        starting = Starting(link, timeout)
        previous = getattr(ambient, "starting", None)
        ambient.starting = starting
        try:
            ref = super().start(*args, **kwargs)
        finally:
            ambient.starting = previous
        if link is not None:
            link.child_urn = ref.actor_urn
        if not starting.ready.wait(wait_arg(timeout)):
            with starting.lock:
                if not starting.ready.is_set():
                    starting.abandoned = True
        if starting.abandoned:
            abandon(ref)  # as OTP kills a start that timed out: its name is free again
            raise StartError(
                f"{cls.__name__} did not finish init() within {timeout:g} s; "
                "it stops as soon as init() returns"
            )
        if starting.error is not None:
            raise StartError(
                f"{cls.__name__} failed to start: {type(starting.error).__name__}: {starting.error}"
            ) from starting.error
        return ref

    def _start_actor_loop(self) -> None:
        """Pykka hook: start the actor's thread, or with ``lazy_thread`` run ``init()``
        here and start the thread once a message arrives."""
        if not self.lazy_thread:
            super()._start_actor_loop()
            return
        # init() runs here, not in a fresh thread: it must neither take the link of the
        # start that runs it nor see that start's handshake.
        saved = {key: getattr(ambient, key, None) for key in AMBIENT_KEYS}
        for key in AMBIENT_KEYS:
            setattr(ambient, key, None)
        try:
            self.on_start()
        finally:
            for key, value in saved.items():
                setattr(ambient, key, value)
        if self.actor_stopped.is_set():
            self._refuse_queued()  # what was asked of it meanwhile
            return
        inbox = self._lazy_inbox
        with inbox.mutex:
            inbox.lazy = self  # held by its inbox, which wakes it, until its thread runs
            inbox.busy = False  # ready: a caller may borrow it until its thread runs
        if inbox.qsize():
            self._wake()  # messages came while init() ran

    def _wake(self) -> None:
        """A message arrived: start the actor's thread if it has none (``lazy_thread``)."""
        if self._sv_thread is not None:
            return
        with self._lock:
            if self._sv_thread is not None:
                return
            late = self._unthreaded_exit
            if not late:
                self._sv_thread = threading.Thread(
                    target=self._lazy_loop,
                    name=f"{type(self).__name__}-{self.name or self.actor_urn[9:17]}",
                    daemon=self.use_daemon_thread,
                )
                self._sv_thread.start()
                self._lazy_inbox.lazy = None  # its thread holds it now
        if late:
            self._refuse_queued()  # it stopped without a thread

    def _lazy_loop(self) -> None:
        """The thread of a ``lazy_thread`` actor: its ``init()`` already ran."""
        self._actor_loop_running()
        self._actor_loop_teardown()

    def _stop_unthreaded(self, detail: str | None) -> bool:
        """Stop with reason ``shutdown`` in the caller's thread, if the actor never
        started its thread and no caller has borrowed its inbox.

        Returns:
            True when it stopped here; False when the stop must go through its inbox.
        """
        inbox = self._lazy_inbox
        with self._lock:
            if self._sv_thread is not None or self._unthreaded_exit or self.actor_stopped.is_set():
                return False
            if not inbox.borrow():  # a caller runs code on it in its thread: queue the stop
                return False
            self._unthreaded_exit = True
        try:
            self._sv_shutdown(detail)
        finally:
            inbox.give_back()
        self._refuse_queued()  # a message that raced the stop
        return True

    def _refuse_queued(self) -> None:
        """Answer what waits in the inbox of an actor that stopped without its thread, as
        Pykka does when an actor's loop ends, and whatever comes later (`Inbox.close`)."""
        self._lazy_inbox.close(f"{self.actor_ref} stopped before its message")

    def on_start(self) -> None:
        """Pykka hook: run ``init()`` and answer the ready handshake. Do not override."""
        starting, self._starting = self._starting, None  # start() holds it meanwhile
        assert starting is not None
        if not self.lazy_thread:
            self._sv_thread = threading.current_thread()  # the thread Pykka started for it
        began = time.monotonic()
        try:
            self.init()
        except Exception as exc:
            starting.error = exc
            self._finish(Exit(kind=ExitKind.START_FAILED, error=exc), notify=False)
            self._halt()
            starting.ready.set()
            return
        with starting.lock:
            if self.lazy_thread and time.monotonic() - began > starting.timeout_s > 0:
                starting.abandoned = True  # init() ran in start()'s thread, past the timeout
            abandoned = starting.abandoned
            starting.ready.set()
        if abandoned:
            self._finish(Exit(kind=ExitKind.START_FAILED, detail="start_timeout"), notify=False)
            self._halt()

    # -- hooks for subclasses ---------------------------------------------

    def init(self) -> None:
        """Acquire resources. Runs in the actor's thread; raising fails the start."""

    def terminate(self, exit: Exit) -> None:
        """Release resources. Runs once, in the actor's thread, on every exit path.

        Args:
            exit: why the actor is stopping.
        """

    # -- exits ------------------------------------------------------------

    @property
    def exit_reason(self) -> Exit | None:
        """Why the actor stopped, or None while it runs."""
        return self._exit

    def crash(self, error: BaseException) -> None:
        """Crash on purpose: stop after the current message with reason ``crashed``.

        Call it from a handler, then raise ``error`` so an ``ask`` caller receives
        it. Messages still queued are failed with ``pykka.ActorDeadError``.

        Args:
            error: the reason, reported to the supervisor.
        """
        kind = ExitKind.KILLED if isinstance(error, Killed) else ExitKind.CRASHED
        self._finish(Exit(kind=kind, error=error))
        self._halt()

    def on_stop(self) -> None:
        """Pykka hook for ``ActorRef.stop()``: a normal exit. Do not override."""
        self._finish(Exit(kind=ExitKind.NORMAL))

    def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
        """Pykka hook for an exception in a ``tell`` handler: a crash. Do not override."""
        error = exception_value if isinstance(exception_value, BaseException) else None
        kind = ExitKind.KILLED if isinstance(error, Killed) else ExitKind.CRASHED
        self._finish(Exit(kind=kind, error=error))

    def _sv_kill(self, reason: str) -> None:
        """Control message: crash as if a handler raised (fault injection)."""
        self.crash(Killed(reason))

    def _sv_nudge(self) -> None:
        """Control message: nothing (it wakes the thread of an actor stopped elsewhere)."""

    def _sv_shutdown(self, detail: str | None) -> None:
        """Control message: the supervisor stops this actor."""
        self._finish(Exit(kind=ExitKind.SHUTDOWN, detail=detail))
        self._halt()

    def _abandon(self) -> None:
        """Dead to everyone from now on, from any thread: OTP's kill of a child that did
        not stop within its shutdown, or did not start within its start timeout.

        Python cannot stop a thread, so the code the actor runs goes on, but the actor is
        no longer alive, its name is free for the next incarnation, and new messages are
        refused; once that code returns, the actor terminates (reason ``killed``, detail
        ``shutdown_timeout``, unless it had an exit already) and stops. An idle actor
        terminates at once, in its own thread (one started for it if it had none).
        """
        unthreaded = self.lazy_thread and self._lazy_inbox.lazy is self
        self._halt()
        if self.name is not None:
            unregister(self.name, self.actor_ref)
        if unthreaded and self._exit is None:
            self._wake()  # a thread whose loop ends at once, to terminate it

    def _actor_loop_teardown(self) -> None:
        """Pykka hook: the loop ended; an actor abandoned while it ran a handler
        terminates now, then what is queued, or comes later, is failed."""
        if self._exit is None:
            if isinstance(self.actor_inbox, Inbox):
                self.actor_inbox.wait_given_back()  # code a caller runs on it ends first
            self._finish(Exit(kind=ExitKind.KILLED, detail="shutdown_timeout"))
        inbox = self.actor_inbox
        if isinstance(inbox, Inbox):  # also refuses a message that passed is_alive() late
            inbox.close(f"{self.actor_ref} stopped before handling the message")
        super()._actor_loop_teardown()

    def _halt(self) -> None:
        """Stop the message loop after the current message (from another thread: once
        its thread, if it waits for a message, is woken)."""
        pykka.ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        if self.lazy_thread:
            self._lazy_inbox.lazy = None
        if self._own_thread() is None:
            self.actor_inbox.put(Envelope(NUDGE))

    def _finish(self, exit: Exit, *, notify: bool = True) -> None:
        with self._lock:
            if self._exit is not None:
                return
            self._exit = exit
        try:
            self.terminate(exit)
        except Exception as exc:
            log.error(
                "terminate_failed",
                actor=self.name or str(self),
                error=repr(exc),
                exit=exit.describe(),
            )
        if self.name is not None:
            unregister(self.name, self.actor_ref)
        link = self._link
        if link is not None:
            link.finished()
            if notify:
                link.on_exit(self.actor_urn, exit, self._own_thread())

    def _own_thread(self) -> threading.Thread | None:
        """The actor's thread if the current thread is it (a supervisor joins it); None
        in any other thread: a caller's that borrowed its inbox, or that stopped a
        ``lazy_thread`` actor without a thread, holds nothing of the actor's to join."""
        current = threading.current_thread()
        return current if current is self._sv_thread else None


def abandon(ref: pykka.ActorRef[Any]) -> None:
    """Make an actor dead to everyone at once, from any thread (OTP's ``exit(Pid, kill)``).

    It is no longer alive, its name is free (a name held by a dead actor is), and new
    messages are refused; the code it runs goes on (a thread cannot be stopped), and
    once that returns a ``SupervisedActor`` terminates with reason ``killed`` and stops.

    Args:
        ref: the actor.
    """
    inbox = ref.actor_inbox
    actor = inbox.owner() if isinstance(inbox, Inbox) and inbox.owner is not None else None
    if isinstance(actor, SupervisedActor):
        actor._abandon()
    else:  # an actor with an inbox of its own: not alive is enough to free its name
        pykka.ActorRegistry.unregister(ref)
        ref.actor_stopped.set()

"""The supervisor's actor: its children table, their starts and stops, and restarts.

Every method runs in the actor's thread. ``Supervisor`` (in ``_supervisor``) is the
handle callers hold; it reaches this actor only through calls with a deadline.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka
from pykka.messages import ProxyCall

from supervisors._actor import SupervisedActor, abandon
from supervisors._backoff import BackoffWindow
from supervisors._control import shutdown_actor
from supervisors._errors import ChildRunning, ChildSpecError, StartError, UnknownChild
from supervisors._exit import Exit, ExitKind
from supervisors._intensity import RestartIntensity
from supervisors._link import Link, linked, wait_arg
from supervisors._log import EventLog
from supervisors._plan import plan_restart
from supervisors._spec import (
    ChildSpec,
    Restart,
    Strategy,
    shutdown_limit_s,
    start_limit_s,
    validate_spec,
)

__all__ = ["ChildInfo", "Clock"]

log = EventLog("supervisors")

Clock = Callable[[], float]
"""A monotonic time source: called with no arguments, returns seconds."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChildInfo:
    """One row of ``which_children()``.

    Attributes:
        id: the child's id.
        ref: its current ActorRef, or None while it is not running.
        supervisor: True if the child is itself a supervisor.
        restart: its restart type.
    """

    id: str
    ref: pykka.ActorRef[Any] | None
    supervisor: bool
    restart: Restart


class _Child:
    __slots__ = ("link", "ref", "restarting", "spec", "stopping", "waiting", "window")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.ref: pykka.ActorRef[Any] | None = None
        self.link: Link | None = None
        self.window: BackoffWindow | None = None
        self.waiting: threading.Timer | None = None
        """The timer of a delayed restart (a child with a backoff), or None."""
        self.restarting = False
        """True while a restart of it is due (OTP's ``restarting`` child): its start
        failed and is retried (`_try_again`), or its backoff delays it. Without it a child
        that is not running was terminated or deleted and stays so."""
        self.stopping: pykka.ActorRef[Any] | None = None
        """The incarnation `_stop_child` is stopping (``ref`` is None meanwhile)."""

    def cancel_restart(self) -> None:
        self.restarting = False
        timer, self.waiting = self.waiting, None
        if timer is not None:
            timer.cancel()

    @property
    def id(self) -> str:
        return self.spec.id


def _join(thread: threading.Thread | None, timeout_s: float) -> None:
    if thread is not None and thread is not threading.current_thread():
        thread.join(wait_arg(timeout_s))


class _SupervisorActor(SupervisedActor):
    """The supervisor's actor. Every method runs in the actor's thread, but `_abandon`."""

    start_timeout_s = math.inf
    """A supervisor's ``init()`` starts its children, each within its own start
    timeout (and on a failure stops those started, each within its shutdown): it has no
    limit of its own, as in OTP, unless its parent's spec or ``Supervisor.start`` sets one."""

    def __init__(
        self,
        *,
        name: str | None,
        strategy: Strategy,
        max_restarts: int,
        period_s: float,
        children: tuple[ChildSpec, ...],
        clock: Clock,
        dynamic: bool,
    ) -> None:
        super().__init__(name=name)
        self._label = name or self.actor_urn
        self._strategy = strategy
        self._intensity = RestartIntensity(max_restarts, period_s)
        self._clock = clock
        self._dynamic = dynamic
        self._children = {spec.id: _Child(spec) for spec in children}
        """The children by id, in start order."""

    # -- lifecycle --------------------------------------------------------

    def init(self) -> None:
        """Start every child in order; on a failure stop those already started."""
        for child in self._children.values():
            try:
                self._start_child(child)
            except StartError:
                self._stop_all()
                raise

    def terminate(self, exit: Exit) -> None:
        """Stop every running child in reverse start order."""
        self._stop_all()

    def _abandon(self) -> None:
        """Abandoned (its parent gave up waiting for its stop or its start), from any
        thread: its whole subtree is abandoned with it, so no descendant outlives the
        tree under a registered name (OTP: a killed supervisor's children die with it).
        Each terminates once the code it runs returns, an idle one at once."""
        super()._abandon()
        # Read from the abandoning thread; a copy of the dict is taken in one step.
        children = list(self._children.values())
        running = [(c.id, c.ref or c.stopping) for c in children]
        abandoned = [cid for cid, ref in running if ref is not None and ref.is_alive()]
        if abandoned:
            log.error("children_abandoned", supervisor=self._label, children=abandoned)
        for _, ref in running:
            if ref is not None:
                abandon(ref)

    # -- calls from the handle ----------------------------------------------

    def which_children(self) -> list[ChildInfo]:
        """Runs in the actor's thread."""
        return [
            ChildInfo(id=c.id, ref=c.ref, supervisor=c.spec.supervisor, restart=c.spec.restart)
            for c in self._children.values()
        ]

    def count_children(self) -> dict[str, int]:
        """Runs in the actor's thread."""
        supervisors = sum(1 for c in self._children.values() if c.spec.supervisor)
        return {
            "specs": len(self._children),
            "active": sum(1 for c in self._children.values() if c.ref is not None),
            "supervisors": supervisors,
            "workers": len(self._children) - supervisors,
        }

    def start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        """Add a child and start it. Runs in the actor's thread."""
        validate_spec(spec)
        if spec.id in self._children:
            raise ChildSpecError(f"supervisor {self._label!r} already has a child {spec.id!r}")
        child = _Child(spec)
        self._children[spec.id] = child
        try:
            return self._start_child(child)
        except BaseException:
            self._forget(child)
            raise

    def terminate_child(self, child_id: str) -> None:
        """Stop a child; a static supervisor keeps its spec unless the child is temporary.

        Runs in the actor's thread.
        """
        child = self._find(child_id)
        child.cancel_restart()
        self._stop_child(child)
        if self._dynamic or child.spec.restart is Restart.TEMPORARY:
            self._forget(child)  # OTP keeps no spec of a temporary child once it is gone

    def restart_child(self, child_id: str) -> pykka.ActorRef[Any]:
        """Start a terminated child again from its spec. Runs in the actor's thread."""
        child = self._find(child_id)
        if child.ref is not None:
            raise ChildRunning(f"child {child_id!r} of {self._label!r} is running")
        child.cancel_restart()
        return self._start_child(child)

    def child_wait_s(self, method: str, args: tuple[Any, ...]) -> float:
        """How long the call ``method(*args)`` may wait for a child: its spec's start
        limit (``start_child``, ``restart_child``) or shutdown limit (``terminate_child``),
        0.0 when it waits for none (no such child, or one not running). Runs in the
        thread that borrows the actor's inbox, before it runs the call there.

        Args:
            method: the name of the call.
            args: its arguments (a validated spec, or a child id).

        Returns:
            Seconds, ``math.inf`` for no limit.
        """
        if method == "start_child":
            return start_limit_s(args[0])
        child = self._children.get(args[0])
        if child is None:
            return 0.0
        if method == "restart_child":
            return 0.0 if child.ref is not None else start_limit_s(child.spec)
        if method == "terminate_child":
            return 0.0 if child.ref is None else shutdown_limit_s(child.spec)
        return math.inf

    def delete_child(self, child_id: str) -> None:
        """Forget a terminated child's spec. Runs in the actor's thread."""
        child = self._find(child_id)
        if child.ref is not None:
            raise ChildRunning(
                f"child {child_id!r} of {self._label!r} is running; terminate it first"
            )
        child.cancel_restart()
        self._forget(child)

    # -- events -------------------------------------------------------------

    def _child_exited(
        self, child_id: str, urn: str, exit: Exit, thread: threading.Thread | None
    ) -> None:
        """A linked child finished terminating. Runs in the actor's thread."""
        child = self._children.get(child_id)
        if child is None or child.ref is None or child.ref.actor_urn != urn:
            return  # an incarnation this supervisor already stopped or replaced
        child.ref = None
        _join(thread, shutdown_limit_s(child.spec))
        restart = child.spec.restart
        # As OTP's child_terminated report: any exit of a permanent child is unexpected.
        level = log.error if exit.abnormal or restart is Restart.PERMANENT else log.info
        level("child_terminated", supervisor=self._label, child=child.id, reason=exit.describe())
        if restart is Restart.TEMPORARY or (restart is Restart.TRANSIENT and not exit.abnormal):
            if restart is Restart.TEMPORARY or self._dynamic:
                self._forget(child)
            return
        if child.spec.backoff is not None:
            self._restart_backed_off(child)
        else:
            self._restart(child.id)

    def _try_again(self, child_id: str) -> None:
        """Retry a restart that failed to start, unless the child was terminated,
        deleted or started by hand meanwhile. Runs in the actor's thread."""
        child = self._children.get(child_id)
        if child is not None and child.restarting and child.ref is None:
            self._restart(child_id)

    def _restart_due(self, child_id: str, timer: threading.Timer) -> None:
        """A delayed restart's time has come. Runs in the actor's thread."""
        child = self._children.get(child_id)
        if child is None or child.waiting is not timer or child.ref is not None:
            return  # cancelled: terminated, deleted or started by hand meanwhile
        child.waiting = None
        self._restart(child_id, counted=False)

    # -- internals ----------------------------------------------------------

    def _restart_backed_off(self, child: _Child) -> None:
        """Restart a child with a backoff: at once inside its window, later past it.

        Its restarts never count toward the supervisor's intensity.
        """
        assert child.spec.backoff is not None
        if child.window is None:
            child.window = BackoffWindow(
                child.spec.backoff, self._intensity.max_restarts, self._intensity.period_s
            )
        delay = child.window.next_delay(self._clock())
        if delay <= 0:
            self._restart(child.id, counted=False)
            return
        me = self.actor_ref

        def due() -> None:
            message = ProxyCall(attr_path=("_restart_due",), args=(child.id, timer), kwargs={})
            with contextlib.suppress(pykka.ActorDeadError):
                me.tell(message)

        timer = threading.Timer(delay, due)
        timer.daemon = True
        child.cancel_restart()
        child.waiting = timer
        child.restarting = True
        log.warning(
            "child_restart_delayed",
            supervisor=self._label,
            child=child.id,
            delay_s=round(delay, 3),
            restarts_past_window=child.window.over,
        )
        timer.start()

    def _restart(self, child_id: str, *, counted: bool = True) -> None:
        if counted and not self._intensity.record(self._clock()):
            log.error(
                "reached_max_restart_intensity",
                supervisor=self._label,
                child=child_id,
                max_restarts=self._intensity.max_restarts,
                period_s=self._intensity.period_s,
            )
            # Dead to every observer first (is_alive() turns False), then stop the
            # children: a call waiting on a child sees the tree gone at once, not
            # after the children's shutdown.
            self._halt()
            self._finish(Exit(kind=ExitKind.SHUTDOWN, detail="reached_max_restart_intensity"))
            return
        plan = plan_restart(
            self._strategy, [(c.id, c.spec.restart) for c in self._children.values()], child_id
        )
        for sibling in plan.stop:
            self._stop_child(self._find(sibling))
        self._children = {i: c for i, c in self._children.items() if i not in plan.delete}
        for cid in plan.start:
            child = self._find(cid)
            if child.ref is not None:
                continue
            try:
                self._start_child(child)
            except StartError as exc:
                log.error("restart_failed", supervisor=self._label, child=cid, error=str(exc))
                child.restarting = True
                if child.spec.backoff is not None:
                    self._restart_backed_off(child)
                else:
                    self.actor_ref.tell(
                        ProxyCall(attr_path=("_try_again",), args=(cid,), kwargs={})
                    )
                return
            log.info(
                "child_restarted",
                supervisor=self._label,
                child=cid,
                restarts_in_window=self._intensity.in_window,
            )

    def _start_child(self, child: _Child) -> pykka.ActorRef[Any]:
        spec = child.spec
        me = self.actor_ref

        def on_exit(urn: str, exit: Exit, thread: threading.Thread | None) -> None:
            message = ProxyCall(
                attr_path=("_child_exited",), args=(spec.id, urn, exit, thread), kwargs={}
            )
            with contextlib.suppress(pykka.ActorDeadError):  # a dead supervisor needs no news
                me.tell(message)

        with linked(on_exit, start_limit_s(spec)) as link:
            try:
                result = spec.start(*spec.args)
            except Exception as exc:
                # The child's own StartError ("Bad failed to start: OSError: ...") names
                # neither the child nor this supervisor; its cause (what init() raised)
                # stays the cause, and a start timeout, which has none, is the cause.
                what = str(exc) if isinstance(exc, StartError) else f"{type(exc).__name__}: {exc}"
                error = StartError(f"child {spec.id!r} of {self._label!r} failed to start: {what}")
                raise error from (exc.__cause__ if isinstance(exc, StartError) else None) or exc
        ref = result if isinstance(result, pykka.ActorRef) else getattr(result, "actor_ref", None)
        if not isinstance(ref, pykka.ActorRef) or link.child_urn != ref.actor_urn:
            if isinstance(ref, pykka.ActorRef):
                shutdown_actor(ref, shutdown_limit_s(spec), "unlinked")
            raise StartError(
                f"child {spec.id!r}: start must return the SupervisedActor it started "
                f"(an ActorRef or a handle with .actor_ref), not {result!r}"
            )
        child.ref = ref
        child.link = link
        child.restarting = False
        log.info("child_started", supervisor=self._label, child=spec.id)
        return ref

    def _stop_child(self, child: _Child) -> None:
        ref, child.ref = child.ref, None
        if ref is None:
            return
        limit = shutdown_limit_s(child.spec)
        deadline = time.monotonic() + limit  # one shutdown_s in all
        child.stopping = ref
        try:
            stopped = shutdown_actor(ref, limit, "shutdown")
            # It may have been exiting on its own (a crash racing the stop): either way,
            # return only once it has released what it owns, within what is left.
            if stopped and child.link is not None:
                stopped = child.link.wait_finished(max(0.0, deadline - time.monotonic()))
        finally:
            child.stopping = None
        if not stopped:
            # OTP kills a child that outlives its shutdown; here it is abandoned: dead to
            # everyone and its name free, so a restart can take it (see `_abandon`); a
            # supervisor's whole subtree with it (`_SupervisorActor._abandon`).
            log.error(
                "child_shutdown_timeout",
                supervisor=self._label,
                child=child.id,
                shutdown_s=limit,
            )
            abandon(ref)

    def _stop_all(self) -> None:
        for child in reversed(self._children.values()):
            child.cancel_restart()
            self._stop_child(child)

    def _forget(self, child: _Child) -> None:
        if self._children.get(child.id) is child:
            del self._children[child.id]

    def _find(self, child_id: str) -> _Child:
        child = self._children.get(child_id)
        if child is not None:
            return child
        raise UnknownChild(f"supervisor {self._label!r} has no child {child_id!r}")

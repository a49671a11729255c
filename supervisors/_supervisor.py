"""Supervisors: actors that start, watch and restart other actors (OTP's supervisor).

``Supervisor`` and ``DynamicSupervisor`` are handles on a running supervisor actor
(``_supervisor_actor``); every call through them has a deadline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any, Self

import pykka
from pykka.messages import ProxyCall

from supervisors._control import borrowed_if_idle
from supervisors._errors import CallTimeout, ChildSpecError, StartError, SupervisorError
from supervisors._intensity import RestartIntensity
from supervisors._link import ambient
from supervisors._spec import ChildSpec, Strategy, validate_children, validate_spec
from supervisors._supervisor_actor import ChildInfo, Clock, _SupervisorActor

__all__ = ["DynamicSupervisor", "Supervisor"]

_BORROWABLE = frozenset({"which_children", "count_children", "delete_child"})
"""The calls that never wait for a child: one to an idle supervisor runs in the caller's
thread. The others wait for a child to start or to stop: they run there only when the
child's own limit ends that wait within the call's deadline (`_SupervisorActor.child_wait_s`),
and go through the supervisor's thread otherwise, where the deadline holds."""


def _check_call_timeout(call_timeout_s: object) -> float:
    """``call_timeout_s`` as a float, once it is a finite number of seconds > 0.

    Raises:
        ChildSpecError: anything else (a bool, a string, 0, NaN, infinity).
    """
    if (
        isinstance(call_timeout_s, int | float)
        and not isinstance(call_timeout_s, bool)
        and math.isfinite(call_timeout_s)
        and call_timeout_s > 0
    ):
        return float(call_timeout_s)
    raise ChildSpecError(
        f"call_timeout_s must be a finite number of seconds > 0, not {call_timeout_s!r}"
    )


def _check_start_timeout(start_timeout_s: object) -> None:
    ok = start_timeout_s is None or (
        isinstance(start_timeout_s, int | float)
        and not isinstance(start_timeout_s, bool)
        and not math.isnan(start_timeout_s)
        and start_timeout_s > 0
    )
    if not ok:
        raise ChildSpecError(
            f"start_timeout_s must be a number of seconds > 0 (math.inf: no limit) or None, "
            f"not {start_timeout_s!r}"
        )


class Supervisor:
    """A handle on a running supervisor: what ``Supervisor.start`` returns.

    Every call has a deadline (``call_timeout_s``); a supervisor that does not
    answer in time raises ``CallTimeout``. As with OTP's ``gen_server:call``, the
    supervisor goes on with the request: a ``start_child`` or ``restart_child`` that
    timed out may still start the child, which it then keeps (``which_children``
    shows it), and a ``terminate_child`` still stops it.

    A call to an idle supervisor (it handles no message and has none waiting) runs in
    the caller's thread, with its inbox borrowed meanwhile, exactly as the supervisor's
    thread would have run it, saving two thread hand-offs, when it cannot outlast
    ``call_timeout_s``: ``which_children``, ``count_children`` and ``delete_child``,
    which wait for no child, and ``start_child``, ``restart_child`` and
    ``terminate_child`` when the child's own limit (its spec's ``start_timeout_s``, or
    ``shutdown_s``) is shorter than ``call_timeout_s``. Otherwise, and whenever the
    supervisor is busy, the call goes through its thread. The child's limit bounds the
    wait for the child's ``init()`` or ``terminate()`` in the child's thread; a
    ``lazy_thread`` child runs them in the thread that starts or stops it, the caller's
    here, where no limit interrupts them (a start that took longer fails once
    ``init()`` returned), as does the code of a start function before it starts the
    child.

    Raises:
        ChildSpecError: ``call_timeout_s`` is not a finite number > 0.
    """

    _dynamic = False

    def __init__(
        self, ref: pykka.ActorRef[Any], *, name: str | None = None, call_timeout_s: float = 30.0
    ) -> None:
        self.actor_ref = ref
        self.name = name
        self.call_timeout_s = _check_call_timeout(call_timeout_s)

    @classmethod
    def start(
        cls,
        *,
        name: str | None = None,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        period_s: float = 5.0,
        children: Iterable[ChildSpec] = (),
        clock: Clock = time.monotonic,
        call_timeout_s: float = 30.0,
        start_timeout_s: float | None = None,
    ) -> Self:
        """Start a supervisor and all its children, in order.

        Returns after every child confirmed it is ready. As in OTP, the start has no
        time limit of its own: each child is given its own ``start_timeout_s``, and if one
        fails, those already started are stopped, each within its ``shutdown_s``.

        Args:
            name: register the supervisor under this name.
            strategy: what else is restarted when a child dies.
            max_restarts: restarts tolerated within ``period_s``.
            period_s: the restart-intensity window.
            children: child specs in start order.
            clock: monotonic time source (tests inject a fake one).
            call_timeout_s: the deadline of every call made through this handle (a
                finite number of seconds > 0).
            start_timeout_s: if given, the most seconds the whole start may take
                (``math.inf``: no limit); a start past it fails, and the children it
                started are abandoned and stopped. None (the default): no limit of its
                own, or the ``start_timeout_s`` of the spec that starts it under a parent.

        Returns:
            A handle on the running supervisor.

        Raises:
            ChildSpecError: bad settings or specs, found before anything starts.
            StartError: a child failed to start (the error names the child and its
                supervisor; the child's exception is chained); those already started
                were stopped. Or the start took longer than ``start_timeout_s``.
            NameTaken: ``name`` is registered to a live actor.
        """
        if not isinstance(strategy, Strategy):
            raise ChildSpecError(f"strategy must be a Strategy, not {strategy!r}")
        if cls._dynamic and strategy is not Strategy.ONE_FOR_ONE:
            raise ChildSpecError("a DynamicSupervisor's strategy is always ONE_FOR_ONE")
        specs = validate_children(children)
        try:
            RestartIntensity(max_restarts, period_s)
        except ValueError as exc:
            raise ChildSpecError(str(exc)) from None
        call_timeout_s = _check_call_timeout(call_timeout_s)
        _check_start_timeout(start_timeout_s)
        previous = getattr(ambient, "start_timeout_s", None)
        if start_timeout_s is not None:
            ambient.start_timeout_s = start_timeout_s
        try:
            ref = _SupervisorActor.start(
                name=name,
                strategy=strategy,
                max_restarts=max_restarts,
                period_s=period_s,
                children=specs,
                clock=clock,
                dynamic=cls._dynamic,
            )
        except StartError as exc:
            inner = exc.__cause__
            if not isinstance(inner, StartError):  # it did not finish in time
                label = "an unnamed supervisor" if name is None else f"supervisor {name!r}"
                raise StartError(f"{label} failed to start: {exc}") from inner
            # A child failed: its error names the child and this supervisor already.
            raise StartError(str(inner)) from inner.__cause__
        finally:
            ambient.start_timeout_s = previous
        return cls(ref, name=name, call_timeout_s=call_timeout_s)

    def is_alive(self) -> bool:
        """True while the supervisor runs."""
        return self.actor_ref.is_alive()

    def which_children(self) -> list[ChildInfo]:
        """Every child, in start order, with its current ref (None if not running)."""
        return self._call("which_children")  # type: ignore[no-any-return]

    def count_children(self) -> dict[str, int]:
        """OTP's counts: ``specs``, ``active``, ``supervisors``, ``workers``."""
        return self._call("count_children")  # type: ignore[no-any-return]

    def start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        """Add ``spec`` and start the child.

        Raises:
            ChildSpecError: the id is taken or the spec is invalid.
            StartError: the child failed to start (the spec is not kept).
            CallTimeout: no answer within ``call_timeout_s``; the supervisor goes on
                with the start, and keeps the child if it starts.
        """
        validate_spec(spec)
        return self._call("start_child", spec)  # type: ignore[no-any-return]

    def terminate_child(self, child_id: str) -> None:
        """Stop a child (a static supervisor keeps its spec for ``restart_child``, unless
        the child is temporary: as in OTP, a temporary child's spec goes with it).

        A child whose restart is due (its start failed and is retried, or its backoff
        delays it) is terminated too: no pending restart starts it again.

        Raises:
            UnknownChild: no such child.
            CallTimeout: no answer within ``call_timeout_s``; the supervisor goes on
                stopping the child.
        """
        self._call("terminate_child", child_id)

    def restart_child(self, child_id: str) -> pykka.ActorRef[Any]:
        """Start a terminated child again.

        Raises:
            UnknownChild: no such child.
            ChildRunning: it is running.
            StartError: it failed to start.
            CallTimeout: no answer within ``call_timeout_s``; the supervisor goes on
                with the start.
        """
        return self._call("restart_child", child_id)  # type: ignore[no-any-return]

    def delete_child(self, child_id: str) -> None:
        """Forget a terminated child.

        Raises:
            UnknownChild: no such child.
            ChildRunning: it is running.
        """
        self._call("delete_child", child_id)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the children in reverse start order, then the supervisor.

        Each child is given its spec's ``shutdown_s`` (a nested supervisor, by default,
        as long as its own children's shutdowns take). A child still running past it is
        abandoned, as OTP kills it: logged as the error ``child_shutdown_timeout``, it
        is dead to everyone and its name is free, and so is every actor of its subtree
        when it is a supervisor (``children_abandoned``); each terminates, with reason
        ``killed``, once the code it runs returns. So once ``stop`` returns, no actor of
        the tree holds a registered name.

        Args:
            timeout_s: deadline for the whole stop (default ``call_timeout_s``).

        Raises:
            CallTimeout: the supervisor did not finish stopping in time.
        """
        timeout = self.call_timeout_s if timeout_s is None else timeout_s
        try:
            self.actor_ref.stop(block=True, timeout=timeout)
        except pykka.Timeout:
            raise CallTimeout(f"supervisor did not stop within {timeout:g} s") from None

    def _call(self, method: str, *args: Any) -> Any:
        with borrowed_if_idle(self.actor_ref) as actor:
            # idle: run it here, saving two thread hand-offs, if it ends within the deadline
            if isinstance(actor, _SupervisorActor) and (
                method in _BORROWABLE or actor.child_wait_s(method, args) < self.call_timeout_s
            ):
                return getattr(actor, method)(*args)
        try:
            return self.actor_ref.ask(
                ProxyCall(attr_path=(method,), args=args, kwargs={}), timeout=self.call_timeout_s
            )
        except pykka.Timeout:
            raise CallTimeout(
                f"supervisor did not answer {method} within {self.call_timeout_s:g} s"
            ) from None
        except pykka.ActorDeadError:
            raise SupervisorError(f"the supervisor is not running ({method})") from None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.actor_ref.actor_urn}>"


class DynamicSupervisor(Supervisor):
    """A one_for_one supervisor whose children are started on demand.

    Children leave the supervisor when they are terminated or exit without a
    restart (OTP's simple_one_for_one / Elixir's DynamicSupervisor).
    """

    _dynamic = True

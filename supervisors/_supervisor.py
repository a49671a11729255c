"""Supervisors: actors that start, watch and restart other actors (OTP's supervisor).

``Supervisor`` and ``DynamicSupervisor`` are handles on a running supervisor actor
(``_supervisor_actor``); every call through them has a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Self

import pykka
from pykka.messages import ProxyCall

from supervisors._control import borrowed_if_idle
from supervisors._errors import CallTimeout, ChildSpecError, SupervisorError
from supervisors._intensity import RestartIntensity
from supervisors._spec import ChildSpec, Strategy, validate_children, validate_spec
from supervisors._supervisor_actor import ChildInfo, Clock, _SupervisorActor

__all__ = ["DynamicSupervisor", "Supervisor"]


class Supervisor:
    """A handle on a running supervisor: what ``Supervisor.start`` returns.

    Every call has a deadline (``call_timeout_s``); a supervisor that does not
    answer in time raises ``CallTimeout``. A call to an idle supervisor (it handles no
    message and has none waiting) runs in the caller's thread, with the supervisor's
    inbox borrowed meanwhile, exactly as the supervisor's thread would have run it.
    """

    _dynamic = False

    def __init__(
        self, ref: pykka.ActorRef[Any], *, name: str | None = None, call_timeout_s: float = 30.0
    ) -> None:
        self.actor_ref = ref
        self.name = name
        self.call_timeout_s = call_timeout_s

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
    ) -> Self:
        """Start a supervisor and all its children, in order.

        Returns after every child confirmed it is ready.

        Args:
            name: register the supervisor under this name.
            strategy: what else is restarted when a child dies.
            max_restarts: restarts tolerated within ``period_s``.
            period_s: the restart-intensity window.
            children: child specs in start order.
            clock: monotonic time source (tests inject a fake one).
            call_timeout_s: the deadline of every call made through this handle.

        Returns:
            A handle on the running supervisor.

        Raises:
            ChildSpecError: bad settings or specs, found before anything starts.
            StartError: a child failed to start; those already started were stopped.
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
        ref = _SupervisorActor.start(
            name=name,
            strategy=strategy,
            max_restarts=max_restarts,
            period_s=period_s,
            children=specs,
            clock=clock,
            dynamic=cls._dynamic,
        )
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
        """
        validate_spec(spec)
        return self._call("start_child", spec)  # type: ignore[no-any-return]

    def terminate_child(self, child_id: str) -> None:
        """Stop a child (a static supervisor keeps its spec for ``restart_child``, unless
        the child is temporary: as in OTP, a temporary child's spec goes with it).

        Raises:
            UnknownChild: no such child.
        """
        self._call("terminate_child", child_id)

    def restart_child(self, child_id: str) -> pykka.ActorRef[Any]:
        """Start a terminated child again.

        Raises:
            UnknownChild: no such child.
            ChildRunning: it is running.
            StartError: it failed to start.
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
            if actor is not None:  # idle: run it here, saving two thread hand-offs
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

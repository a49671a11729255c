"""Child specifications: frozen values, validated in one place."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from supervisors._backoff import Backoff
from supervisors._errors import ChildSpecError

__all__ = [
    "ChildSpec",
    "Restart",
    "Strategy",
    "shutdown_limit_s",
    "start_limit_s",
    "validate_children",
    "validate_spec",
]

WORKER_SHUTDOWN_S = 5.0
"""A worker's ``shutdown_s`` when its spec leaves it None (OTP's 5000 ms)."""
WORKER_START_TIMEOUT_S = 10.0
"""A worker's ``start_timeout_s`` when its spec leaves it None."""


class Restart(enum.Enum):
    """When a terminated child is restarted (OTP restart types)."""

    PERMANENT = "permanent"
    """Always restarted."""
    TRANSIENT = "transient"
    """Restarted only after an abnormal exit (not normal, not shutdown)."""
    TEMPORARY = "temporary"
    """Never restarted, not even when a sibling's death takes it down."""


class Strategy(enum.Enum):
    """What else is restarted when one child dies (OTP strategies)."""

    ONE_FOR_ONE = "one_for_one"
    """Only the child that died."""
    ONE_FOR_ALL = "one_for_all"
    """Every child: the others are stopped, then all are started again."""
    REST_FOR_ONE = "rest_for_one"
    """The child that died and every child started after it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChildSpec:
    """How to start, restart and stop one child.

    Attributes:
        id: unique among the supervisor's children.
        start: a callable (called with ``args``) that starts the child and returns
            its ``pykka.ActorRef`` or an object with an ``actor_ref`` attribute (a
            nested ``Supervisor`` handle). The child must be a ``SupervisedActor``.
        args: positional arguments for ``start``.
        restart: when the child is restarted.
        shutdown_s: how long the child is given to stop; ``math.inf``: as long as it
            takes. None (the default) is OTP's default: 5 s for a worker, ``math.inf``
            for a supervisor, whose own children's shutdowns bound its stop (a shorter
            one abandons its whole subtree, see ``Supervisor.stop``).
        start_timeout_s: how long the child is given to confirm it is ready;
            ``math.inf``: as long as it takes. None (the default): 10 s for a worker,
            ``math.inf`` for a supervisor, whose own children's start timeouts bound
            its start.
        supervisor: True if the child is itself a supervisor: reported by
            ``which_children`` and ``count_children``, and it sets the defaults of
            ``shutdown_s`` and ``start_timeout_s``.
        backoff: if given, restarts of this child past the supervisor's restart
            window are delayed (see `Backoff`) instead of counted toward the
            supervisor's intensity: the supervisor never gives up because of it.
    """

    id: str
    start: Callable[..., Any]
    args: tuple[Any, ...] = ()
    restart: Restart = Restart.PERMANENT
    shutdown_s: float | None = None
    start_timeout_s: float | None = None
    supervisor: bool = False
    backoff: Backoff | None = None

    def __post_init__(self) -> None:
        validate_spec(self)


def shutdown_limit_s(spec: ChildSpec) -> float:
    """How long ``spec``'s child is given to stop (its default resolved).

    Args:
        spec: a validated spec.

    Returns:
        Seconds, ``math.inf`` for no limit.
    """
    return _resolved(spec.shutdown_s, spec, WORKER_SHUTDOWN_S)


def start_limit_s(spec: ChildSpec) -> float:
    """How long ``spec``'s child is given to start (its default resolved).

    Args:
        spec: a validated spec.

    Returns:
        Seconds, ``math.inf`` for no limit.
    """
    return _resolved(spec.start_timeout_s, spec, WORKER_START_TIMEOUT_S)


def _resolved(given: float | None, spec: ChildSpec, worker_default: float) -> float:
    """A limit the spec gives, else OTP's default: none for a supervisor (``infinity``),
    ``worker_default`` for a worker."""
    if given is not None:
        return given
    return math.inf if spec.supervisor else worker_default


def _limit(value: object, what: str, spec_id: object) -> None:
    """A time limit: None (the default), a finite number > 0 or ``math.inf``."""
    ok = value is None or (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not math.isnan(value)
        and value > 0
    )
    if not ok:
        raise ChildSpecError(
            f"child {spec_id!r}: {what} must be a number > 0 (math.inf: no limit) or None, "
            f"not {value!r}"
        )


def validate_spec(spec: ChildSpec) -> None:
    """Check one child spec.

    Args:
        spec: the spec to check.

    Raises:
        ChildSpecError: naming the child and the bad field.
    """
    if not isinstance(spec.id, str) or not spec.id:
        raise ChildSpecError(f"child id must be a non-empty str, not {spec.id!r}")
    if not callable(spec.start):
        raise ChildSpecError(f"child {spec.id!r}: start must be callable, not {spec.start!r}")
    if not isinstance(spec.args, tuple):
        raise ChildSpecError(f"child {spec.id!r}: args must be a tuple, not {type(spec.args)}")
    if not isinstance(spec.restart, Restart):
        raise ChildSpecError(f"child {spec.id!r}: restart must be a Restart, not {spec.restart!r}")
    _limit(spec.shutdown_s, "shutdown_s", spec.id)
    _limit(spec.start_timeout_s, "start_timeout_s", spec.id)
    if not isinstance(spec.supervisor, bool):
        raise ChildSpecError(f"child {spec.id!r}: supervisor must be a bool")
    if spec.backoff is not None and not isinstance(spec.backoff, Backoff):
        raise ChildSpecError(
            f"child {spec.id!r}: backoff must be a Backoff or None, not {spec.backoff!r}"
        )


def validate_children(children: Iterable[object]) -> tuple[ChildSpec, ...]:
    """Check a list of child specs as a whole.

    Args:
        children: the specs, in start order.

    Returns:
        The specs as a tuple.

    Raises:
        ChildSpecError: if an entry is not a ChildSpec or two share an id.
    """
    specs: list[ChildSpec] = []
    seen: set[str] = set()
    for spec in children:
        if not isinstance(spec, ChildSpec):
            raise ChildSpecError(f"children must be ChildSpec values, not {spec!r}")
        if spec.id in seen:
            raise ChildSpecError(f"duplicate child id {spec.id!r}")
        seen.add(spec.id)
        specs.append(spec)
    return tuple(specs)

"""Child specifications: frozen values, validated in one place."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from supervisors._backoff import Backoff
from supervisors._errors import ChildSpecError

__all__ = ["ChildSpec", "Restart", "Strategy", "validate_children", "validate_spec"]


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
        shutdown_s: how long the child is given to stop.
        start_timeout_s: how long the child is given to confirm it is ready.
        supervisor: True if the child is itself a supervisor (reporting only).
        backoff: if given, restarts of this child past the supervisor's restart
            window are delayed (see `Backoff`) instead of counted toward the
            supervisor's intensity: the supervisor never gives up because of it.
    """

    id: str
    start: Callable[..., Any]
    args: tuple[Any, ...] = ()
    restart: Restart = Restart.PERMANENT
    shutdown_s: float = 5.0
    start_timeout_s: float = 10.0
    supervisor: bool = False
    backoff: Backoff | None = None

    def __post_init__(self) -> None:
        validate_spec(self)


def _positive(value: object, what: str, spec_id: object) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
    if not ok:
        raise ChildSpecError(
            f"child {spec_id!r}: {what} must be a finite number > 0, not {value!r}"
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
    _positive(spec.shutdown_s, "shutdown_s", spec.id)
    _positive(spec.start_timeout_s, "start_timeout_s", spec.id)
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

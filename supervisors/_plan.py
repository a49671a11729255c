"""Restart planning: which children a strategy stops and starts. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from supervisors._errors import UnknownChild
from supervisors._spec import Restart, Strategy

__all__ = ["RestartPlan", "plan_restart"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RestartPlan:
    """What a supervisor does after a child died and is to be restarted.

    Attributes:
        stop: siblings to stop first, in reverse start order.
        delete: stopped siblings that are temporary: they are dropped, not restarted.
        start: children to start again, in start order (the failed one included).
    """

    stop: tuple[str, ...]
    delete: tuple[str, ...]
    start: tuple[str, ...]


def plan_restart(
    strategy: Strategy, children: Sequence[tuple[str, Restart]], failed_id: str
) -> RestartPlan:
    """Plan the restart of ``failed_id`` under ``strategy``.

    Args:
        strategy: the supervisor's strategy.
        children: every child as ``(id, restart)``, in start order.
        failed_id: the child that died and is to be restarted.

    Returns:
        The plan.

    Raises:
        UnknownChild: if ``failed_id`` is not among ``children``.
    """
    ids = [child_id for child_id, _ in children]
    if failed_id not in ids:
        raise UnknownChild(f"no child {failed_id!r}")
    if strategy is Strategy.ONE_FOR_ONE:
        affected = [failed_id]
    elif strategy is Strategy.ONE_FOR_ALL:
        affected = ids
    else:
        affected = ids[ids.index(failed_id) :]
    kinds = dict(children)
    siblings = [child_id for child_id in affected if child_id != failed_id]
    delete = tuple(c for c in siblings if kinds[c] is Restart.TEMPORARY)
    return RestartPlan(
        stop=tuple(reversed(siblings)),
        delete=delete,
        start=tuple(c for c in affected if c not in delete),
    )

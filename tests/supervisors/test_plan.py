"""plan_restart: which children each strategy stops and starts. Pure."""

import pytest

from supervisors import Restart, Strategy, UnknownChild, plan_restart

P, T = Restart.PERMANENT, Restart.TEMPORARY
CHILDREN = [("a", P), ("b", P), ("c", T), ("d", P)]


def test_one_for_one_restarts_only_the_failed_child() -> None:
    """Nothing else is touched."""
    plan = plan_restart(Strategy.ONE_FOR_ONE, CHILDREN, "b")
    assert (plan.stop, plan.delete, plan.start) == ((), (), ("b",))


def test_one_for_all_stops_siblings_in_reverse_and_starts_all_in_order() -> None:
    """Siblings stop last-started first; the temporary sibling is dropped."""
    plan = plan_restart(Strategy.ONE_FOR_ALL, CHILDREN, "b")
    assert plan.stop == ("d", "c", "a")
    assert plan.delete == ("c",)
    assert plan.start == ("a", "b", "d")


def test_rest_for_one_affects_only_later_children() -> None:
    """Children started before the failed one keep running."""
    plan = plan_restart(Strategy.REST_FOR_ONE, CHILDREN, "b")
    assert plan.stop == ("d", "c")
    assert plan.delete == ("c",)
    assert plan.start == ("b", "d")


def test_rest_for_one_on_the_last_child_is_one_for_one() -> None:
    """No child was started after the last one."""
    plan = plan_restart(Strategy.REST_FOR_ONE, CHILDREN, "d")
    assert (plan.stop, plan.start) == ((), ("d",))


def test_unknown_failed_child_is_an_error() -> None:
    """Planning for a child that does not exist raises UnknownChild."""
    with pytest.raises(UnknownChild):
        plan_restart(Strategy.ONE_FOR_ONE, CHILDREN, "zz")


def test_planning_does_not_mutate_its_input() -> None:
    """The children list is read, never changed."""
    children = list(CHILDREN)
    plan_restart(Strategy.ONE_FOR_ALL, children, "a")
    assert children == CHILDREN

"""The group-commit policy: pure, driven with explicit times."""

import pytest

from memoryd.store.group_commit import GroupCommit


def test_a_single_writer_never_waits() -> None:
    """With one writer seen before, its next write is ready at once."""
    policy = GroupCommit(max_linger_s=0.001)
    policy.committed({"w1"}, duration_s=0.0005)
    assert policy.ready({"w1"}, waited_s=0.0)


def test_a_batch_waits_for_writers_seen_in_recent_commits() -> None:
    """Two groups of writers alternating are merged: the batch waits for the others."""
    policy = GroupCommit(max_linger_s=0.001)
    policy.committed({"a", "b"}, duration_s=0.0005, waiting=2)
    policy.committed({"c", "d"}, duration_s=0.0005, waiting=2)
    assert policy.expected() == 4
    assert not policy.ready({"a", "b"}, waited_s=0.0001)
    assert policy.ready({"a", "b", "c", "d"}, waited_s=0.0)


def test_the_linger_is_bounded_by_the_last_commit_time_and_the_cap() -> None:
    """A writer that went quiet costs at most min(cap, last commit duration)."""
    policy = GroupCommit(max_linger_s=0.001)
    policy.committed({"a", "b"}, duration_s=0.0002)
    assert not policy.ready({"a"}, waited_s=0.0001)
    assert policy.ready({"a"}, waited_s=0.0002)
    slow = GroupCommit(max_linger_s=0.001)
    slow.committed({"a", "b"}, duration_s=0.5)
    assert slow.ready({"a"}, waited_s=0.001)


def test_quiet_writers_age_out_after_the_remembered_commits() -> None:
    """After `memory` commits without a writer, it is no longer expected."""
    policy = GroupCommit(max_linger_s=0.001, memory=2)
    policy.committed({"a", "gone"}, duration_s=0.001)
    policy.committed({"a"}, duration_s=0.001)
    policy.committed({"a"}, duration_s=0.001)
    assert policy.expected() == 1


def test_nothing_pending_is_never_ready() -> None:
    """An empty batch is not committed."""
    assert not GroupCommit().ready(set(), waited_s=10.0)


@pytest.mark.parametrize("kwargs", [{"max_linger_s": -1}, {"memory": 0}])
def test_bad_settings_are_refused(kwargs: dict) -> None:
    """Negative linger or zero memory raise ValueError."""
    with pytest.raises(ValueError):
        GroupCommit(**kwargs)


def test_rotating_writer_ids_of_one_client_do_not_make_it_wait() -> None:
    """A client served by changing threads is one writer: nothing was ever concurrent."""
    policy = GroupCommit(max_linger_s=0.001)
    for thread in ("t1", "t2", "t3"):
        policy.committed({thread}, duration_s=0.0005, waiting=0)
    assert policy.expected() == 1
    assert policy.ready({"t4"}, waited_s=0.0)


def test_the_linger_is_bounded_by_the_last_commit() -> None:
    """A batch's linger is min(cap, last commit): a batch short of its writers is ready
    once no write came for that long, and not before."""
    policy = GroupCommit(max_linger_s=0.001)
    policy.committed({"a", "b"}, duration_s=0.0004)
    assert policy.linger() == pytest.approx(0.0004)
    assert not policy.ready({"a"}, waited_s=0.0003)
    assert policy.ready({"a"}, waited_s=0.0004)
    assert policy.ready({"a"}, waited_s=0.01)


def test_a_batch_is_held_one_linger_per_expected_writer_at_most() -> None:
    """Writes that keep arriving within the linger hold a batch short of its expected
    writers until ``hold_limit`` (one linger per expected writer), and no longer."""
    policy = GroupCommit(max_linger_s=0.001)
    policy.committed({"a", "b", "c", "d"}, duration_s=0.002)  # linger 0.001 s, 4 expected
    assert policy.linger() == pytest.approx(0.001)
    assert policy.hold_limit() == pytest.approx(0.004)
    assert not policy.ready({"a"}, waited_s=0.0005, held_s=0.0039)
    assert policy.ready({"a"}, waited_s=0.0005, held_s=0.004)
    assert policy.ready({"a"}, waited_s=0.001, held_s=0.001)  # quiet for a linger

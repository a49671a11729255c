"""StopFlag: pykka's stopped Event's part, set once, waited for by any thread."""

from __future__ import annotations

import threading

import pykka
import pytest

from supervisors import SupervisedActor
from supervisors._flag import StopFlag
from tests.helpers import Worker


class _Plain(SupervisedActor):
    pass


def test_a_flag_is_set_once_and_says_so() -> None:
    flag = StopFlag()
    assert not flag.is_set()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.is_set()
    assert flag.wait(0) is True


def test_waiters_in_other_threads_are_woken_by_set() -> None:
    flag = StopFlag()
    started = threading.Barrier(5)

    def wait() -> bool:
        started.wait()
        return flag.wait(10.0)

    workers = [Worker(wait) for _ in range(4)]
    for worker in workers:
        worker.start()
    started.wait()
    flag.set()
    assert [worker.outcome() for worker in workers] == [True] * 4


def test_an_actor_and_its_ref_share_the_flag_and_the_ref_sees_the_stop() -> None:
    ref = _Plain.start()
    try:
        assert isinstance(ref.actor_stopped, StopFlag)
        assert ref.is_alive()
        waiter = Worker(lambda: ref.actor_stopped.wait(10.0))
        waiter.start()
    finally:
        ref.stop()
    assert waiter.outcome() is True
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("late")

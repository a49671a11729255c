"""`memoryd._deadline`: a caller's deadline carried into the store calls made under it."""

from __future__ import annotations

import asyncio
import threading
import time

from memoryd._deadline import bounded, until


def test_a_store_call_outside_any_bound_gets_its_own_deadline() -> None:
    before = time.monotonic()
    assert before + 5 <= until(5.0) <= time.monotonic() + 5


def test_the_sooner_of_the_callers_and_the_stores_deadline_counts() -> None:
    soon = time.monotonic() + 1.0
    with bounded(soon):
        assert until(30.0) == soon  # the caller's, sooner
        assert until(0.1) < soon  # the store's own, sooner still
        with bounded(soon + 60):  # an inner, later bound never extends the outer one
            assert until(30.0) == soon
        with bounded(soon - 0.5):
            assert until(30.0) == soon - 0.5
        assert until(30.0) == soon
    assert until(30.0) > soon + 28  # gone with the block


def test_the_bound_follows_worker_threads_of_a_task_not_other_threads() -> None:
    """`asyncio.to_thread` copies the task's context; a thread of its own does not."""
    soon = time.monotonic() + 1.0
    seen: dict[str, float] = {}

    async def main() -> None:
        with bounded(soon):
            seen["worker"] = await asyncio.to_thread(until, 30.0)
            other = threading.Thread(target=lambda: seen.__setitem__("thread", until(30.0)))
            other.start()
            other.join()

    asyncio.run(main())
    assert seen["worker"] == soon
    assert seen["thread"] > soon + 28

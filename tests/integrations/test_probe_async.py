"""AsyncStore under a demanding asyncio user: long-polls, cancellation, the loop's threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from memoryd import messages as msgs
from memoryd.aio import AsyncStore
from memoryd.events import Change
from memoryd.store.handle import StoreHandle

FAR = 10**12
"""A feed position no test store reaches: a tail after it waits its whole timeout."""


async def _last_position(astore: AsyncStore) -> int:
    changes = await astore.tail(after=0, limit=100_000)
    return changes[-1].position if changes else 0


def test_long_polls_leave_the_loops_worker_threads_free(store: StoreHandle, cid: str) -> None:
    """More long-polling tails than the loop has worker threads: other calls still run."""
    astore = AsyncStore(store)

    async def main() -> int:
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=2)
        )
        await astore.add(cid, [msgs.user("a")])
        polls = [asyncio.create_task(astore.tail(after=FAR, timeout=30)) for _ in range(3)]
        await asyncio.sleep(0)  # the polls start waiting
        try:
            return await asyncio.wait_for(astore.version(cid), 10)
        finally:
            for poll in polls:
                poll.cancel()
            await asyncio.gather(*polls, return_exceptions=True)

    assert asyncio.run(main()) == 1


def test_a_cancelled_long_poll_does_not_hold_up_the_end_of_asyncio_run(
    store: StoreHandle,
) -> None:
    """A tail with a long timeout, cancelled: ``asyncio.run`` returns, it does not wait
    out the timeout in its worker thread."""
    astore = AsyncStore(store)
    outcome: list[str] = []

    async def main() -> None:
        try:
            async with asyncio.timeout(0.05):
                await astore.tail(after=FAR, timeout=60)
        except TimeoutError:
            outcome.append("cancelled")

    runner = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive()
    assert outcome == ["cancelled"]


def test_a_cancelled_long_polls_thread_ends_within_one_slice(
    store: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread of a cancelled 60 s tail ends at the end of its slice (here 50 ms),
    not when the 60 s are out."""
    from memoryd import aio
    from tests.helpers import wait_until

    monkeypatch.setattr(aio, "TAIL_SLICE_S", 0.05)
    astore = AsyncStore(store)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await astore.tail(after=FAR, timeout=60)

    asyncio.run(main())
    wait_until(
        lambda: not any(t.name == "memoryd-aio-tail" for t in threading.enumerate()),
        timeout=10,
    )


def test_a_long_poll_returns_the_change_that_ends_its_wait(store: StoreHandle, cid: str) -> None:
    """A tail waiting with a timeout answers with the write that lands meanwhile."""
    astore = AsyncStore(store)

    async def main() -> list[Change]:
        after = await _last_position(astore)
        poll = asyncio.create_task(astore.tail(after=after, limit=100_000, timeout=30))
        await asyncio.sleep(0)
        await astore.add(cid, [msgs.user("wake up")])
        return await asyncio.wait_for(poll, 10)

    changes = asyncio.run(main())
    assert [c.messages for c in changes if c.conversation_id == cid] == [(msgs.user("wake up"),)]


def test_a_long_poll_with_nothing_new_returns_nothing(store: StoreHandle) -> None:
    """A tail whose timeout passes with no change answers an empty list."""
    astore = AsyncStore(store)
    assert asyncio.run(astore.tail(after=FAR, timeout=0.01)) == []


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"limit": -1, "timeout": 5.0}, "limit"), ({"timeout": -1.0}, "timeout")],
)
def test_a_long_poll_refuses_what_the_handle_refuses(
    store: StoreHandle, arguments: dict[str, float], named: str
) -> None:
    """Bad arguments raise the handle's ValueError, naming the argument."""
    astore = AsyncStore(store)
    with pytest.raises(ValueError, match=named):
        asyncio.run(astore.tail(**arguments))  # type: ignore[arg-type]

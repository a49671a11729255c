"""AsyncStore: every store method, awaitable, run off the event loop; import isolation."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, cast

import pytest

import memoryd
from memoryd import messages as msgs
from memoryd.aio import AsyncStore
from memoryd.store.handle import StoreHandle
from tests.helpers import python_prints


def test_async_store_is_exported_lazily_from_memoryd() -> None:
    """memoryd.AsyncStore is memoryd.aio.AsyncStore."""
    assert memoryd.AsyncStore is AsyncStore


def test_every_method_takes_the_handles_arguments() -> None:
    """Every public StoreHandle method has an awaitable of the same signature."""
    methods = {
        name: method
        for name, method in vars(AsyncStore).items()
        if inspect.iscoroutinefunction(method)
    }
    public = {
        name
        for name, member in vars(StoreHandle).items()
        if callable(member) and not name.startswith("_")
    }
    # what AsyncStore itself is built on, and begin: a thread's send-now-wait-later,
    # which on an event loop is begin_on_loop (already awaitable: nothing to wrap), and
    # refuses_writes: a hint read without a round trip, nothing to await
    plumbing = {"submit", "reads_inline", "begin", "begin_on_loop", "refuses_writes"}
    assert public - plumbing <= set(methods), sorted(public - plumbing - set(methods))
    for name, method in methods.items():
        assert inspect.signature(method) == inspect.signature(getattr(StoreHandle, name)), name


def test_every_method_matches_the_handle(store: StoreHandle, cid: str) -> None:
    """add, get, version, events, pop, fork, conversations, tail, clear, stats agree."""
    astore = AsyncStore(store)
    other = cid + "-fork"

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["v1"] = await astore.add(cid, [msgs.user("a"), msgs.assistant("b")])
        out["v2"] = await astore.add(cid, [msgs.user("c")], idempotency_key="k")
        out["v2_again"] = await astore.add(cid, [msgs.user("c")], idempotency_key="k")
        out["get"] = await astore.get(cid, limit=2)
        out["at"] = await astore.get(cid, at_version=1)
        out["version"] = await astore.version(cid)
        out["kinds"] = [e.kind for e in await astore.events(cid)]
        out["pop"] = await astore.pop(cid)
        out["fork"] = await astore.fork(cid, other)
        out["convs"] = await astore.conversations(prefix=cid)
        out["tail"] = await astore.tail(after=0, limit=100000)
        await astore.clear(cid)
        out["cleared"] = await astore.get(cid)
        out["stats"] = await astore.stats()
        return out

    out = asyncio.run(main())
    assert (out["v1"], out["v2"], out["v2_again"]) == (1, 2, 2)
    assert [m["content"] for m in out["get"]] == ["b", "c"]
    assert [m["content"] for m in out["at"]] == ["a", "b"]
    assert out["version"] == 2
    assert out["kinds"] == ["appended", "appended"]
    assert out["pop"] == msgs.user("c")
    assert out["fork"] >= 1 and store.get(other) == [msgs.user("a"), msgs.assistant("b")]
    assert out["convs"] == [cid, other]
    assert any(change.conversation_id == cid for change in out["tail"])
    assert out["cleared"] == []
    assert isinstance(out["stats"], dict)


def test_record_writes_a_memo_and_leaves_the_history(store: StoreHandle, cid: str) -> None:
    """record appends a memo event; the history is unchanged."""
    astore = AsyncStore(store)

    async def main() -> tuple[int, list[Any]]:
        await astore.add(cid, [msgs.user("a")])
        version = await astore.record(cid, "memo", data={"x": 1})
        return version, await astore.events(cid)

    version, events = asyncio.run(main())
    assert version == 2
    assert [(e.kind, e.data) for e in events] == [("appended", None), ("memo", {"x": 1})]
    assert store.get(cid) == [msgs.user("a")]


def test_import_events_copies_a_log_exactly_and_again_changes_nothing(
    store: StoreHandle, cid: str
) -> None:
    """import_events, awaited, writes the events as they are; a second import is a no-op."""
    astore = AsyncStore(store)
    copy = cid + "-copy"
    store.add(cid, [msgs.user("a"), msgs.assistant("b")], idempotency_key="k1")
    store.add(cid, [msgs.user("c")])
    source = store.events(cid)

    async def main() -> tuple[int, int]:
        return (
            await astore.import_events(copy, source),
            await astore.import_events(copy, source),
        )

    assert asyncio.run(main()) == (2, 2)
    assert store.events(copy) == source
    with pytest.raises(ValueError, match="events"):
        asyncio.run(astore.import_events(copy, []))
    assert store.events(copy) == source


def test_errors_are_the_handles_errors(store: StoreHandle, cid: str) -> None:
    """A bad message raises the same InvalidMessage, from the awaited call."""
    with pytest.raises(memoryd.InvalidMessage):
        asyncio.run(AsyncStore(store).add(cid, [{"role": "nobody", "content": "x"}]))


def test_calls_run_in_worker_threads(store: StoreHandle, cid: str) -> None:
    """Each awaited call runs the handle method in a thread other than the loop's."""
    threads: set[int] = set()

    class Spy(StoreHandle):
        name = store.name
        max_message_bytes = store.max_message_bytes

        def _write(self, request: Any) -> Any:
            threads.add(threading.get_ident())
            return store._write(request)

        def _get(self, *args: Any) -> Any:
            threads.add(threading.get_ident())
            return store._get(*args)

        def _version(self, *args: Any) -> Any:
            threads.add(threading.get_ident())
            return store._version(*args)

        def _events(self, *args: Any) -> Any:
            return store._events(*args)

        def _conversations(self, *args: Any) -> Any:
            return store._conversations(*args)

        def _tail(self, *args: Any) -> Any:
            return store._tail(*args)

        def stats(self) -> dict[str, Any]:
            return store.stats()

        def stop(self) -> None:
            """Not called."""

    astore = AsyncStore(Spy())

    async def main() -> int:
        await astore.add(cid, [msgs.user("a")])
        await astore.get(cid)
        await astore.version(cid)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(threads) >= 1 and loop_thread not in threads


def test_concurrent_adds_from_tasks_all_land(store: StoreHandle, cid: str) -> None:
    """20 tasks adding at once produce 20 versions and 20 messages."""
    astore = AsyncStore(store)

    async def main() -> list[int]:
        return list(
            await asyncio.gather(*(astore.add(cid, [msgs.user(str(n))]) for n in range(20)))
        )

    versions = asyncio.run(main())
    assert sorted(versions) == list(range(1, 21))
    assert sorted(int(m["content"]) for m in store.get(cid)) == list(range(20))


def test_wrapping_something_else_is_refused() -> None:
    """AsyncStore takes a StoreHandle and says so otherwise."""
    with pytest.raises(TypeError, match="StoreHandle"):
        AsyncStore(cast(StoreHandle, object()))


def test_importing_memoryd_imports_no_framework() -> None:
    """import memoryd (and memoryd.integrations, memoryd.aio) loads neither langchain nor agents."""
    code = (
        "import sys, memoryd, memoryd.integrations, memoryd.aio\n"
        "memoryd.AsyncStore\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('agents', 'langchain', 'langchain_core', 'openai'))\n"
        "print(bad)\n"
    )
    assert python_prints(code) == ["[]"]

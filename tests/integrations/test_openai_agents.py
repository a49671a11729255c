"""MemorydSession behaves as the Agents SDK documents a Session (SQLiteSession's behaviour).

Every test runs against LmdbStore, EphemeralStore and the daemon through RemoteStore.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any, cast

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings

import memoryd
from memoryd import messages as msgs
from memoryd.integrations.openai_agents import (
    ITEM_KEY,
    InvalidSessionItem,
    MemorydSession,
    encode_item,
)
from memoryd.store import actor as store_actor
from memoryd.store.handle import StoreHandle
from tests.integrations.fakes import ScriptedModel, call, say

set_tracing_disabled(True)

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "system", "content": [{"type": "input_text", "text": "be brief"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "look it up"}],
        "encrypted_content": None,
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "18C, sunny.", "annotations": []}],
    },
    {"type": "item_reference", "id": "ref_1"},
    {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png"}]},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_memoryd_session_satisfies_the_session_protocol(store: StoreHandle, cid: str) -> None:
    """The SDK's runtime-checkable Session protocol recognises MemorydSession."""
    session = MemorydSession(cid, store)
    assert isinstance(session, Session)
    assert session.session_id == cid
    assert session.session_settings == SessionSettings()


def test_every_item_shape_round_trips_exactly(store: StoreHandle, cid: str) -> None:
    """Messages, calls, outputs, reasoning and references come back deep-equal, in order."""
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, ITEMS)))
    assert run(session.get_items()) == ITEMS


def test_each_item_is_stored_as_a_valid_chat_message(store: StoreHandle, cid: str) -> None:
    """The store holds one valid chat message per item, carrying the item verbatim."""
    run(MemorydSession(cid, store).add_items(cast(Any, ITEMS)))
    stored = store.get(cid)
    assert [m.get(ITEM_KEY, m) for m in stored] == ITEMS
    assert [m["role"] for m in stored[:3]] == ["user", "system", "assistant"]
    assert stored[0]["content"] == "What is the weather in Paris?"
    for message in stored:
        assert msgs.validate(message) == message


def test_a_plain_chat_message_item_is_stored_as_itself(store: StoreHandle, cid: str) -> None:
    """An item that is a plain text message is stored once, not beside a copy of itself."""
    plain = {"role": "user", "content": "hello"}
    tagged = {"role": "user", "content": "hello", "type": "message"}
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, [plain, tagged])))
    stored = store.get(cid)
    assert stored[0] == plain
    assert stored[1][ITEM_KEY] == tagged
    assert run(session.get_items()) == [plain, tagged]


def test_get_items_with_limit_returns_the_latest_in_order(store: StoreHandle, cid: str) -> None:
    """limit=N gives the newest N items, oldest first; limit=0 gives none."""
    session = MemorydSession(cid, store)
    items = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    run(session.add_items(cast(Any, items[:3])))
    run(session.add_items(cast(Any, items[3:])))
    assert run(session.get_items(limit=2)) == items[4:]
    assert run(session.get_items(limit=100)) == items
    assert run(session.get_items(limit=0)) == []


def test_session_settings_limit_is_the_default_limit(store: StoreHandle, cid: str) -> None:
    """session_settings.limit applies when get_items has no limit; an explicit one wins."""
    session = MemorydSession(cid, store, session_settings={"limit": 2})
    items = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    run(session.add_items(cast(Any, items)))
    assert run(session.get_items()) == items[2:]
    assert run(session.get_items(limit=3)) == items[1:]


def test_limit_returns_the_raw_last_n_items_as_sqlite_session_does(
    store: StoreHandle, cid: str
) -> None:
    """By default a window cut between a function_call and its output keeps the output:
    get_items(limit=n) is the exact last n items, and with n >= the history it equals
    get_items(), as with SQLiteSession."""
    session = MemorydSession(cid, store)
    reference = SQLiteSession(cid)
    try:
        for target in (session, reference):
            run(target.add_items(cast(Any, ITEMS[:6])))
        for limit in (1, 2, 3, 6, 100):
            window = run(session.get_items(limit=limit))
            assert window == ITEMS[:6][-limit:] == run(reference.get_items(limit=limit))
        assert run(session.get_items(limit=2)) == ITEMS[4:6]
        assert run(session.get_items(limit=6)) == run(session.get_items())
    finally:
        reference.close()


def test_orphan_outputs_are_dropped_when_asked(store: StoreHandle, cid: str) -> None:
    """drop_orphan_outputs=True leaves out an output whose call fell outside the window."""
    session = MemorydSession(cid, store, drop_orphan_outputs=True)
    run(session.add_items(cast(Any, ITEMS[:6])))
    window = run(session.get_items(limit=2))  # function_call_output, assistant message
    assert window == [ITEMS[5]]
    assert run(session.get_items(limit=3)) == ITEMS[3:6]


def test_close_ends_the_session_like_sqlite_session_and_keeps_the_store(
    store: StoreHandle, cid: str
) -> None:
    """After close() (twice is fine) every call raises RuntimeError, even an empty
    add_items, as with SQLiteSession; the store and what was written stay."""
    session = MemorydSession(cid, store)
    reference = SQLiteSession(cid)
    for target in (session, reference):
        run(target.add_items(cast(Any, ITEMS[:2])))
        target.close()
        target.close()
        with pytest.raises(RuntimeError, match="is closed"):
            run(target.add_items([]))
        with pytest.raises(RuntimeError, match="is closed"):
            run(target.get_items())
        with pytest.raises(RuntimeError, match="is closed"):
            run(target.pop_item())
        with pytest.raises(RuntimeError, match="is closed"):
            run(target.clear_session())
    assert session.closed
    assert run(MemorydSession(cid, store).get_items()) == ITEMS[:2]


def test_async_with_closes_the_session_on_exit(store: StoreHandle, cid: str) -> None:
    """``async with MemorydSession(...) as session`` yields the session and closes it,
    also when the block raises; a closed session cannot be entered again."""

    async def main() -> MemorydSession:
        async with MemorydSession(cid, store) as session:
            await session.add_items(cast(Any, ITEMS[:1]))
            assert not session.closed
        assert session.closed
        with pytest.raises(ValueError, match="boom"):
            async with MemorydSession(cid, store) as failing:
                raise ValueError("boom")
        assert failing.closed
        with pytest.raises(RuntimeError, match="is closed"):
            async with session:
                pass
        return session

    run(main())
    assert run(MemorydSession(cid, store).get_items()) == ITEMS[:1]


def test_pop_item_removes_and_returns_the_latest(store: StoreHandle, cid: str) -> None:
    """pop_item returns the newest item exactly and removes it; None when empty."""
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, ITEMS[3:5])))
    assert run(session.pop_item()) == ITEMS[4]
    assert run(session.get_items()) == [ITEMS[3]]
    assert run(session.pop_item()) == ITEMS[3]
    assert run(session.pop_item()) is None


def test_clear_session_empties_it(store: StoreHandle, cid: str) -> None:
    """clear_session removes every item; the session can be used again afterwards."""
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, ITEMS)))
    run(session.clear_session())
    assert run(session.get_items()) == []
    run(session.add_items(cast(Any, ITEMS[:1])))
    assert run(session.get_items()) == ITEMS[:1]


def test_adding_no_items_writes_nothing(store: StoreHandle, cid: str) -> None:
    """add_items([]) leaves the conversation at version 0."""
    run(MemorydSession(cid, store).add_items([]))
    assert store.version(cid) == 0


def test_sessions_with_different_ids_are_separate(store: StoreHandle, cid: str) -> None:
    """Two session ids on one store never see each other's items."""
    one, two = MemorydSession(cid, store), MemorydSession(cid + "-b", store)
    run(one.add_items(cast(Any, ITEMS[:1])))
    assert run(two.get_items()) == []


def test_concurrent_adds_from_tasks_are_each_atomic(store: StoreHandle, cid: str) -> None:
    """Batches added from 10 concurrent tasks all land, each batch contiguous."""
    session = MemorydSession(cid, store)

    def batch(n: int) -> list[dict[str, Any]]:
        return [
            {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{n}", "output": str(n)},
        ]

    async def main() -> list[Any]:
        await asyncio.gather(*(session.add_items(cast(Any, batch(n))) for n in range(10)))
        return await session.get_items()

    items = run(main())
    assert len(items) == 20
    pairs = [items[i : i + 2] for i in range(0, 20, 2)]
    assert sorted(pairs, key=lambda p: p[0]["call_id"]) == sorted(
        (batch(n) for n in range(10)), key=lambda p: p[0]["call_id"]
    )


def test_plain_chat_messages_from_other_writers_are_readable(store: StoreHandle, cid: str) -> None:
    """Messages memoryd's own agent stored come back as SDK items (calls and outputs too)."""
    store.add(
        cid,
        [
            msgs.user("hi"),
            msgs.assistant(None, tool_calls=[msgs.tool_call("call_9", "lookup", {"q": "x"})]),
            msgs.tool("call_9", "42"),
        ],
    )
    items = run(MemorydSession(cid, store).get_items())
    assert items == [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": '{"q":"x"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "42"},
    ]


def test_a_held_commit_never_blocks_the_event_loop(cid: str) -> None:
    """While the store actor holds a commit, the loop keeps running its other tasks."""
    entered, release = threading.Event(), threading.Event()

    def hold(point: str, name: str) -> None:
        if point == "before_commit" and name == held.name:
            entered.set()
            release.wait(10)

    held = memoryd.EphemeralStore.start()
    session = MemorydSession(cid, held)
    store_actor.fault_hook = hold
    try:

        async def main() -> tuple[int, list[Any]]:
            ticks = 0
            write = asyncio.create_task(session.add_items(cast(Any, ITEMS[:2])))
            while not entered.is_set():
                await asyncio.sleep(0.001)
            for _ in range(20):  # the commit is held: the loop must still turn
                await asyncio.sleep(0.001)
                ticks += 1
            assert not write.done()
            release.set()
            await write
            return ticks, await session.get_items()

        ticks, items = run(main())
    finally:
        store_actor.fault_hook = None
        release.set()
        held.stop()
    assert ticks == 20
    assert items == ITEMS[:2]


def test_cancelled_add_items_returns_only_after_the_write(store: StoreHandle, cid: str) -> None:
    """Cancelling add_items mid-write raises CancelledError once the write has committed."""
    entered, release = threading.Event(), threading.Event()

    class Held:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def submit(self, request: Any) -> Any:
            entered.set()
            await asyncio.to_thread(release.wait, 10)
            return await store.submit(request)

    session = MemorydSession(cid, cast(StoreHandle, Held()))

    async def main() -> tuple[bool, bool]:
        task = asyncio.create_task(session.add_items(cast(Any, ITEMS[:2])))
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        done_while_held = task.done()
        release.set()
        try:
            await task
        except asyncio.CancelledError:
            return done_while_held, True
        return done_while_held, False

    done_while_held, cancelled = run(main())
    assert not done_while_held
    assert cancelled
    assert [m.get(ITEM_KEY, m) for m in store.get(cid)] == ITEMS[:2]


class _Stepped:
    """A store whose write passes through a bare yield (``sleep(0)``) and two waits on
    futures the test releases before reaching the real store: a cancellation can land
    on any of them."""

    def __init__(self, store: StoreHandle) -> None:
        self._store = store
        self.gates: list[asyncio.Future[None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def submit(self, request: Any) -> Any:
        await asyncio.sleep(0)
        for _ in range(2):
            self.gates.append(asyncio.get_running_loop().create_future())
            await self.gates[-1]
        return await self._store.submit(request)

    async def release(self, index: int) -> None:
        """Release gate ``index`` once the write waits on it."""
        while len(self.gates) <= index:
            await asyncio.sleep(0)
        self.gates[index].set_result(None)


@pytest.mark.parametrize("cancel_at", [-1, 0, 1], ids=["bare-yield", "gate-0", "gate-1"])
def test_add_items_cancelled_twice_raises_once_its_write_has_ended(
    store: StoreHandle, cid: str, cancel_at: int
) -> None:
    """Cancellations landing while the write waits on any of its steps are held back:
    the write goes on to commit, then the caller gets CancelledError."""
    stepped = _Stepped(store)
    session = MemorydSession(cid, cast(StoreHandle, stepped))

    async def main() -> tuple[bool, bool]:
        task = asyncio.create_task(session.add_items(cast(Any, ITEMS[:2])))
        await asyncio.sleep(0)  # the write is at its bare yield
        for index in range(cancel_at):
            await stepped.release(index)
        while cancel_at >= 0 and len(stepped.gates) <= cancel_at:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()  # a second cancellation while the write is still running
        for _ in range(3):
            await asyncio.sleep(0)
        still_running = not task.done()
        for index in range(max(cancel_at, 0), 2):
            await stepped.release(index)
        try:
            await task
        except asyncio.CancelledError:
            return still_running, True
        return still_running, False

    still_running, cancelled = run(main())
    assert still_running
    assert cancelled
    assert [m.get(ITEM_KEY, m) for m in store.get(cid)] == ITEMS[:2]


def test_a_refused_write_raises_its_error_and_a_cancelled_one_raises_cancelled(
    store: StoreHandle, cid: str
) -> None:
    """A write the store refuses raises the store's error; if the caller was cancelled
    meanwhile, CancelledError is raised once the refusal came, and nothing is written."""
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, ITEMS[:1])))

    class Refusing:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def __init__(self) -> None:
            self.gate: asyncio.Future[None] | None = None

        async def submit(self, request: Any) -> Any:
            self.gate = asyncio.get_running_loop().create_future()
            await self.gate  # then the real store refuses it: a version it is not at
            return await store.submit(dataclasses.replace(request, expected_version=99))

    refusing = Refusing()
    held = MemorydSession(cid, cast(StoreHandle, refusing))

    async def main(cancel: bool) -> BaseException:
        task = asyncio.create_task(held.add_items(cast(Any, ITEMS[1:2])))
        while refusing.gate is None:
            await asyncio.sleep(0)
        if cancel:
            task.cancel()
            await asyncio.sleep(0)
            assert not task.done()
        refusing.gate.set_result(None)
        try:
            await task
        except BaseException as exc:  # the outcome is what is checked
            return exc
        raise AssertionError("the write did not fail")

    assert isinstance(run(main(cancel=False)), memoryd.ConflictError)
    refusing.gate = None
    assert isinstance(run(main(cancel=True)), asyncio.CancelledError)
    assert [m.get(ITEM_KEY, m) for m in store.get(cid)] == ITEMS[:1]


def test_items_read_are_fresh_copies(store: StoreHandle, cid: str) -> None:
    """Changing an item get_items returned (a plain message or an SDK item) changes
    nothing stored: the next read gives back what was added."""
    session = MemorydSession(cid, store)
    run(session.add_items(cast(Any, ITEMS)))
    first = run(session.get_items(limit=len(ITEMS)))
    for item in first:
        item["role"] = "changed"
    assert run(session.get_items()) == ITEMS
    assert run(session.get_items(limit=3)) == ITEMS[-3:]


@function_tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"18C in {city}"


def _agent_run(session: Any) -> tuple[ScriptedModel, list[Any]]:
    model = ScriptedModel(
        [
            [call("weather", '{"city": "Paris"}', "call_1")],
            [say("It is 18C in Paris.")],
            [say("You asked about Paris.", "msg_2")],
        ]
    )
    agent = Agent(name="assistant", model=model, tools=[weather])

    async def main() -> list[Any]:
        await Runner.run(agent, "Weather in Paris?", session=session)
        await Runner.run(agent, "What did I ask?", session=session)
        return await session.get_items()

    return model, run(main())


def test_runner_keeps_history_like_sqlite_session(store: StoreHandle, cid: str) -> None:
    """Runner.run with MemorydSession stores and replays the same items as SQLiteSession."""
    model, items = _agent_run(MemorydSession(cid, store))
    _, reference = _agent_run(SQLiteSession(cid))
    assert items == reference
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    second_input = model.inputs[2]
    assert second_input[:4] == items[:4]
    assert encode_item(items[0])["role"] == "user"


@pytest.mark.parametrize(
    "bad",
    [{"role": "user", "content": {1}}, {"role": "user", "content": object()}, "not a dict"],
    ids=["set", "object", "not-a-dict"],
)
def test_add_items_refuses_a_value_of_the_wrong_type_with_a_type_error(
    store: StoreHandle, cid: str, bad: Any
) -> None:
    """An item holding a value JSON cannot carry raises a TypeError, as SQLiteSession
    does, that is also memoryd's InvalidMessage; so does an item that is not a dict
    (which SQLiteSession stores as is); nothing is written."""
    from memoryd.errors import InvalidMessage

    if isinstance(bad, dict):
        reference = SQLiteSession(cid)
        try:
            with pytest.raises(TypeError):
                run(reference.add_items(cast(Any, [bad])))
        finally:
            reference.close()
    good = {"role": "user", "content": "kept only if the batch is valid"}
    with pytest.raises(InvalidSessionItem, match="session item 1") as info:
        run(MemorydSession(cid, store).add_items(cast(Any, [good, bad])))
    assert isinstance(info.value, TypeError) and isinstance(info.value, InvalidMessage)
    assert store.version(cid) == 0


def test_one_item_given_for_a_list_and_a_limit_not_an_int_are_named(
    store: StoreHandle, cid: str
) -> None:
    """A single dict (or a str) passed as ``items`` is refused as such, where iterating
    it used to name its first key as "session item 0"; a str limit is a TypeError
    naming ``limit``. Nothing is written."""
    session = MemorydSession(cid, store)
    for one in ({"role": "user", "content": "hi"}, "hi"):
        with pytest.raises(InvalidSessionItem, match=r"not one (dict|str); wrap it in a list"):
            run(session.add_items(cast(Any, one)))
    with pytest.raises(TypeError, match="limit must be an int or None, not '3'"):
        run(session.get_items(limit=cast(Any, "3")))
    assert store.version(cid) == 0


def test_invalid_session_id_is_refused() -> None:
    """A bad session id fails at construction, naming the problem."""
    from memoryd.errors import InvalidConversationId

    with pytest.raises(InvalidConversationId, match="control character"):
        MemorydSession("a\nb", cast(StoreHandle, object()))

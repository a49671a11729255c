"""AgentSystem calls: addressing, ordering, concurrency, bounds, passivation, idempotency,
agent tools and call cycles, on a real store with real instance actors and threads."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

import memoryd
import supervisors
from memoryd import AgentSystemStopped, CallTimeout, Overloaded, UnknownAgent
from memoryd.agents import AgentSystem
from memoryd.agents.lease import LEASE_PREFIX
from memoryd.llm import ScriptedModel
from tests.agents._agents import (
    Gate,
    call_at_gate,
    echo_model,
    factory,
    note_tool,
    start,
    start_gated,
    stepping_model,
    tool_steps_done,
)
from tests.helpers import Worker, wait_until


def test_an_instance_is_activated_on_its_first_call_and_registered(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The first call starts instance "<system>/<type>/<key>" on conversation "<type>/<key>"."""
    system = start(systems, {"echo": factory(store, echo_model)}, store=store, name="crew")
    assert system.instances() == []
    reply = system.call("echo", "alice", "hi")
    assert reply.text == "echo: hi"
    assert reply.conversation_id == "echo/alice"
    assert [i.name for i in system.instances()] == ["crew/echo/alice"]
    assert supervisors.whereis("crew/echo/alice") is not None
    assert [m["content"] for m in store.get("echo/alice")] == ["hi", "echo: hi"]


def test_an_unknown_agent_type_is_refused(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """UnknownAgent is a LookupError naming the known types; nothing is written."""
    system = start(systems, {"echo": factory(store, echo_model)}, store=store)
    with pytest.raises(UnknownAgent, match="'echo'") as caught:
        system.call("writer", "a", "hi")
    assert isinstance(caught.value, LookupError)
    assert store.conversations() == []


@pytest.mark.parametrize(
    ("key", "error", "needle"),
    [
        ("", ValueError, "instance key must be a non-empty str"),
        (42, ValueError, "instance key must be a non-empty str"),
        ("bad\x00key", memoryd.InvalidConversationId, "key 'bad\\\\x00key'.*control character"),
        ("k" * 300, memoryd.InvalidConversationId, r"\(300 characters\).*the limit is 256"),
    ],
)
def test_a_bad_key_is_refused_before_anything_is_written(
    store: memoryd.StoreHandle,
    systems: list[AgentSystem],
    key: Any,
    error: type[Exception],
    needle: str,
) -> None:
    """A key that makes no conversation id is refused: no instance, no write, no slot
    (the same call is refused again, and a good key still works)."""
    system = start(systems, {"echo": factory(store, echo_model)}, store=store)
    for _ in range(2):
        with pytest.raises(error, match=needle):
            system.call("echo", key, "hi")
    assert system.instances() == []
    assert store.conversations() == []
    assert system.call("echo", "good", "hi").text == "echo: hi"


@pytest.mark.parametrize(
    ("request_id", "needle"),
    [
        ("", "request_id must be a non-empty str"),
        (7, "request_id must be a non-empty str"),
        ("r" * 1025, r"request_id 'r+'\.\.\. \(1025 characters\) is longer than 1024"),
        ("req-\ud800", "request_id 'req-\\\\ud800' holds a lone surrogate at index 4"),
    ],
)
def test_a_bad_request_id_is_refused_also_for_a_live_instance(
    store: memoryd.StoreHandle, systems: list[AgentSystem], request_id: Any, needle: str
) -> None:
    """A request id that is not a non-empty str, is longer than 1,024 characters or
    cannot be encoded is refused with ValueError before the call is placed, whether the
    instance is new or live; it runs nothing. The longest allowed id works."""
    system = start(systems, {"echo": factory(store, echo_model)}, store=store)
    with pytest.raises(ValueError, match=needle):
        system.call("echo", "a", "first", request_id=request_id)
    system.call("echo", "a", "hi")  # now live and idle
    with pytest.raises(ValueError, match=needle):
        system.call("echo", "a", "second", request_id=request_id)
    assert [m["content"] for m in store.get("echo/a")] == ["hi", "echo: hi"]
    assert system.stats()["calls"] == 1
    assert system.call("echo", "a", "last", request_id="r" * 1024).text == "echo: last"


def test_calls_to_one_instance_run_one_at_a_time_in_arrival_order(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Three calls queued behind a blocked run commit in the order they arrived."""
    system, gate, _log = start_gated(systems, store)
    first = call_at_gate(system, gate, "first")
    later = []
    for queued, text in enumerate(("second", "third", "fourth"), 1):
        later.append(Worker(lambda text=text: system.call("w", "k", text)))
        later[-1].start()
        wait_until(lambda queued=queued: system.instances()[0].queued == queued)
    gate.release.set()
    assert first.outcome().text == "done 1 for first"
    assert [w.outcome().text for w in later] == [
        f"done 1 for {t}" for t in ("second", "third", "fourth")
    ]
    users = [m["content"] for m in store.get("w/k") if m["role"] == "user"]
    assert users == ["first", "second", "third", "fourth"]


def test_different_instances_run_concurrently(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """While one instance is blocked inside a tool, another answers."""
    gate, log = Gate(), []
    agents = {
        "w": factory(store, lambda: stepping_model(1), note_tool(log, gate_at=0, gate=gate)),
        "echo": factory(store, echo_model),
    }
    system = start(systems, agents, store=store)
    blocked = call_at_gate(system, gate, "slow")
    assert system.call("echo", "k", "quick").text == "echo: quick"
    gate.release.set()
    assert blocked.outcome().text == "done 1 for slow"


def test_a_full_mailbox_refuses_at_once_and_writes_nothing(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """With mailbox=2, a third waiting call raises Overloaded in the caller's thread."""
    system, gate, _log = start_gated(systems, store, mailbox=2)
    running = call_at_gate(system, gate, "running")
    waiting = [Worker(lambda t=t: system.call("w", "k", t)) for t in ("q1", "q2")]
    for n, worker in enumerate(waiting, 1):
        worker.start()
        wait_until(lambda n=n: system.instances()[0].queued == n)
    version = store.version("w/k")
    with pytest.raises(Overloaded, match="mailbox=2"):
        system.call("w", "k", "refused")
    assert store.version("w/k") == version
    assert system.stats()["overloaded"] == 1
    gate.release.set()
    assert [w.outcome().text for w in [running, *waiting]] == [
        "done 1 for running",
        "done 1 for q1",
        "done 1 for q2",
    ]
    assert "refused" not in [m["content"] for m in store.get("w/k")]


def test_a_call_past_its_deadline_raises_call_timeout_and_a_queued_one_never_runs(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A call still waiting at its deadline is withdrawn: its input is never stored."""
    system, gate, _log = start_gated(systems, store)
    running = call_at_gate(system, gate, "running")
    with pytest.raises(CallTimeout, match="never ran") as caught:
        system.call("w", "k", "late", timeout=0.05)
    assert isinstance(caught.value, TimeoutError)
    gate.release.set()
    running.outcome()
    assert system.call("w", "k", "after").text == "done 1 for after"
    users = [m["content"] for m in store.get("w/k") if m["role"] == "user"]
    assert users == ["running", "after"]
    assert system.stats()["timeouts"] == 1


def test_an_exception_in_a_run_reaches_the_caller_and_the_instance_lives_on(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A model error fails the call; the same incarnation answers the next call."""
    models = iter(
        [memoryd.llm.ScriptedModel([memoryd.LLMError("rate limited"), "fine"])]  # type: ignore[attr-defined]
    )
    system = start(
        systems,
        {"a": lambda key: memoryd.Agent(llm=next(models), memory=store)},
        store=store,
    )
    with pytest.raises(memoryd.LLMError, match="rate limited"):
        system.call("a", "k", "one")
    assert system.call("a", "k", "two").text == "fine"
    (info,) = system.instances()
    assert info.incarnations == 1
    assert system.stats()["restarts"] == 0


def test_idle_instances_are_passivated_and_come_back_with_their_memory(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """After idle_after_s an instance stops; the next call builds a new agent that sees
    the conversation so far (the state is in the store)."""
    now = [0.0]
    sent: list[list[dict[str, Any]]] = []

    def remembering(key: str) -> memoryd.Agent:
        def answer(messages: list[dict[str, Any]]) -> str:
            sent.append(messages)
            return f"seen {sum(1 for m in messages if m['role'] == 'user')}"

        return memoryd.Agent(llm=memoryd.llm.ScriptedModel([answer] * 5), memory=store)  # type: ignore[attr-defined]

    system = start(
        systems, {"a": remembering}, store=store, idle_after_s=10.0, clock=lambda: now[0]
    )
    assert system.call("a", "k", "my name is Ada").text == "seen 1"
    name = system.instances()[0].name
    now[0] = 9.0
    assert system.passivate_idle() == 0
    now[0] = 10.0
    assert system.passivate_idle() == 1
    assert system.instances() == [] and supervisors.whereis(name) is None
    assert system.call("a", "k", "what is my name?").text == "seen 2"
    assert [m["content"] for m in sent[-1] if m["role"] == "user"] == [
        "my name is Ada",
        "what is my name?",
    ]
    stats = system.stats()
    assert (stats["activations"], stats["passivations"]) == (2, 1)


def test_at_most_max_active_are_live_and_the_least_recently_used_goes_first(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """With max_active=2, activating a third instance passivates the LRU one."""
    now = [0.0]
    system = start(
        systems,
        {"echo": factory(store, echo_model)},
        store=store,
        max_active=2,
        clock=lambda: now[0],
    )
    for tick, key in enumerate(["a", "b", "a"]):
        now[0] = float(tick)
        system.call("echo", key, "hi")
    now[0] = 5.0
    system.call("echo", "c", "hi")
    assert [i.key for i in system.instances()] == ["a", "c"]
    assert system.stats()["active"] == 2


def test_a_repeated_request_id_returns_the_first_result_without_a_second_run(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Same request id: same result, no tool called again, one commit."""
    log: list[str] = []
    agents = {"w": factory(store, lambda: stepping_model(2), note_tool(log))}
    system = start(systems, agents, store=store)
    first = system.call("w", "k", "job", request_id="req-1")
    again = system.call("w", "k", "job", request_id="req-1")
    assert again.run_id == first.run_id and again.text == first.text
    assert log == ["0", "1"]
    assert len(store.events("w/k")) == 1
    other = system.call("w", "k", "job", request_id="req-2")
    assert other.run_id != first.run_id and log == ["0", "1", "0", "1"]


def test_a_request_id_is_found_again_by_a_new_system(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Across a restart (a new system on the same store) the first result comes back."""
    log: list[str] = []
    agents = {"w": factory(store, lambda: stepping_model(2), note_tool(log))}
    first_system = start(systems, agents, store=store, name="first")
    first = first_system.call("w", "k", "job", request_id="req-1")
    first_system.stop()
    second_system = start(systems, agents, store=store, name="second")
    again = second_system.call("w", "k", "job", request_id="req-1")
    assert (again.run_id, again.text, again.version) == (first.run_id, first.text, first.version)
    assert log == ["0", "1"]


def test_an_agent_type_is_a_tool_for_another_agent(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """system.tool("writer") lets a boss agent ask a writer instance; the writer's turn is
    in its own conversation."""
    from memoryd import messages

    holder: dict[str, AgentSystem] = {}

    def boss(key: str) -> memoryd.Agent:
        def decide(sent: list[dict[str, Any]]) -> Any:
            if sent[-1]["role"] == "tool":
                return f"the writer said: {sent[-1]['content']}"
            call = messages.tool_call("w1", "ask_writer", {"key": "w-1", "message": "draft"})
            return messages.assistant(tool_calls=[call])

        tool = holder["system"].tool("writer", description="Ask the writer")
        return memoryd.Agent(
            llm=memoryd.llm.ScriptedModel([decide] * 4),  # type: ignore[attr-defined]
            memory=store,
            tools=[tool],
        )

    system = start(systems, {"boss": boss, "writer": factory(store, echo_model)}, store=store)
    holder["system"] = system
    assert system.tool("writer").name == "ask_writer"
    reply = system.call("boss", "b", "go")
    assert reply.text == "the writer said: echo: draft"
    assert [m["content"] for m in store.get("writer/w-1")] == ["draft", "echo: draft"]
    with pytest.raises(UnknownAgent):
        system.tool("nobody")


def test_a_call_cycle_on_one_instance_fails_fast(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """An agent asking itself (through its tool) gets a clear error, not a deadlock."""
    from memoryd import messages

    holder: dict[str, AgentSystem] = {}

    def narcissus(key: str) -> memoryd.Agent:
        def decide(sent: list[dict[str, Any]]) -> Any:
            if sent[-1]["role"] == "tool":
                return f"tool said: {sent[-1]['content']}"
            call = messages.tool_call("s1", "ask_self", {"key": key, "message": "again"})
            return messages.assistant(tool_calls=[call])

        return memoryd.Agent(
            llm=memoryd.llm.ScriptedModel([decide] * 4),  # type: ignore[attr-defined]
            memory=store,
            tools=[holder["system"].tool("self")],
        )

    system = start(systems, {"self": narcissus}, store=store, name="loop")
    holder["system"] = system
    reply = system.call("self", "k", "go", timeout=10)
    assert "call cycle: loop/self/k -> loop/self/k" in reply.text


def test_acall_does_not_block_the_event_loop(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """While an acall waits on a blocked run, other coroutines of the loop keep running."""
    system, gate, _log = start_gated(systems, store)

    async def scenario() -> tuple[str, int]:
        ticks = 0
        call = asyncio.ensure_future(system.acall("w", "k", "async"))
        while not gate.arrived.acquire(blocking=False):
            await asyncio.sleep(0.001)
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1
        threading.Timer(0.01, gate.release.set).start()
        reply = await call
        return reply.text, ticks

    text, ticks = asyncio.run(scenario())
    assert (text, ticks) == ("done 1 for async", 5)


def test_a_second_system_of_the_same_name_is_refused(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The name belongs to the running system."""
    start(systems, {"echo": factory(store, echo_model)}, store=store, name="solo")
    with pytest.raises(memoryd.AlreadyStarted, match="solo"):
        AgentSystem.start({"echo": factory(store, echo_model)}, store=store, name="solo")


def test_an_agent_keeping_memory_in_another_store_is_refused_on_activation(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The factory's agent must keep its memory in the system's store; the error says so."""
    other = memoryd.EphemeralStore.start(name=f"other-{uuid.uuid4().hex[:8]}")
    system = start(systems, {"a": factory(other, echo_model)}, store=store)
    with pytest.raises(ValueError, match="keeps its memory in store") as refused:
        system.call("a", "k", "hi")
    assert "memoryd.window" not in str(refused.value)
    assert other.conversations() == [] and store.conversations() == []


def test_a_window_on_the_default_store_is_refused_saying_what_to_give(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """``memory=memoryd.window(50)`` is a window on the default store: on a system of
    another store the error says how to give the same window on the system's store."""

    def windowed(key: str) -> memoryd.Agent:
        return memoryd.Agent(llm=echo_model(), memory=memoryd.window(50))

    system = start(systems, {"a": windowed}, store=store)
    with pytest.raises(ValueError, match=r"DefaultProvider\(store, window=n\)"):
        system.call("a", "k", "hi")
    assert store.conversations() == []


def test_stop_fails_the_waiting_callers_and_refuses_new_calls(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A stopped system answers nothing more; its queued callers hear why."""
    system, gate, log = start_gated(systems, store, steps=2)
    running = call_at_gate(system, gate, "running")
    ref = supervisors.whereis(system.instances()[0].name)
    assert ref is not None
    stopper = Worker(system.stop)
    stopper.start()
    wait_until(lambda: ref.actor_inbox.qsize() > 0)  # type: ignore[attr-defined]
    gate.release.set()
    stopper.outcome()
    with pytest.raises(AgentSystemStopped, match="stopped"):
        running.outcome()
    with pytest.raises(AgentSystemStopped, match="stopped"):
        system.call("w", "k", "more")
    (pending,) = system.pending_runs()  # the interrupted run stays resumable
    assert pending.conversation_id == "w/k" and log == ["0"]


@pytest.fixture(params=["lmdb", "redis"])
def any_store(request: pytest.FixtureRequest) -> memoryd.StoreHandle:
    """An LMDB store (a cleared journal is erased) or a Redis one (it keeps its versions)."""
    if request.param == "lmdb":
        return memoryd.EphemeralStore.start(name=f"agents-{uuid.uuid4().hex[:8]}")
    server = request.getfixturevalue("redis_server")
    return memoryd.RedisStore.start(server.url, prefix=f"retry-{uuid.uuid4().hex[:8]}")


def test_a_request_retried_after_a_failed_run_runs_again(
    any_store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A run that fails after a journaled tool step (the model errs) is retried with the
    same request id: the retry runs from its input and succeeds, where its first journal
    write used to meet the failed run's cleared journal and raise a ConflictError."""
    log: list[str] = []
    down = [True]

    def make_model() -> ScriptedModel:
        steps = stepping_model(2)

        def decide(sent: list[dict[str, Any]]) -> dict[str, Any]:
            if tool_steps_done(sent) == 1 and down[0]:  # after the first journaled step
                raise RuntimeError("the model's provider is down")
            return steps.complete(sent)

        return ScriptedModel([decide] * 20)

    agents = {"w": factory(any_store, make_model, note_tool(log))}
    system = start(systems, agents, store=any_store)
    with pytest.raises(RuntimeError, match="provider is down"):
        system.call("w", "k", "job", request_id="req-1")
    assert log == ["0"] and system.pending_runs() == []
    down[0] = False
    again = system.call("w", "k", "job", request_id="req-1")
    assert again.text == "done 2 for job"
    assert log == ["0", "0", "1"]
    assert system.call("w", "k", "job", request_id="req-1").run_id == again.run_id
    assert log == ["0", "0", "1"]  # answered from the commit: no third run


def test_an_instance_lease_stays_one_event_however_often_it_is_written(
    any_store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Three activations, each with a renewal and a passivation, write the instance's
    lease nine times; its log holds the last write alone (a superseding memo), where it
    used to keep one event per write for ever."""
    now = [0.0]
    agents = {"a": lambda key: memoryd.Agent(llm=ScriptedModel(["ok"] * 3), memory=any_store)}
    system = start(
        systems, agents, store=any_store, idle_after_s=10.0, clock=lambda: now[0], lease_s=0.2
    )
    lease = f"{LEASE_PREFIX}a/k"
    for _ in range(3):
        assert system.call("a", "k", "hi").text == "ok"
        held = any_store.version(lease)
        wait_until(lambda held=held: any_store.version(lease) > held, timeout=5)  # a renewal
        now[0] += 10.0
        wait_until(lambda: system.instances() == [], timeout=5)  # passivated: released
    assert any_store.version(lease) >= 9
    (event,) = any_store.events(lease)
    assert event.kind == "memo" and event.data is not None
    assert event.data["state"] == "released"
    assert any_store.conversations(include_empty=True) == ["a/k"]

"""The agent against hostile replies and tool values: a reply its stores cannot record is
refused before a tool runs; a tool result holding a lone surrogate or a value that
cannot be made text is recorded as a result the model reads (journaled, so a resume
does not run the tool again); a plain tool's coroutine is run; a run id whose turn was
committed is never answered with a turn that was not stored. Real LMDB stores,
`ScriptedModel` at the LLM boundary, runs through `run`, `arun` and `AgentSystem.call`."""

from __future__ import annotations

import asyncio
import gc
import json
import pathlib
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import memoryd
from memoryd import ConflictError
from memoryd.agents import AgentSystem
from memoryd.errors import RunInterrupted
from memoryd.llm import LLMError, ScriptedModel
from tests.helpers import ApiError, Row, asking

Message = dict[str, Any]
MIB = 1 << 20


@pytest.fixture
def store(tmp_path: pathlib.Path) -> memoryd.StoreHandle:
    return memoryd.LmdbStore.start(tmp_path / "data", name=f"hostile-{uuid.uuid4().hex[:8]}")


def counting(ran: list[Any]) -> Any:
    @memoryd.tool
    def charge(amount: int, memo: str = "") -> str:
        """Charge a card."""
        ran.append(amount)
        return "charged"

    return charge


def roles(history: list[Message]) -> list[str]:
    return [m["role"] for m in history]


def stop_before_the_second_llm_call() -> Callable[[str], None]:
    """A step hook that stops a run at its third boundary (LLM, tool, then LLM): after
    its first tool step was journaled, so the run is pending with it."""
    seen: list[str] = []

    def hook(run_id: str) -> None:
        seen.append(run_id)
        if len(seen) == 3:
            raise RunInterrupted(f"run {run_id} stopped")

    return hook


# -- 1. a reply larger than the store keeps ---------------------------------------------------

HUGE_REPLIES = [
    asking("charge", json.dumps({"amount": 5, "memo": "x" * 1_500_000})),
    asking("charge", '{"amount": 5}', content="y" * 1_500_000),
    asking("charge", '{"amount": 5}', call_id="i" * 2 * MIB),
]
HUGE_IDS = ["arguments", "content", "call-id"]
TOO_LARGE = r"the model's reply is [\d,]+ bytes .* at most 1,048,576 bytes"


@pytest.mark.parametrize("reply", HUGE_REPLIES, ids=HUGE_IDS)
def test_a_reply_larger_than_the_store_keeps_never_runs_its_tool(
    store: memoryd.StoreHandle, reply: Message
) -> None:
    """A reply past the store's message limit is an `LLMError` naming its size and the
    limit, before its tool runs: nothing is stored or pending (even with
    keep_failed_runs), and a retry with the same run id does not run the tool either."""
    ran: list[int] = []
    for _ in range(2):
        agent = memoryd.Agent(
            llm=ScriptedModel([reply, "done"]),
            memory=store,
            tools=[counting(ran)],
            keep_failed_runs=True,
        )
        with pytest.raises(LLMError, match=TOO_LARGE):
            agent.run("pay 5", "a1", run_id="req-1")
        assert ran == []
        assert store.get("a1") == []
        assert agent.pending_runs() == []


@pytest.mark.parametrize("reply", HUGE_REPLIES[:1], ids=HUGE_IDS[:1])
def test_a_reply_larger_than_the_store_keeps_never_runs_its_tool_in_arun(
    store: memoryd.StoreHandle, reply: Message
) -> None:
    ran: list[int] = []
    agent = memoryd.Agent(llm=ScriptedModel([reply, "done"]), memory=store, tools=[counting(ran)])
    with pytest.raises(LLMError, match=TOO_LARGE):
        asyncio.run(agent.arun("pay 5", "a2"))
    assert ran == []
    assert store.get("a2") == []
    assert agent.pending_runs() == []


def test_a_reply_larger_than_the_store_keeps_never_runs_its_tool_in_a_system(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Through `AgentSystem.call`, twice with one request id: the tool never runs."""
    ran: list[int] = []

    def make(key: str) -> memoryd.Agent:
        model = ScriptedModel([HUGE_REPLIES[0]] * 2)
        return memoryd.Agent(llm=model, memory=store, tools=[counting(ran)])

    system = AgentSystem.start({"payer": make}, store=store, name=f"crew-{uuid.uuid4().hex[:6]}")
    systems.append(system)
    for _ in range(2):
        with pytest.raises(LLMError, match=TOO_LARGE):
            system.call("payer", "k", "pay 5", request_id="req-1")
    assert ran == []
    assert store.get("payer/k") == []
    assert system.pending_runs() == []


def test_a_call_id_leaving_its_answer_no_room_is_refused(tmp_path: pathlib.Path) -> None:
    """A reply that fits, but whose call id is so long that an error answer carrying it
    could not be recorded: refused before the tool runs (its result, too large, would
    have been answered with an error past the limit, after the tool ran)."""
    small = memoryd.LmdbStore.start(tmp_path / "small", name="small", max_message_bytes=8192)
    ran: list[int] = []

    @memoryd.tool
    def charge(amount: int) -> str:
        """Charge a card, answering at length."""
        ran.append(amount)
        return "r" * 20_000

    reply = asking("charge", '{"amount": 5}', call_id="i" * 8000)
    agent = memoryd.Agent(llm=ScriptedModel([reply, "done"]), memory=small, tools=[charge])
    with pytest.raises(LLMError, match=r"tool call id of 8,002 bytes .* at most 8,192 bytes"):
        agent.run("pay 5", "a3")
    assert ran == []
    assert small.get("a3") == []
    assert agent.pending_runs() == []


# -- 2, 3, 6. tool results the store refuses, or that cannot be made text ---------------------


def nest(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


NOT_TEXT = "that cannot be made text"
CASES = {
    "surrogate-returned": ('{"q": "\\udc80"}', "found \ufffd\n[memoryd: 1 lone UTF-16 surrogate"),
    "surrogate-raised": (
        '{"q": "\\udc80", "fail": true}',
        "Error: tool 'probe' raised ValueError: no \ufffd\n[memoryd: 1 lone",
    ),
    "deep": ('{"q": "deep"}', f"Error: tool 'probe' returned a list {NOT_TEXT} (RecursionError)"),
    "unprintable-value": (
        '{"q": "row"}',
        f"Error: tool 'probe' returned a Row {NOT_TEXT} (RuntimeError)",
    ),
    "unprintable-exception": (
        '{"q": "api"}',
        "Error: tool 'probe' raised ApiError: (its message could not be shown",
    ),
}


def probing(ran: list[str]) -> Any:
    @memoryd.tool
    def probe(q: str, fail: bool = False) -> Any:
        """Answer in a hostile way."""
        ran.append(q)
        if q == "deep":
            return nest(5000)
        if q == "row":
            return Row()
        if q == "api":
            raise ApiError()
        if fail:
            raise ValueError(f"no {q}")
        return f"found {q}"

    return probe


@pytest.mark.parametrize("case", list(CASES))
def test_an_unrecordable_tool_result_is_journaled_as_one_the_model_reads(
    store: memoryd.StoreHandle, case: str
) -> None:
    """The tool runs once; its step is journaled with the result made recordable (a
    lone surrogate replaced with U+FFFD, saying so) or an error result naming the type,
    so a run stopped after it is pending with that step, and its resume does not run
    the tool again; the committed turn holds the same answer."""
    arguments, expected = CASES[case]
    ran: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel([asking("probe", arguments), "done"]),
        memory=store,
        tools=[probing(ran)],
    )
    agent.step_hook = stop_before_the_second_llm_call()
    with pytest.raises(RunInterrupted):
        agent.run("hi", "a4", run_id="r4")
    (pending,) = agent.pending_runs()
    assert roles(list(pending.messages)) == ["user", "assistant", "tool"]
    assert pending.messages[2]["content"].startswith(expected)

    again = memoryd.Agent(llm=ScriptedModel(["done"]), memory=store, tools=[probing(ran)])
    assert again.resume("r4").text == "done"
    assert len(ran) == 1
    history = store.get("a4")
    assert roles(history) == ["user", "assistant", "tool", "assistant"]
    assert history[2]["content"] == pending.messages[2]["content"]
    assert agent.pending_runs() == []


@pytest.mark.parametrize("case", list(CASES))
def test_an_unrecordable_tool_result_is_answered_in_arun(
    store: memoryd.StoreHandle, case: str
) -> None:
    arguments, expected = CASES[case]
    ran: list[str] = []
    model = ScriptedModel([asking("probe", arguments), "done"])
    agent = memoryd.Agent(llm=model, memory=store, tools=[probing(ran)])
    assert asyncio.run(agent.arun("hi", "a5")).text == "done"
    assert len(ran) == 1
    history = store.get("a5")
    assert history[2]["content"].startswith(expected)
    assert model.calls[1][-1] == history[2]  # the model read what was stored


# -- 4. a plain tool that returns a coroutine -------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_coroutine_a_plain_tool_returns_is_awaited(store: memoryd.StoreHandle, mode: str) -> None:
    """Its work is done once, its value is the stored result, and no "never awaited"
    warning is left (`arun` awaits it on its loop, `run` runs it to completion)."""
    done: list[str] = []
    loops: list[asyncio.AbstractEventLoop] = []

    async def _send(to: str) -> str:
        done.append(to)
        loops.append(asyncio.get_running_loop())
        return "sent"

    @memoryd.tool
    def send_mail(to: str) -> str:
        """Send mail."""
        return _send(to)  # type: ignore[return-value]

    agent = memoryd.Agent(
        llm=ScriptedModel([asking("send_mail", '{"to": "bob"}'), "done"]),
        memory=store,
        tools=[send_mail],
    )

    async def on_a_loop() -> asyncio.AbstractEventLoop:
        await agent.arun("hi", "a6")
        return asyncio.get_running_loop()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if mode == "run":
            agent.run("hi", "a6")
        else:
            assert loops == [] and asyncio.run(on_a_loop()) is loops[0]  # on the run's loop
        gc.collect()
    assert done == ["bob"]
    assert [m["content"] for m in store.get("a6") if m["role"] == "tool"] == ["sent"]
    assert not [w for w in caught if "never awaited" in str(w.message)]


# -- 5. a run id given again ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_committed_run_id_given_again_is_refused_not_dropped(
    store: memoryd.StoreHandle, mode: str
) -> None:
    """A second run given a committed run's id does not answer with a turn that was
    not stored: its commit is refused (`ConflictError` naming the run id and the
    version holding its turn), and the conversation keeps the first turn only."""
    first = memoryd.Agent(llm=ScriptedModel(["first"]), memory=store).run("q1", "c", run_id="same")
    assert first.version == 1
    second = memoryd.Agent(llm=ScriptedModel(["second"]), memory=store)
    with pytest.raises(ConflictError, match=r"run id 'same' .*committed at version 1"):
        if mode == "run":
            second.run("q2", "c", run_id="same")
        else:
            asyncio.run(second.arun("q2", "c", run_id="same"))
    assert [m["content"] for m in store.get("c")] == ["q1", "first"]
    assert store.version("c") == 1
    third = memoryd.Agent(llm=ScriptedModel(["third"]), memory=store)
    assert third.run("q3", "c", run_id="other").version == 2  # a new id commits


def test_a_failed_run_id_may_be_given_again(store: memoryd.StoreHandle) -> None:
    """A run that failed stored nothing: its id given again runs and commits."""
    failing = memoryd.Agent(llm=ScriptedModel([LLMError("down")]), memory=store)
    with pytest.raises(LLMError, match="down"):
        failing.run("q1", "c", run_id="same")
    retried = memoryd.Agent(llm=ScriptedModel(["answer"]), memory=store)
    assert retried.run("q1", "c", run_id="same").version == 1
    assert [m["content"] for m in store.get("c")] == ["q1", "answer"]


def test_a_repeated_request_id_still_answers_the_first_result(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """An agent system's request id names its run: the same id answers the first
    result again (from the instance, and from the store once the instance is gone),
    with the model called once and the turn stored once."""
    model = ScriptedModel(["first", "second"])
    system = AgentSystem.start(
        {"echo": lambda key: memoryd.Agent(llm=model, memory=store)},
        store=store,
        name=f"crew-{uuid.uuid4().hex[:6]}",
    )
    systems.append(system)
    one = system.call("echo", "k", "q", request_id="req-1")
    two = system.call("echo", "k", "q", request_id="req-1")
    system.stop()
    again = AgentSystem.start(
        {"echo": lambda key: memoryd.Agent(llm=model, memory=store)},
        store=store,
        name=f"crew-{uuid.uuid4().hex[:6]}",
    )
    systems.append(again)
    three = again.call("echo", "k", "q", request_id="req-1")
    assert one.text == two.text == three.text == "first"
    assert one.version == two.version == three.version == 1
    assert len(model.calls) == 1
    assert [m["content"] for m in store.get("echo/k")] == ["q", "first"]

"""An agent type whose factory activates a session (Agently): the session's policy
shapes and records the instance's turns, on the instance's own conversation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import DefaultProvider
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from memoryd.provider.budget import char_length
from tests.agents._agents import Gate, kill_during_step, note_tool, start, stepping_model
from tests.helpers import BACKENDS, Worker, backend_store

Message = dict[str, Any]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> memoryd.StoreHandle:
    """Each test on every backend: LMDB, Redis, and the daemon."""
    return backend_store(request, tmp_path, "sessions")


def echo_recording(seen: list[list[Message]]) -> ScriptedModel:
    """A model that answers ``"echo: <input>"`` and keeps what each call was sent."""

    def answer(sent: list[Message]) -> str:
        seen.append(sent)
        last_user = max(i for i, m in enumerate(sent) if m.get("role") == "user")
        return f"echo: {sent[last_user]['content']}"

    return ScriptedModel([answer] * 1000)


def with_session(store: memoryd.StoreHandle, seen: list[list[Message]], **settings: Any) -> Any:
    """A factory whose agent activates a session without an id, with ``settings``."""

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=echo_recording(seen), memory=store)
        agent.activate_session(**settings)
        return agent

    return make


def test_a_session_made_without_an_id_shapes_the_instances_own_conversation(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """max_length cuts what the model is sent; the turns land in "<type>/<key>" whole,
    and no conversation of the factory's session id is written."""
    seen: list[list[Message]] = []
    limit = 3 * char_length(memoryd.messages.user("x" * 40))
    system = start(systems, {"chat": with_session(store, seen, max_length=limit)}, store=store)
    for i in range(6):
        system.call("chat", "ann", f"{i}" * 40)
    assert store.conversations(include_empty=True) == ["chat/ann"]
    assert len(store.get("chat/ann")) == 12
    assert len(seen[-1]) < 11  # the window was cut, the turn's input kept
    assert sum(char_length(m) for m in seen[-1]) <= limit
    assert seen[-1][-1]["content"] == "5" * 40


def test_the_sessions_handlers_and_memo_follow_the_instance(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Handlers registered on the factory's session run for the instance; the memo they
    return is kept in the instance's conversation and read back after passivation."""
    seen: list[list[Message]] = []

    def keep_last_two(full: Any, window: Any, memo: Any, settings: Any) -> Any:
        return None, window[-2:], {"dropped": len(window) - 2, "tone": settings["tone"]}

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=echo_recording(seen), memory=store)
        session = agent.activate_session(settings={"tone": "dry"})
        session.register_analysis_handler(
            lambda full, window, memo, settings: "last_two" if len(window) > 2 else None
        )
        session.register_resize_handler("last_two", keep_last_two)
        return agent

    now = [0.0]
    system = start(systems, {"chat": make}, store=store, idle_after_s=60.0, clock=lambda: now[0])
    for i in range(3):
        system.call("chat", "bo", f"q{i}")
    assert [m["content"] for m in seen[-1]] == ["echo: q1", "q2"]
    memos = [e.data for e in store.events("chat/bo") if e.kind == "memo"]
    assert memos[-1] == {"dropped": 3, "tone": "dry"}
    now[0] = 120.0
    assert system.passivate_idle() == 1
    assert system.instances() == []
    assert memoryd.Session("chat/bo", store).memo == {"dropped": 3, "tone": "dry"}
    system.call("chat", "bo", "q3")
    assert [m["content"] for m in seen[-1]] == ["echo: q2", "q3"]
    asyncio.run(system.acall("chat", "bo", "q4"))  # a run on the caller's loop: the same
    assert [m["content"] for m in seen[-1]] == ["echo: q3", "q4"]
    assert [e.data for e in store.events("chat/bo") if e.kind == "memo"][-1]["dropped"] == 7


def test_the_sessions_input_and_reply_keys_choose_what_the_instance_records(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """Prompt data sent to an instance is recorded as its factory's session chose."""
    seen: list[list[Message]] = []
    factory = with_session(store, seen, input_keys=["input.question"])
    system = start(systems, {"math": factory}, store=store)
    system.call("math", "cy", {"input": {"question": "2+2?", "secret": "s3cr3t"}})
    user, reply = store.get("math/cy")
    assert json.loads(user["content"]) == {"input.question": "2+2?"}
    assert "s3cr3t" in json.dumps(seen[-1])  # the model saw it all; the record did not
    assert reply["content"].startswith("echo: ")


def test_a_session_named_for_another_conversation_is_refused_and_nothing_is_written(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The instance never writes a session's other conversation, so it says so."""

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=echo_recording([]), memory=store)
        agent.activate_session(f"support-{key}")
        return agent

    system = start(systems, {"chat": make}, store=store)
    with pytest.raises(ValueError, match=r"activated session 'support-dee'.*'chat/dee'"):
        system.call("chat", "dee", "hi")
    assert store.conversations(include_empty=True) == []


def test_a_session_named_for_the_instances_conversation_is_used_as_it_is(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """A factory that names the session "<type>/<key>" gets that very session."""
    sessions: list[memoryd.Session] = []

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=echo_recording([]), memory=DefaultProvider(store))
        sessions.append(agent.activate_session(f"chat/{key}", max_length=10_000))
        return agent

    system = start(systems, {"chat": make}, store=store)
    system.call("chat", "eve", "hi")
    assert [m["content"] for m in sessions[0].full_context] == ["hi", "echo: hi"]


def test_a_session_the_factory_wrote_to_is_refused_and_only_its_own_write_is_there(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """History or a memo written to a session made without an id would be left behind
    in its generated conversation, so the activation says where to write instead."""
    made: list[memoryd.Session] = []

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=echo_recording([]), memory=store)
        made.append(agent.activate_session())
        made[-1].set_memo({"persona": "terse"})
        return agent

    system = start(systems, {"chat": make}, store=store)
    with pytest.raises(ValueError, match=r"wrote to its session.*activate_session\('chat/fay'\)"):
        system.call("chat", "fay", "hi")
    assert store.conversations(include_empty=True) == [made[0].id]
    assert "chat/fay" not in store.conversations(include_empty=True)


def test_a_killed_instance_with_a_session_resumes_its_run_without_a_second_tool_call(
    store: memoryd.StoreHandle, systems: list[AgentSystem]
) -> None:
    """The restarted incarnation's agent gets the session again and finishes the run
    from its journal, each tool called once, the turn committed to "<type>/<key>"."""
    gate, log = Gate(), []
    tool = note_tool(log, gate_at=1, gate=gate)

    def make(key: str) -> memoryd.Agent:
        agent = memoryd.Agent(llm=stepping_model(3), memory=store, tools=[tool])
        agent.activate_session(max_length=100_000)
        return agent

    system = start(systems, {"w": make}, store=store)
    caller = Worker(lambda: system.call("w", "k", "go"))
    caller.start()
    kill_during_step(gate, f"{system.name}/w/k")
    assert caller.outcome().text == "done 3 for go"
    assert log == ["0", "1", "2"]
    assert system.stats()["restarts"] == 1
    assert system.pending_runs() == []
    assert len(store.get("w/k")) == 8 and store.conversations(include_empty=True) == ["w/k"]

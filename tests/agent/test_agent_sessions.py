"""The Agent uses its Session (Agently): window, handlers, memo, keys, chat history."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel
from memoryd.provider.budget import char_length


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"sessions-{uuid.uuid4().hex[:8]}")


def contents(history: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in history]


def fill(store: memoryd.StoreHandle, cid: str, pairs: int) -> list[dict[str, Any]]:
    history = []
    for i in range(pairs):
        history += [messages.user(f"question {i:02d} " + "x" * 80), messages.assistant(f"a{i:02d}")]
    store.add(cid, history)
    return history


def test_a_run_sends_the_sessions_window_not_the_whole_history(
    store: memoryd.StoreHandle,
) -> None:
    """max_length with simple_cut shapes each LLM call of a run."""
    history = fill(store, "s", 15)
    model = ScriptedModel(["ok"])
    agent = memoryd.Agent(llm=model, memory=store)
    agent.activate_session("s", max_length=1200)
    agent.run("and now?")
    sent = model.calls[0]
    everything = [*history, messages.user("and now?")]
    assert len(everything) == 31
    assert 1 < len(sent) < 31
    assert sent == everything[len(everything) - len(sent) :]
    assert sum(char_length(m) for m in sent) <= 1200
    assert len(store.get("s")) == 32


def test_session_handlers_shape_a_run_and_its_memo_is_kept(store: memoryd.StoreHandle) -> None:
    """Agently's keep_last_four: the run sends four messages; the memo is persisted."""

    def analysis(full: Any, window: Any, memo: Any, settings: Any) -> str | None:
        return "keep_last_four" if len(window) > 6 else None

    def keep_last_four(full: Any, window: Any, memo: Any, settings: Any) -> Any:
        return None, window[-4:], {"previous_turns": len(full) - 4, "tag": settings["tag"]}

    fill(store, "s", 5)
    model = ScriptedModel(["ok"])
    agent = memoryd.Agent(llm=model, memory=store)
    agent.activate_session("s", tag="demo")
    agent.register_session_analysis_handler(analysis)
    agent.register_session_resize_handler("keep_last_four", keep_last_four)
    agent.run("latest")
    assert len(model.calls[0]) == 4
    assert model.calls[0][-1] == messages.user("latest")
    assert memoryd.Session("s", store).memo == {"previous_turns": 6, "tag": "demo"}
    assert contents(store.get("s"))[-2:] == ["latest", "ok"]


def test_handlers_survive_reactivating_their_session(store: memoryd.StoreHandle) -> None:
    """activate_session(id) finds the session it made, handlers and settings included."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    first = agent.activate_session("a", max_length=500)
    first.register_resize_handler("mine", lambda f, w, m, s: (None, w, m))
    agent.activate_session("b")
    again = agent.activate_session("a")
    assert again is first
    assert again.settings["max_length"] == 500
    assert list(agent.sessions) == ["a", "b"]


def test_activate_session_takes_the_session_settings(store: memoryd.StoreHandle) -> None:
    """max_length, input_keys, reply_keys and handler settings; bad ones are refused."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    session = agent.activate_session(
        "s", max_length=99, input_keys=["input.q"], reply_keys=["answer"], mood="terse"
    )
    assert session.settings == {"max_length": 99, "mood": "terse"}
    assert (session.input_keys, session.reply_keys) == (("input.q",), ("answer",))
    with pytest.raises(ValueError, match="max_length"):
        agent.activate_session("s", max_length=0)
    assert session.settings["max_length"] == 99


def test_input_and_reply_keys_shape_what_a_run_records(store: memoryd.StoreHandle) -> None:
    """The model is sent all the prompt data; the store keeps the chosen paths."""
    reply = json.dumps({"answer": "42", "debug": "long reasoning"})
    model = ScriptedModel([reply])
    agent = memoryd.Agent(llm=model, memory=store)
    agent.activate_session("s", input_keys=["input.question"], reply_keys=["answer"])
    prompt = {"input": {"question": "6 x 7?"}, "info": {"task": "math"}}
    result = agent.run(prompt)
    assert json.loads(model.calls[0][0]["content"]) == prompt
    assert result.text == reply
    assert contents(store.get("s")) == [
        json.dumps({"input.question": "6 x 7?"}),
        json.dumps({"answer": "42"}),
    ]


def test_sessions_are_listed_and_restored(store: memoryd.StoreHandle) -> None:
    """Agently: restored = Session.load_json(...); agent.sessions[id] = restored."""
    source = memoryd.Session("exported", store)
    source.add_chat_history([messages.user("My order is A-100."), messages.assistant("Noted.")])
    text = source.to_json()
    other = memoryd.EphemeralStore.start(name=f"restored-{uuid.uuid4().hex[:8]}")
    restored = memoryd.Session.load_json(text, other)
    model = ScriptedModel(["A-100"])
    agent = memoryd.Agent(llm=model, memory=other)
    agent.sessions[restored.id] = restored
    assert agent.activate_session(restored.id) is restored
    agent.run("What is my order?")
    assert contents(model.calls[0]) == ["My order is A-100.", "Noted.", "What is my order?"]
    with pytest.raises(ValueError, match="cannot be kept under the id"):
        agent.sessions["other"] = restored


def test_chat_history_methods_act_on_the_active_session(store: memoryd.StoreHandle) -> None:
    """set / add / reset_chat_history go to the active session; none active is an error."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    with pytest.raises(ValueError, match="activate_session first"):
        agent.add_chat_history(messages.user("lost"))
    agent.activate_session("s")
    agent.set_chat_history([messages.user("hi"), messages.assistant("hello")])
    agent.add_chat_history({"role": "user", "content": "continue"})
    assert contents(store.get("s")) == ["hi", "hello", "continue"]
    agent.reset_chat_history()
    assert store.get("s") == []


def test_run_takes_the_conversation_id_positionally(store: memoryd.StoreHandle) -> None:
    """Koog: agent.run("text", "session-1")."""
    model = ScriptedModel(["Paris", "Berlin"])
    agent = memoryd.Agent(llm=model, memory=store)
    agent.run("Capital of France?", "session-1")
    agent.run("And Germany?", "session-1")
    assert len(model.calls[1]) == 3
    assert store.get("session-2") == []


# -- history is never replaced by accident --------------------------------------------------


def test_set_chat_history_over_messages_needs_replace(store: memoryd.StoreHandle) -> None:
    """ConflictError and nothing written; replace=True replaces."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    agent.activate_session("s")
    agent.add_chat_history(messages.user("keep me"))
    version = store.version("s")
    with pytest.raises(memoryd.ConflictError, match="replace=True"):
        agent.set_chat_history([messages.user("new")])
    assert store.version("s") == version
    assert contents(store.get("s")) == ["keep me"]
    agent.set_chat_history([messages.user("new")], replace=True)
    assert contents(store.get("s")) == ["new"]


def test_loading_a_session_over_messages_needs_replace(store: memoryd.StoreHandle) -> None:
    """load_json and load_yaml into a conversation holding messages refuse without replace."""
    text = memoryd.Session("a", store).add_chat_history(messages.user("exported")).to_json()
    yaml_text = memoryd.Session("a", store).to_yaml()
    store.add("b", [messages.user("already here")])
    version = store.version("b")
    for load, data in ((memoryd.Session.load_json, text), (memoryd.Session.load_yaml, yaml_text)):
        with pytest.raises(memoryd.ConflictError, match="holds 1 messages"):
            load(data, store, conversation_id="b")
        assert store.version("b") == version
    restored = memoryd.Session.load_json(text, store, conversation_id="b", replace=True)
    assert contents(restored.full_context) == ["exported"]


def test_a_runs_session_handlers_see_the_whole_stored_history_through_a_window(
    store: memoryd.StoreHandle,
) -> None:
    """Agently's handlers count the whole history (``len(full_context)``): through a
    window of 2 a run's handlers get all of it, as `Session.refresh` gives them. They
    used to get the window's tail, so "compact past 6 messages" never fired."""
    seen: list[int] = []
    agent = memoryd.Agent(
        llm=ScriptedModel(["ok"] * 10), memory=memoryd.DefaultProvider(store, window=2)
    )
    agent.activate_session("whole", max_length=None)
    agent.register_session_analysis_handler(lambda f, w, m, s: seen.append(len(f)))
    for i in range(4):
        agent.run(f"m{i}")
    assert seen == [0, 2, 4, 6]
    assert agent.sessions["whole"].refresh() and seen[-1] == 8


def test_a_resize_handlers_full_context_is_left_to_refresh_and_a_run_says_so_once(
    store: memoryd.StoreHandle,
) -> None:
    """A run only appends its turn: the full context a resize handler returns during a
    run is not stored (one warning per session says so and what stores it), its memo
    is; `Session.refresh` then stores that full context and keeps the memo."""
    from structlog.testing import capture_logs

    agent = memoryd.Agent(llm=ScriptedModel(["ok"] * 10), memory=store)
    agent.activate_session("compacted", max_length=None)
    agent.register_session_analysis_handler(lambda f, w, m, s: "keep2" if len(f) >= 4 else None)
    agent.register_session_resize_handler("keep2", lambda f, w, m, s: (f[-2:], w, {"cut": True}))
    with capture_logs() as logs:
        for i in range(4):
            agent.run(f"m{i}")
    assert contents(store.get("compacted")) == ["m0", "ok", "m1", "ok", "m2", "ok", "m3", "ok"]
    warnings = [e for e in logs if e["event"] == "session_full_context_not_applied"]
    assert len(warnings) == 1 and warnings[0]["conversation_id"] == "compacted"
    session = agent.sessions["compacted"]
    assert session.memo == {"cut": True}
    session.refresh()
    assert contents(store.get("compacted")) == ["m3", "ok"]
    assert memoryd.Session("compacted", store).memo == {"cut": True}


def test_two_agents_sharing_a_session_each_see_the_others_memo(
    store: memoryd.StoreHandle,
) -> None:
    """Two agents (two processes on one daemon, in effect: each has its own session
    object) take turns on one session whose handlers count turns in the memo. Each run
    starts from the memo the other's run left, so no count is lost; a clear made by the
    other empties the memo this one sees."""

    def counting(name: str) -> memoryd.Agent:
        def analysis(full: Any, window: Any, memo: Any, settings: Any) -> str | None:
            return "count"

        def count(full: Any, window: Any, memo: Any, settings: Any) -> Any:
            return None, window, {"turns": memo.get("turns", 0) + 1, "by": name}

        agent = memoryd.Agent(llm=ScriptedModel(["ok"] * 5), memory=store)
        agent.activate_session("shared")
        agent.register_session_analysis_handler(analysis)
        agent.register_session_resize_handler("count", count)
        return agent

    a, b = counting("a"), counting("b")
    for agent in (a, b, a, b, a):
        agent.run("hello")
    assert memoryd.Session("shared", store).memo == {"turns": 5, "by": "a"}
    store.clear("shared")  # elsewhere: the log goes, memo events included
    b.run("again")
    assert memoryd.Session("shared", store).memo == {"turns": 1, "by": "b"}

"""The agent path: memory forms, the current turn kept whole, atomic turns, sessions."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.llm import LLMError, ScriptedModel
from tests.helpers import Worker


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"agent-{uuid.uuid4().hex[:8]}")


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return messages.assistant(tool_calls=[messages.tool_call(cid, name, arguments)])


@memoryd.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


class DictProvider:
    """A user-written MemoryProvider keeping histories in a dict."""

    def __init__(self) -> None:
        self.data: dict[str, list[dict[str, Any]]] = {}
        self.appends: list[str | None] = []

    def history(self, cid: str) -> list[dict[str, Any]]:
        return [dict(m) for m in self.data.get(cid, [])]

    def append(
        self, cid: str, messages: list[dict[str, Any]], *, idempotency_key: str | None = None
    ) -> int:
        self.appends.append(idempotency_key)
        self.data.setdefault(cid, []).extend(messages)
        return len(self.appends)

    def prepare(self, cid: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages[-2:]

    def clear(self, cid: str) -> None:
        self.data.pop(cid, None)


def contents(history: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in history]


# -- the five memory= forms ---------------------------------------------------------------


def test_memory_default_uses_the_shared_default_store() -> None:
    """memory="default": the second run sees the first; the turn is in the default store."""
    model = ScriptedModel(["Hi Alice", "Alice"])
    agent = memoryd.Agent(llm=model)
    agent.run("I am Alice", conversation_id="d1")
    reply = agent.run("Who am I?", conversation_id="d1")
    assert reply.text == "Alice"
    assert contents(model.calls[1]) == ["I am Alice", "Hi Alice", "Who am I?"]
    assert contents(memoryd.default_store().get("d1")) == [
        "I am Alice",
        "Hi Alice",
        "Who am I?",
        "Alice",
    ]


def test_memory_window_uses_the_default_store_with_a_safe_window() -> None:
    """memory=memoryd.window(2): only the last 2 history messages are sent, all are stored."""
    model = ScriptedModel(["a1", "a2", "a3"])
    agent = memoryd.Agent(llm=model, memory=memoryd.window(3))
    for text in ("q1", "q2", "q3"):
        agent.run(text, conversation_id="w")
    assert contents(model.calls[2]) == ["q2", "a2", "q3"]
    assert len(memoryd.default_store().get("w")) == 6


def test_memory_store_handle_uses_that_store_only(store: memoryd.StoreHandle) -> None:
    """memory=<store>: the turn goes to that store; the default store is never started."""
    agent = memoryd.Agent(llm=ScriptedModel(["ok"]), memory=store)
    result = agent.run("hello", conversation_id="s")
    assert store.get("s") == [messages.user("hello"), messages.assistant("ok")]
    assert result.version == store.version("s")
    assert memoryd.whereis("memoryd.default") is None


def test_memory_provider_is_used_as_given() -> None:
    """memory=<MemoryProvider>: history, prepare and append are the provider's."""
    provider = DictProvider()
    model = ScriptedModel(["r1", "r2"])
    agent = memoryd.Agent(llm=model, memory=provider)
    first = agent.run("one", conversation_id="p")
    agent.run("two", conversation_id="p")
    assert contents(model.calls[1]) == ["r1", "two"]  # the provider's prepare: last 2
    assert contents(provider.data["p"]) == ["one", "r1", "two", "r2"]
    assert provider.appends[0] == first.run_id


def test_memory_false_keeps_nothing(store: memoryd.StoreHandle) -> None:
    """memory=False: no run sees another; no store is touched."""
    model = ScriptedModel(["r1", "r2"])
    agent = memoryd.Agent(llm=model, memory=False)
    agent.run("one", conversation_id="n")
    result = agent.run("two", conversation_id="n")
    assert model.calls[1] == [messages.user("two")]
    assert result.version is None
    assert memoryd.whereis("memoryd.default") is None


def test_bad_memory_forms_are_named() -> None:
    """A memory= value that is none of the forms raises, listing the forms."""
    with pytest.raises(ValueError, match="not a memory form"):
        memoryd.Agent(llm=ScriptedModel([]), memory="defualt")
    with pytest.raises(TypeError, match="not a memory form"):
        memoryd.Agent(llm=ScriptedModel([]), memory=42)
    with pytest.raises(TypeError, match="memory_filter"):
        memoryd.Agent(
            llm=ScriptedModel([]),
            filters=[memoryd.memory_filter(object.__new__(memoryd.EphemeralStore))],
        )
    with pytest.raises(memoryd.InvalidMessage, match="run input"):
        memoryd.Agent(llm=ScriptedModel([]), memory=False).run(42)


# -- the turn ---------------------------------------------------------------------------------


def test_generated_conversation_id_is_returned(store: memoryd.StoreHandle) -> None:
    """A run without conversation id gets a new one, on the result and in the store."""
    result = memoryd.Agent(llm=ScriptedModel(["ok"]), memory=store).run("hi")
    assert store.get(result.conversation_id) == list(result.messages)
    assert result.text == "ok"


def test_window_keeps_the_current_turn_in_a_ten_step_tool_loop(store: memoryd.StoreHandle) -> None:
    """With window 2 every LLM call still gets the user input and the whole turn so far."""
    script: list[Any] = [call(f"c{i}", "echo", text=f"t{i}") for i in range(9)] + ["done"]
    model = ScriptedModel(script)
    store.add("long", [messages.user("old q"), messages.assistant("old a")] * 3)
    agent = memoryd.Agent(
        llm=model, memory=memoryd.DefaultProvider(store, window=2), tools=[echo], max_steps=10
    )
    result = agent.run("the question", conversation_id="long")
    assert result.text == "done"
    assert len(model.calls) == 10
    for step, sent in enumerate(model.calls):
        turn_so_far = list(result.messages[: 1 + 2 * step])
        assert sent[-len(turn_so_far) :] == turn_so_far
        assert len(sent) == max(2, len(turn_so_far))  # the window, or the whole turn
    assert model.calls[0] == [messages.assistant("old a"), messages.user("the question")]
    assert len(store.get("long")) == 6 + 20


def test_small_turn_still_gets_history_within_the_window(store: memoryd.StoreHandle) -> None:
    """When the turn fits, the window's view (history + turn) is sent unchanged."""
    store.add("c", [messages.user("q0"), messages.assistant("a0")])
    model = ScriptedModel(["a1"])
    memoryd.Agent(llm=model, memory=memoryd.DefaultProvider(store, window=3)).run(
        "q1", conversation_id="c"
    )
    assert contents(model.calls[0]) == ["q0", "a0", "q1"]


def test_turn_is_committed_as_one_write_keyed_by_the_run_id(store: memoryd.StoreHandle) -> None:
    """Input, tool call, tool result and answer are one appended event, key = run id."""
    agent = memoryd.Agent(
        llm=ScriptedModel([call("c1", "echo", text="x"), "x!"]), memory=store, tools=[echo]
    )
    before = store.version("t")
    result = agent.run("say x", conversation_id="t")
    events = store.events("t", after=before)
    assert [e.kind for e in events] == ["appended"]
    assert events[0].idempotency_key == result.run_id
    assert [m["role"] for m in events[0].messages] == ["user", "assistant", "tool", "assistant"]


def test_failing_run_leaves_history_unchanged(store: memoryd.StoreHandle) -> None:
    """An LLM failure after a tool call stores nothing: no dangling call, no user message."""
    store.add("f", [messages.user("q0"), messages.assistant("a0")])
    before = store.get("f")
    agent = memoryd.Agent(
        llm=ScriptedModel([call("c1", "echo", text="x"), LLMError("overloaded")]),
        memory=store,
        tools=[echo],
    )
    with pytest.raises(LLMError, match="overloaded"):
        agent.run("q1", conversation_id="f")
    assert store.get("f") == before
    assert agent.pending_runs("f") == []


def test_step_limit_leaves_history_unchanged(store: memoryd.StoreHandle) -> None:
    """StepLimitExceeded stores nothing."""
    agent = memoryd.Agent(
        llm=ScriptedModel([call(f"c{i}", "echo", text="x") for i in range(2)]),
        memory=store,
        tools=[echo],
        max_steps=2,
    )
    with pytest.raises(memoryd.StepLimitExceeded, match="2 LLM calls"):
        agent.run("loop", conversation_id="s")
    assert store.get("s") == []


def test_conversation_changed_during_the_run_is_a_conflict(store: memoryd.StoreHandle) -> None:
    """Another writer's add during the run makes the commit fail; its write stays alone."""

    def interloper(sent: list[dict[str, Any]]) -> str:
        store.add("c", [messages.user("from elsewhere")])
        return "late answer"

    agent = memoryd.Agent(llm=ScriptedModel([interloper]), memory=store)
    with pytest.raises(memoryd.ConflictError, match="changed while run"):
        agent.run("mine", conversation_id="c")
    assert store.get("c") == [messages.user("from elsewhere")]


# -- concurrency --------------------------------------------------------------------------------


def test_two_agents_on_two_conversations_do_not_interfere(store: memoryd.StoreHandle) -> None:
    """Two threads, two agents, two conversations of one store: each sees only its own."""

    def converse(name: str) -> list[Any]:
        model = ScriptedModel([lambda sent, i=i: f"{name}-a{i}" for i in range(5)])
        agent = memoryd.Agent(llm=model, memory=store)
        for i in range(5):
            agent.run(f"{name}-q{i}", conversation_id=name)
        return [m["content"] for m in model.calls[-1]]

    workers = [Worker(lambda n=n: converse(n), name=n) for n in ("left", "right")]
    for worker in workers:
        worker.start()
    results = [worker.outcome() for worker in workers]
    for name, last_sent in zip(("left", "right"), results, strict=True):
        assert all(text.startswith(name) for text in last_sent)
        expected = [t for i in range(5) for t in (f"{name}-q{i}", f"{name}-a{i}")]
        assert contents(store.get(name)) == expected


def test_two_runs_on_one_conversation_serialise_or_conflict(store: memoryd.StoreHandle) -> None:
    """A second run started during the first either waits for it or fails with ConflictError.

    Either way the history is whole turns, and every committed turn was computed on
    the full history before it.
    """
    outcomes: dict[str, Any] = {}
    second_done = threading.Event()

    def second() -> None:
        model = ScriptedModel([lambda sent: f"B saw {len(sent)}"])
        try:
            outcomes["B"] = memoryd.Agent(llm=model, memory=store).run("B", conversation_id="x")
        except memoryd.ConflictError as exc:
            outcomes["B"] = exc
        finally:
            second_done.set()

    def first_llm(sent: list[dict[str, Any]]) -> str:
        threading.Thread(target=second, daemon=True).start()
        second_done.wait(0.5)  # a waiting second run cannot finish; a racing one would
        return f"A saw {len(sent)}"

    try:
        outcomes["A"] = memoryd.Agent(llm=ScriptedModel([first_llm]), memory=store).run(
            "A", conversation_id="x"
        )
    except memoryd.ConflictError as exc:
        outcomes["A"] = exc
    assert second_done.wait(10)
    committed = [r for r in outcomes.values() if isinstance(r, memoryd.RunResult)]
    assert committed
    history = store.get("x")
    seen = 0
    for turn in sorted(committed, key=lambda r: r.version or 0):
        assert turn.text.endswith(f"saw {seen + 1}")  # the full history before it, + input
        assert history[seen : seen + 2] == list(turn.messages)
        seen += 2
    assert len(history) == seen


# -- sessions -----------------------------------------------------------------------------------


def test_activate_session_makes_runs_use_it(store: memoryd.StoreHandle) -> None:
    """activate_session binds later runs; deactivate_session unbinds them."""
    model = ScriptedModel(["r1", "r2", "r3"])
    agent = memoryd.Agent(llm=model, memory=store)
    session = agent.activate_session("support-demo")
    assert agent.session is session
    assert isinstance(session, memoryd.Session)
    agent.run("my order is A-100")
    agent.run("what is my order?")
    assert contents(model.calls[1])[:2] == ["my order is A-100", "r1"]
    assert len(session.full_context) == 4
    agent.deactivate_session()
    assert agent.session is None
    other = agent.run("fresh")
    assert other.conversation_id != "support-demo"
    assert model.calls[2] == [messages.user("fresh")]


def test_activate_session_needs_memory_in_a_store() -> None:
    """Without memory there is nothing to hold a session."""
    with pytest.raises(ValueError, match="activate_session needs memory"):
        memoryd.Agent(llm=ScriptedModel([]), memory=False).activate_session("s")


def test_a_reply_asking_for_too_many_tool_calls_runs_max_tool_calls_of_them(
    store: memoryd.StoreHandle,
) -> None:
    """40 parallel calls in one reply, the default limit of 32: 32 tools run, the other 8
    calls are answered with an error naming the limit, and the committed turn holds all
    40 results (the step is journaled whole, so a resume would run none of them)."""
    ran: list[int] = []

    @memoryd.tool
    def note(n: int) -> str:
        """Note n."""
        ran.append(n)
        return "ok"

    calls = [messages.tool_call(f"c{n}", "note", {"n": n}) for n in range(40)]
    agent = memoryd.Agent(
        llm=ScriptedModel([messages.assistant(tool_calls=calls), "done"]),
        memory=store,
        tools=[note],
    )
    assert agent.run("go", conversation_id="many").text == "done"
    assert ran == list(range(32))
    results = [m for m in store.get("many") if m["role"] == "tool"]
    assert len(results) == 40
    assert all("at most 32 run per step" in m["content"] for m in results[32:])
    with pytest.raises(ValueError, match="max_tool_calls must be an int >= 1"):
        memoryd.Agent(llm=ScriptedModel([]), memory=store, max_tool_calls=0)


@pytest.mark.parametrize("journal", [None, False], ids=["journaled", "no-journal"])
def test_a_tool_result_larger_than_the_store_keeps_becomes_an_error_the_model_reads(
    journal: bool | None,
) -> None:
    """A tool returns 10 KB where the store keeps messages of 4 KB: the tool runs once,
    the model reads an error naming the sizes and answers, the turn is committed with
    that error as the result, no run is left pending, and a warning says what was
    refused. (The run used to fail after the tool ran, naming "messages[3]" of its
    journal write, so each retry ran the tool again to fail the same way.)"""
    from structlog.testing import capture_logs

    store = memoryd.EphemeralStore.start(
        name=f"agent-{uuid.uuid4().hex[:8]}", max_message_bytes=4096
    )
    ran: list[int] = []

    @memoryd.tool
    def fetch(n: int) -> str:
        """Fetch n characters."""
        ran.append(n)
        return "x" * n

    model = ScriptedModel(
        [call("c1", "fetch", n=10_000), lambda sent: "read: " + sent[-1]["content"]]
    )
    agent = memoryd.Agent(llm=model, memory=store, tools=[fetch], journal=journal)
    with capture_logs() as logs:
        result = agent.run("go", conversation_id="big")
    assert ran == [10_000]
    error = "Error: the result of tool 'fetch' is 10,048 bytes as compact JSON; the store "
    assert result.text.startswith("read: " + error)
    assert "at most 4,096 bytes" in result.text
    recorded = store.get("big")
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool", "assistant"]
    assert recorded[2]["content"].startswith(error)
    if journal is None:
        assert agent.pending_runs("big") == []
    [warning] = [e for e in logs if e["event"] == "tool_result_too_large"]
    assert (warning["tool"], warning["bytes"], warning["limit"]) == ("fetch", 10_048, 4096)
    small = memoryd.Agent(
        llm=ScriptedModel([call("c2", "fetch", n=3000), "fine"]),
        memory=store,
        tools=[fetch],
        journal=journal,
    )
    assert small.run("again", conversation_id="big").text == "fine"
    assert store.get("big")[-2]["content"] == "x" * 3000
    store.stop()


def test_a_run_session_or_agent_type_in_memoryds_own_space_is_refused_before_anything(
    store: memoryd.StoreHandle,
) -> None:
    """An agent run, a session or an agent type whose conversation would be in
    ``memoryd.run/`` (run journals and leases) is refused naming the space, before the
    model is called or anything written; such a turn used to be stored there, hidden
    from `conversations` and mixed with memoryd's own records."""
    from memoryd.agents import AgentSystem

    model = ScriptedModel(["hi"])
    agent = memoryd.Agent(llm=model, memory=store)
    with pytest.raises(memoryd.InvalidConversationId, match="memoryd's own space"):
        agent.run("hello", "memoryd.run/abc")
    with pytest.raises(memoryd.InvalidConversationId, match="memoryd's own space"):
        memoryd.Session("memoryd.run/abc", store)
    with pytest.raises(ValueError, match="memoryd's own space"):
        AgentSystem.start({"memoryd.run": lambda key: agent}, store=store, name="own-space")
    assert model.calls == []
    assert store.conversations(include_empty=True, prefix="memoryd.run/") == []

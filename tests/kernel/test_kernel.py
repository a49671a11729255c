"""The kernel path: filters as onion layers, the tool loop, full and delta mode."""

from __future__ import annotations

import io
import pathlib
import uuid
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.export import export_jsonl
from memoryd.llm import LLMError, ScriptedModel


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"kernel-{uuid.uuid4().hex[:8]}")


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return messages.assistant(tool_calls=[messages.tool_call(cid, name, arguments)])


@memoryd.tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class Retry(memoryd.Filter):
    """Re-runs the inner chain once when the LLM fails."""

    def __init__(self) -> None:
        self.attempts = 0

    def around_chat(self, request: memoryd.ChatRequest, next: Any) -> dict[str, Any]:
        self.attempts += 1
        try:
            return next(request)
        except LLMError:
            self.attempts += 1
            return next(request)


def test_second_invoke_of_a_conversation_sees_the_first(store: memoryd.StoreHandle) -> None:
    """With a memory filter, invoke 2 is sent invoke 1's user message and answer."""
    model = ScriptedModel(["Hello Alice", "You are Alice"])
    kernel = memoryd.Kernel(llm=model, filters=[memoryd.memory_filter(store)])
    ctx = memoryd.Context(conversation_id="session-1")
    kernel.invoke([messages.user("My name is Alice")], context=ctx)
    result = kernel.invoke([messages.user("What's my name?")], context=ctx)
    assert result.text == "You are Alice"
    assert [m["content"] for m in model.calls[1]] == [
        "My name is Alice",
        "Hello Alice",
        "What's my name?",
    ]
    assert [m["content"] for m in store.get("session-1")] == [
        "My name is Alice",
        "Hello Alice",
        "What's my name?",
        "You are Alice",
    ]


def test_system_prompt_reaches_the_llm_but_is_never_stored(store: memoryd.StoreHandle) -> None:
    """The system prompt is the first message of every call and absent from the store."""
    model = ScriptedModel([call("c1", "add", a=1, b=2), "3"])
    kernel = memoryd.Kernel(
        llm=model, tools=[add], filters=[memoryd.memory_filter(store)], system_prompt="Be brief."
    )
    kernel.invoke([messages.user("1+2?")], context=memoryd.Context(conversation_id="s"))
    for sent in model.calls:
        assert sent[0] == messages.system("Be brief.")
    assert all(m["role"] != "system" for m in store.get("s"))
    assert [m["role"] for m in store.get("s")] == ["user", "assistant", "tool", "assistant"]


def test_full_mode_keeps_the_tool_loop_within_one_invoke_and_stores_nothing(
    store: memoryd.StoreHandle,
) -> None:
    """Without a memory filter the second LLM call sees the call and result; nothing persists."""
    model = ScriptedModel([call("c1", "add", a=2, b=3), "5", "no memory"])
    kernel = memoryd.Kernel(llm=model, tools=[add])
    result = kernel.invoke([messages.user("2+3?")])
    assert [m["role"] for m in model.calls[1]] == ["user", "assistant", "tool"]
    assert model.calls[1][2] == messages.tool("c1", "5")
    assert [m["role"] for m in result.messages] == ["assistant", "tool", "assistant"]
    assert result.context.conversation_id is None
    kernel.invoke([messages.user("and now?")], context=memoryd.Context(conversation_id="x"))
    assert model.calls[2] == [messages.user("and now?")]
    assert store.conversations() == []


def test_a_one_off_invoke_leaves_no_residue(tmp_path: pathlib.Path) -> None:
    """Without a conversation id the history lives in memory only: no conversation, no
    change, no export line, no commit; the tool loop still sees its own messages."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name=f"one-off-{uuid.uuid4().hex[:8]}")
    commits = store.stats()["commits"]
    model = ScriptedModel([call("c1", "add", a=1, b=1), "2"])
    kernel = memoryd.Kernel(llm=model, tools=[add], filters=[memoryd.memory_filter(store)])
    result = kernel.invoke([messages.user("1+1?")])
    assert result.text == "2"
    assert result.context.conversation_id is not None
    assert [m["role"] for m in model.calls[1]] == ["user", "assistant", "tool"]
    assert store.conversations(include_empty=True) == []
    assert store.tail() == []
    out = io.StringIO()
    assert export_jsonl(store, out).events == 0
    assert store.stats()["commits"] == commits


def test_one_offs_do_not_see_each_other(store: memoryd.StoreHandle) -> None:
    """Each invoke without an id starts from nothing."""
    model = ScriptedModel(["first", "second"])
    kernel = memoryd.Kernel(llm=model, filters=[memoryd.memory_filter(store)])
    kernel.invoke([messages.user("one")])
    kernel.invoke([messages.user("two")])
    assert model.calls[1] == [messages.user("two")]


def test_failed_invoke_without_conversation_id_leaves_no_conversation(
    store: memoryd.StoreHandle,
) -> None:
    """Nothing is stored also when the LLM fails mid tool loop."""
    model = ScriptedModel([call("c1", "add", a=1, b=1), LLMError("down")])
    kernel = memoryd.Kernel(llm=model, tools=[add], filters=[memoryd.memory_filter(store)])
    with pytest.raises(LLMError, match="down"):
        kernel.invoke([messages.user("1+1?")])
    assert store.conversations(include_empty=True) == []


def test_retry_outside_the_memory_filter_does_not_duplicate(store: memoryd.StoreHandle) -> None:
    """The retried delta carries the same idempotency key, so it is stored once."""
    retry = Retry()
    model = ScriptedModel([LLMError("flaky"), "hi"])
    kernel = memoryd.Kernel(llm=model, filters=[retry, memoryd.memory_filter(store)])
    kernel.invoke([messages.user("hello")], context=memoryd.Context(conversation_id="r"))
    assert retry.attempts == 2
    assert store.get("r") == [messages.user("hello"), messages.assistant("hi")]
    assert model.calls[1] == [messages.user("hello")]


def test_first_filter_is_the_outermost_layer() -> None:
    """Layers run first-to-last on the way in and last-to-first on the way out."""
    seen: list[str] = []

    class Trace(memoryd.Filter):
        def __init__(self, name: str) -> None:
            self.name = name

        def around_chat(self, request: memoryd.ChatRequest, next: Any) -> dict[str, Any]:
            seen.append(f"{self.name}>")
            reply = next(request)
            seen.append(f"<{self.name}")
            return reply

        def around_tool(self, call: memoryd.ToolCall, next: Any) -> memoryd.ToolResult:
            seen.append(f"{self.name}:tool")
            return next(call)

    model = ScriptedModel([call("c1", "add", a=1, b=1), "2"])
    kernel = memoryd.Kernel(llm=model, tools=[add], filters=[Trace("a"), Trace("b")])
    kernel.invoke([messages.user("1+1?")])
    assert seen == ["a>", "b>", "<b", "<a", "a:tool", "b:tool", "a>", "b>", "<b", "<a"]


def test_tool_filter_can_change_the_result() -> None:
    """An around_tool layer sees the result and may replace it before the model does."""

    class Upper(memoryd.Filter):
        def around_tool(self, call: memoryd.ToolCall, next: Any) -> memoryd.ToolResult:
            result = next(call)
            return memoryd.ToolResult(call_id=result.call_id, name=result.name, content="SIX")

    model = ScriptedModel([call("c1", "add", a=3, b=3), "ok"])
    memoryd.Kernel(llm=model, tools=[add], filters=[Upper()]).invoke([messages.user("3+3")])
    assert model.calls[1][-1] == messages.tool("c1", "SIX")


def test_tool_exception_becomes_an_error_result_the_model_reads() -> None:
    """A raising tool, an unknown tool and refused arguments (also JSON nested too deeply to
    decode) each give an error result."""

    @memoryd.tool
    def explode(reason: str) -> str:
        """Fail on purpose."""
        raise RuntimeError(reason)

    model = ScriptedModel(
        [
            messages.assistant(
                tool_calls=[
                    messages.tool_call("c1", "explode", {"reason": "kaboom"}),
                    messages.tool_call("c2", "missing", {}),
                    messages.tool_call("c3", "add", {"a": "one", "b": 2}),
                    messages.tool_call("c4", "add", "{not json"),
                    messages.tool_call("c5", "add", "[" * 100_000 + "]" * 100_000),
                ]
            ),
            "sorry",
        ]
    )
    result = memoryd.Kernel(llm=model, tools=[add, explode]).invoke([messages.user("go")])
    assert result.text == "sorry"
    errors = {m["tool_call_id"]: m["content"] for m in model.calls[1] if m["role"] == "tool"}
    assert "RuntimeError: kaboom" in errors["c1"]
    assert "no tool 'missing'" in errors["c2"]
    assert "argument 'a' must be of JSON type integer" in errors["c3"]
    assert "not valid JSON" in errors["c4"]
    assert "nests too deeply" in errors["c5"]  # the model's reply, not a RecursionError


def test_step_limit_is_a_clear_error(store: memoryd.StoreHandle) -> None:
    """A model that keeps calling tools stops at max_steps; the stored calls stay answered."""
    model = ScriptedModel([call(f"c{i}", "add", a=i, b=i) for i in range(3)])
    kernel = memoryd.Kernel(
        llm=model, tools=[add], filters=[memoryd.memory_filter(store)], max_steps=3
    )
    with pytest.raises(memoryd.StepLimitExceeded, match="3 LLM calls"):
        kernel.invoke([messages.user("loop")], context=memoryd.Context(conversation_id="l"))
    history = store.get("l")
    assert [m["role"] for m in history] == ["user"] + ["assistant", "tool"] * 3


def test_invoke_result_carries_everything_produced() -> None:
    """.message, .text, .messages and .steps describe the invoke."""
    model = ScriptedModel([call("c1", "add", a=1, b=2), "three"])
    result = memoryd.Kernel(llm=model, tools=[add]).invoke([messages.user("1+2")])
    assert result.message == messages.assistant("three")
    assert result.text == "three"
    assert result.steps == 2
    assert result.messages[1] == messages.tool("c1", "3")


def test_memory_filter_needs_a_conversation_id_on_direct_chat(store: memoryd.StoreHandle) -> None:
    """kernel.chat with a memory filter and no conversation id names the problem."""
    kernel = memoryd.Kernel(llm=ScriptedModel(["x"]), filters=[memoryd.memory_filter(store)])
    with pytest.raises(ValueError, match="needs a conversation id"):
        kernel.chat([messages.user("hi")])


def test_bad_arguments_are_named() -> None:
    """Bad llm, filters, tools, max_steps, messages and context raise clear errors."""
    model = ScriptedModel(["x"])
    with pytest.raises(TypeError, match="llm must be a chat model"):
        memoryd.Kernel(llm=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"filters\[0\]"):
        memoryd.Kernel(llm=model, filters=[object()])
    with pytest.raises(TypeError, match=r"tools\[0\]"):
        memoryd.Kernel(llm=model, tools=[42])
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        memoryd.Kernel(llm=model, tools=[add, add])
    with pytest.raises(ValueError, match="max_steps"):
        memoryd.Kernel(llm=model, max_steps=0)
    with pytest.raises(TypeError, match="memory_filter needs a store"):
        memoryd.memory_filter("not a store")
    kernel = memoryd.Kernel(llm=model)
    with pytest.raises(memoryd.InvalidMessage, match="empty"):
        kernel.invoke([])
    with pytest.raises(TypeError, match=r"memoryd\.Context"):
        kernel.invoke([messages.user("x")], context={"conversation_id": "x"})  # type: ignore[arg-type]


def test_a_reply_that_is_not_an_assistant_message_is_an_llm_error() -> None:
    """A model returning something else fails with LLMError naming it."""

    class Broken:
        def complete(self, messages: Any, *, tools: Any = None) -> Any:
            return {"role": "user", "content": "?"}

    with pytest.raises(LLMError, match="not an assistant message"):
        memoryd.Kernel(llm=Broken()).invoke([messages.user("x")])


def test_context_is_an_immutable_value_with_helpers() -> None:
    """with_... helpers return new contexts; bad ids and metadata are refused."""
    ctx = memoryd.Context(conversation_id="a").with_metadata(user="bob")
    assert ctx.with_conversation_id("b").conversation_id == "b"
    assert ctx.conversation_id == "a"
    assert dict(ctx.metadata) == {"user": "bob"}
    assert dict(ctx.without_metadata("user").metadata) == {}
    with pytest.raises(TypeError):
        ctx.metadata["x"] = 1  # type: ignore[index]
    with pytest.raises(memoryd.InvalidConversationId):
        memoryd.Context(conversation_id="")
    with pytest.raises(TypeError, match="keys must be str"):
        memoryd.Context(metadata={1: "x"})


def test_a_runs_context_is_the_context_the_checked_constructor_makes() -> None:
    """`Context.of_run` makes what the checked constructor makes for a run: equal,
    immutable, and as good as any context for the with_... helpers."""
    ctx = memoryd.Context.of_run("a", "r1")
    assert ctx == memoryd.Context(conversation_id="a", metadata={"run_id": "r1"})
    assert dict(ctx.with_metadata(user="bob").metadata) == {"run_id": "r1", "user": "bob"}
    with pytest.raises(TypeError):
        ctx.metadata["x"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        ctx.conversation_id = "b"  # type: ignore[misc]


def test_an_agents_tools_and_filters_see_the_runs_context() -> None:
    """A filter around a run's LLM call sees the run's conversation id and run id."""
    seen: list[memoryd.Context] = []

    class Spy:
        def around_chat(self, request: Any, call_next: Any) -> Any:
            seen.append(request.context)
            return call_next(request)

    agent = memoryd.Agent(llm=ScriptedModel(["hi"]), memory=False, filters=[Spy()])
    result = agent.run("hello", "conv-1", run_id="run-1")
    assert result.text == "hi"
    assert seen == [memoryd.Context(conversation_id="conv-1", metadata={"run_id": "run-1"})]


def test_tool_calls_past_max_tool_calls_are_answered_and_not_run() -> None:
    """A reply asking for 5 calls with max_tool_calls=2: two tools run, the other three
    calls get an error result naming the limit; the model reads five results."""
    ran: list[int] = []

    @memoryd.tool
    def note(n: int) -> str:
        """Note n."""
        ran.append(n)
        return f"noted {n}"

    calls = [messages.tool_call(f"c{n}", "note", {"n": n}) for n in range(5)]
    model = ScriptedModel([messages.assistant(tool_calls=calls), "done"])
    result = memoryd.Kernel(llm=model, tools=[note], max_tool_calls=2).invoke([messages.user("go")])
    assert result.text == "done" and ran == [0, 1]
    answers = {m["tool_call_id"]: m["content"] for m in model.calls[1] if m["role"] == "tool"}
    assert [answers[f"c{n}"] for n in range(2)] == ["noted 0", "noted 1"]
    for n in range(2, 5):
        assert "not run: this reply asked for 5 tool calls and at most 2 run" in answers[f"c{n}"]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_tool_calls must be an int >= 1"):
            memoryd.Kernel(llm=model, max_tool_calls=bad)


def test_a_tool_result_larger_than_the_memorys_store_keeps_is_an_error_the_model_reads() -> None:
    """Through a memory filter on a store keeping 4 KB messages, a tool returning 10 KB:
    the tool runs once, the stored delta and the model both get an error naming the
    sizes, and the invoke finishes. It used to fail after the tool ran, its delta
    refused by the store ("messages[0]"), leaving the tool call unanswered."""
    store = memoryd.EphemeralStore.start(
        name=f"kernel-{uuid.uuid4().hex[:8]}", max_message_bytes=4096
    )
    ran: list[int] = []

    @memoryd.tool
    def fetch(n: int) -> str:
        """Fetch n characters."""
        ran.append(n)
        return "y" * n

    kernel = memoryd.Kernel(
        llm=ScriptedModel([call("c1", "fetch", n=10_000), lambda sent: sent[-1]["content"]]),
        tools=[fetch],
        filters=[memoryd.memory_filter(store)],
    )
    result = kernel.invoke([messages.user("go")], context=memoryd.Context(conversation_id="big"))
    assert ran == [10_000]
    assert result.text.startswith("Error: the result of tool 'fetch' is 10,048 bytes")
    stored = store.get("big")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == result.text
    store.stop()

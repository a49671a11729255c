"""The kernel against hostile replies and tool values: a reply its memory cannot record,
a tool result holding a lone surrogate, a value nested past the recursion limit or
whose ``__str__`` raises, a plain tool that returns a coroutine. Each is refused
before a tool runs, or answered with a result the model reads, and a stored tool call is
never left unanswered; real LMDB stores, `ScriptedModel` at the LLM boundary."""

from __future__ import annotations

import asyncio
import gc
import json
import pathlib
import uuid
import warnings
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd import messages
from memoryd.llm import LLMError, ScriptedModel
from tests.helpers import ApiError, Row, asking

Message = dict[str, Any]
MIB = 1 << 20


@pytest.fixture
def store(tmp_path: pathlib.Path) -> memoryd.StoreHandle:
    return memoryd.LmdbStore.start(tmp_path / "data", name=f"hostile-{uuid.uuid4().hex[:8]}")


def nest(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def remembering(store: memoryd.StoreHandle, model: ScriptedModel, tools: list[Any]) -> Any:
    return memoryd.Kernel(llm=model, tools=tools, filters=[memoryd.memory_filter(store)])


def answered(history: list[Message]) -> bool:
    """True when every stored tool call has its tool message."""
    asked = {c["id"] for m in history for c in m.get("tool_calls") or ()}
    return asked <= {m.get("tool_call_id") for m in history}


# -- 1. a reply larger than the store keeps ---------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        asking("charge", json.dumps({"amount": 5, "memo": "x" * 1_500_000})),
        asking("charge", '{"amount": 5}', content="y" * 1_500_000),
        asking("charge", '{"amount": 5}', call_id="i" * 2 * MIB),
    ],
    ids=["arguments", "content", "call-id"],
)
def test_a_reply_larger_than_the_store_keeps_is_refused_before_its_tool_runs(
    store: memoryd.StoreHandle, reply: Message
) -> None:
    """With a memory filter, a reply past the store's message limit is an `LLMError`
    naming its size and the limit: its tool never runs, and the reply is not stored
    (the user's message, stored before the call, is all the conversation holds)."""
    ran: list[int] = []

    @memoryd.tool
    def charge(amount: int, memo: str = "") -> str:
        """Charge a card."""
        ran.append(amount)
        return "charged"

    kernel = remembering(store, ScriptedModel([reply, "done"]), [charge])
    ctx = memoryd.Context(conversation_id="k1")
    with pytest.raises(LLMError, match=r"is [\d,]+ bytes .* at most 1,048,576 bytes"):
        kernel.invoke([messages.user("pay 5")], context=ctx)
    assert ran == []
    assert [m["role"] for m in store.get("k1")] == ["user"]


def test_a_kernel_without_memory_holds_a_reply_to_no_size(store: memoryd.StoreHandle) -> None:
    """Full mode keeps nothing, so it has no limit to hold a reply to: the tool of a
    1.5 MB reply runs once, and nothing reaches the store."""
    ran: list[int] = []

    @memoryd.tool
    def charge(amount: int, memo: str = "") -> str:
        """Charge a card."""
        ran.append(amount)
        return "charged"

    reply = asking("charge", json.dumps({"amount": 5, "memo": "x" * 1_500_000}))
    kernel = memoryd.Kernel(llm=ScriptedModel([reply, "done"]), tools=[charge])
    assert kernel.invoke([messages.user("pay 5")]).text == "done"
    assert ran == [5]
    assert store.conversations() == []


def test_log_events_show_long_values_cut(tmp_path: pathlib.Path) -> None:
    """A 5,000-character call id and a tool error of 100,000 characters reach the logs
    cut to a few hundred characters (with their lengths), not whole."""
    small = memoryd.LmdbStore.start(tmp_path / "small", name="small", max_message_bytes=64_000)

    @memoryd.tool
    def big() -> str:
        """A result larger than the store keeps."""
        return "z" * 100_000

    @memoryd.tool
    def fail() -> str:
        """Fail loudly."""
        raise RuntimeError("e" * 100_000)

    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a" * 5000, "type": "function", "function": {"name": "big", "arguments": ""}},
            {"id": "b" * 5000, "type": "function", "function": {"name": "fail", "arguments": ""}},
        ],
    }
    kernel = remembering(small, ScriptedModel([reply, "done"]), [big, fail])
    with capture_logs() as logs:
        kernel.invoke([messages.user("go")], context=memoryd.Context(conversation_id="k"))
    events = {e["event"] for e in logs}
    assert {"tool_result_too_large", "tool_failed"} <= events
    longest = max(len(v) for e in logs for v in e.values() if isinstance(v, str))
    assert longest < 300
    assert any("(5,000 characters)" in str(e.get("call_id")) for e in logs)
    assert answered(small.get("k"))


# -- 2. a lone surrogate in a tool result -----------------------------------------------------


@pytest.mark.parametrize("fails", [False, True], ids=["returned", "raised"])
def test_a_lone_surrogate_in_a_tool_result_is_replaced_and_the_call_answered(
    store: memoryd.StoreHandle, fails: bool
) -> None:
    """The model sends ``{"q": "\\udc80"}`` (valid JSON) and the tool echoes it, or names
    it in its exception: the tool runs once, its result is stored with U+FFFD in place
    of the surrogate and a note saying so, and the stored tool call is answered."""
    ran: list[str] = []

    @memoryd.tool
    def lookup(q: str) -> str:
        """Look up."""
        ran.append(q)
        if fails:
            raise ValueError(f"no such key {q}")
        return f"found {q}"

    model = ScriptedModel([asking("lookup", '{"q": "\\udc80"}'), "done"])
    kernel = remembering(store, model, [lookup])
    result = kernel.invoke([messages.user("hi")], context=memoryd.Context(conversation_id="k2"))
    assert result.text == "done"
    assert ran == ["\udc80"]
    history = store.get("k2")
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    content = history[2]["content"]
    assert content.startswith("Error: tool 'lookup' raised ValueError" if fails else "found")
    assert "\ufffd" in content and "replaced with U+FFFD" in content
    assert model.calls[1][-1]["content"] == content  # the model read what was stored


def test_surrogate_pairs_become_the_character_they_encode(store: memoryd.StoreHandle) -> None:
    """A result holding a surrogate pair beside a lone surrogate: the pair is stored
    as its character, the lone one as U+FFFD."""

    @memoryd.tool
    def emoji() -> str:
        """An emoji, as UTF-16 halves."""
        return "\ud83d\ude00 \udc80"

    kernel = remembering(store, ScriptedModel([asking("emoji"), "done"]), [emoji])
    kernel.invoke([messages.user("hi")], context=memoryd.Context(conversation_id="k3"))
    assert store.get("k3")[2]["content"].startswith("\U0001f600 \ufffd\n[memoryd: 1 lone")


# -- 3 and 6. values that cannot be made text -------------------------------------------------


@memoryd.tool
def tree(levels: int) -> list[Any]:
    """Return a tree."""
    return nest(levels)


@memoryd.tool
def get_row() -> str:
    """Return a row."""
    return Row()  # type: ignore[return-value]


@memoryd.tool
def call_api() -> str:
    """Call an API."""
    raise ApiError()


NOT_TEXT = "that cannot be made text"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            asking("tree", '{"levels": 5000}'),
            f"Error: tool 'tree' returned a list {NOT_TEXT} (RecursionError)",
        ),
        (asking("get_row"), f"Error: tool 'get_row' returned a Row {NOT_TEXT} (RuntimeError)"),
        (
            asking("call_api"),
            "Error: tool 'call_api' raised ApiError: (its message could not be shown: its "
            "__str__ raised KeyError)",
        ),
    ],
    ids=["deep", "unprintable-value", "unprintable-exception"],
)
def test_a_value_that_cannot_be_made_text_is_an_error_result(
    store: memoryd.StoreHandle, reply: Message, expected: str
) -> None:
    """A tool value nested 5,000 levels deep, one whose ``__str__`` raises, or an
    exception whose ``__str__`` raises: an error result the model reads, naming the
    type, stored as the call's answer; the invoke goes on."""
    kernel = remembering(store, ScriptedModel([reply, "done"]), [tree, get_row, call_api])
    result = kernel.invoke([messages.user("hi")], context=memoryd.Context(conversation_id="k4"))
    assert result.text == "done"
    history = store.get("k4")
    assert history[2]["content"].startswith(expected)
    assert answered(history)


def test_a_value_nested_200_levels_is_sent_as_json(store: memoryd.StoreHandle) -> None:
    kernel = remembering(store, ScriptedModel([asking("tree", '{"levels": 200}'), "ok"]), [tree])
    kernel.invoke([messages.user("hi")], context=memoryd.Context(conversation_id="k5"))
    assert json.loads(store.get("k5")[2]["content"]) == nest(200)


# -- 4. a plain tool that returns a coroutine -------------------------------------------------


def test_a_coroutine_a_plain_tool_returns_is_run(store: memoryd.StoreHandle) -> None:
    """A plain ``def`` tool returning a coroutine is run as an async tool is: its work
    is done once, the model reads its value, and no "never awaited" warning is left."""
    done: list[str] = []

    async def _send(to: str) -> str:
        done.append(to)
        return "sent"

    @memoryd.tool
    def send_mail(to: str) -> str:
        """Send mail."""
        return _send(to)  # type: ignore[return-value]

    model = ScriptedModel([asking("send_mail", '{"to": "bob"}'), "done"])
    kernel = remembering(store, model, [send_mail])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel.invoke([messages.user("hi")], context=memoryd.Context(conversation_id="k6"))
        gc.collect()
    assert done == ["bob"]
    assert store.get("k6")[2]["content"] == "sent"
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_a_returned_coroutine_is_closed_where_an_event_loop_runs() -> None:
    """Called from a thread that runs an event loop, `Tool.invoke` refuses a returned
    coroutine as it refuses an async tool, closing it unrun (no warning)."""
    done: list[str] = []

    async def _send() -> str:
        done.append("sent")
        return "sent"

    @memoryd.tool
    def send() -> str:
        """Send."""
        return _send()  # type: ignore[return-value]

    async def on_the_loop() -> None:
        with pytest.raises(RuntimeError, match="this thread runs an event loop"):
            send.invoke({})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(on_the_loop())
        gc.collect()
    assert done == []
    assert not [w for w in caught if "never awaited" in str(w.message)]

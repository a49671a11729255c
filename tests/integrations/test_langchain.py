"""MemorydChatMessageHistory behaves as LangChain documents a BaseChatMessageHistory.

Every test runs against LmdbStore, EphemeralStore and the daemon through RemoteStore.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, cast

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from langchain_core.runnables.history import RunnableWithMessageHistory

from memoryd import messages as msgs
from memoryd.integrations.langchain import (
    LANGCHAIN_KEY,
    MemorydChatMessageHistory,
    from_openai,
    to_openai,
)
from memoryd.store.handle import StoreHandle

TOOL_CALL = {"name": "weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}

MESSAGES: list[BaseMessage] = [
    SystemMessage(content="Be brief."),
    HumanMessage(content="Weather in Paris?"),
    AIMessage(content="", tool_calls=[TOOL_CALL]),
    ToolMessage(content="18C", tool_call_id="call_1"),
    AIMessage(content="It is 18C in Paris."),
    HumanMessage(content=[{"type": "text", "text": "thanks"}]),
]


def test_plain_messages_become_plain_openai_dicts() -> None:
    """Human/AI (with tool_calls)/Tool/System messages map to OpenAI dicts with no extras."""
    assert [to_openai(m) for m in MESSAGES] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is 18C in Paris."},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


def test_rich_messages_round_trip_without_loss() -> None:
    """ids, metadata, usage, invalid tool calls, artifacts and chat roles survive."""
    rich: list[BaseMessage] = [
        AIMessage(
            content="hi",
            id="run-1",
            response_metadata={"model": "fake"},
            usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            tool_calls=[TOOL_CALL],
            invalid_tool_calls=[
                {"name": "f", "args": "{bad", "id": "c2", "error": "x", "type": "invalid_tool_call"}
            ],
        ),
        ToolMessage(content="ok", tool_call_id="c1", artifact={"rows": [1, 2]}, status="error"),
        HumanMessage(content="named", name="alice", additional_kwargs={"k": 1}),
        ChatMessage(role="critic", content="meh"),
        SystemMessage(content="dev", additional_kwargs={"__openai_role__": "developer"}),
    ]
    stored = [msgs.validate(to_openai(m)) for m in rich]
    assert [from_openai(m) for m in stored] == rich
    assert LANGCHAIN_KEY in stored[0] and stored[4]["role"] == "developer"


def test_tool_call_arguments_nested_too_deeply_become_an_invalid_tool_call() -> None:
    """An assistant message from another writer whose tool call arguments nest deeper
    than the JSON decoder can go reads as an invalid tool call, not a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    stored = msgs.assistant(
        None,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}],
    )
    message = from_openai(stored)
    assert isinstance(message, AIMessage) and message.tool_calls == []
    [invalid] = message.invalid_tool_calls
    assert invalid["id"] == "c1" and "nests too deeply" in str(invalid["error"])


def test_one_message_given_for_a_sequence_is_named(store: StoreHandle, cid: str) -> None:
    """``add_messages(HumanMessage(...))`` (or a str) is refused as one message where a
    sequence belongs, where it used to say "got tuple" (the message's fields, iterated);
    nothing is written."""
    history = MemorydChatMessageHistory(store, cid)
    for one in (HumanMessage(content="hi"), "hi"):
        with pytest.raises(TypeError, match=r"not one (HumanMessage|str); wrap it in a list"):
            history.add_messages(cast(Any, one))
        with pytest.raises(TypeError, match="wrap it in a list"):
            asyncio.run(history.aadd_messages(cast(Any, one)))
    assert store.version(cid) == 0


def test_messages_from_memoryds_own_writers_convert() -> None:
    """OpenAI dicts built with memoryd.messages become the matching LangChain messages."""
    stored = [
        msgs.system("s"),
        msgs.user("u"),
        msgs.assistant(None, tool_calls=[msgs.tool_call("call_1", "weather", {"city": "Paris"})]),
        msgs.tool("call_1", "18C"),
    ]
    assert [from_openai(m) for m in stored] == [
        SystemMessage(content="s"),
        HumanMessage(content="u"),
        AIMessage(content="", tool_calls=[TOOL_CALL]),
        ToolMessage(content="18C", tool_call_id="call_1"),
    ]


def test_history_is_a_base_chat_message_history(store: StoreHandle, cid: str) -> None:
    """It is a BaseChatMessageHistory and starts empty."""
    history = MemorydChatMessageHistory(store, cid)
    assert isinstance(history, BaseChatMessageHistory)
    assert history.messages == []


def test_messages_round_trip_in_order(store: StoreHandle, cid: str) -> None:
    """add_messages then messages gives back equal messages, in order, across batches."""
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(MESSAGES[:3])
    history.add_message(MESSAGES[3])
    history.add_messages(MESSAGES[4:])
    assert history.messages == MESSAGES
    assert MemorydChatMessageHistory(store, cid).messages == MESSAGES


def test_each_batch_is_one_event(store: StoreHandle, cid: str) -> None:
    """add_messages writes one store event per call; an empty call writes nothing."""
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(MESSAGES)
    history.add_messages([])
    assert store.version(cid) == 1


def test_clear_empties_the_history(store: StoreHandle, cid: str) -> None:
    """clear removes every message; the history can be used again afterwards."""
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(MESSAGES)
    history.clear()
    assert history.messages == []
    history.add_messages(MESSAGES[:1])
    assert history.messages == MESSAGES[:1]


def test_memoryd_pop_removes_the_last_message(store: StoreHandle, cid: str) -> None:
    """The store's pop takes the newest message off the LangChain history."""
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(MESSAGES[:3])
    popped = store.pop(cid)
    assert popped is not None and from_openai(popped) == MESSAGES[2]
    assert history.messages == MESSAGES[:2]


def test_async_variants_match_the_sync_ones(store: StoreHandle, cid: str) -> None:
    """aadd_messages, aget_messages and aclear do what their sync twins do."""
    history = MemorydChatMessageHistory(store, cid)

    async def main() -> tuple[list[BaseMessage], list[BaseMessage]]:
        await history.aadd_messages(MESSAGES)
        got = await history.aget_messages()
        await history.aclear()
        return got, await history.aget_messages()

    got, after = asyncio.run(main())
    assert got == MESSAGES
    assert after == []


def test_concurrent_adds_from_tasks_are_each_atomic(store: StoreHandle, cid: str) -> None:
    """Pairs added from 10 concurrent tasks all land, each pair contiguous."""
    history = MemorydChatMessageHistory(store, cid)

    def pair(n: int) -> list[BaseMessage]:
        return [HumanMessage(content=f"q{n}"), AIMessage(content=f"a{n}")]

    async def main() -> list[BaseMessage]:
        await asyncio.gather(*(history.aadd_messages(pair(n)) for n in range(10)))
        return await history.aget_messages()

    got = asyncio.run(main())
    pairs = [got[i : i + 2] for i in range(0, len(got), 2)]
    assert len(got) == 20
    assert sorted(pairs, key=lambda p: str(p[0].content)) == sorted(
        (pair(n) for n in range(10)), key=lambda p: str(p[0].content)
    )


def test_async_methods_call_the_store_off_the_loop_thread(store: StoreHandle, cid: str) -> None:
    """aget_messages, aadd_messages and aclear call the store from worker threads."""
    threads: set[int] = set()

    class Spy:
        def __getattr__(self, name: str) -> Any:
            method = getattr(store, name)

            def spied(*args: Any, **kw: Any) -> Any:
                threads.add(threading.get_ident())
                return method(*args, **kw)

            return spied

    history = MemorydChatMessageHistory(cast(StoreHandle, Spy()), cid)

    async def main() -> int:
        await history.aadd_messages(MESSAGES[:1])
        await history.aget_messages()
        await history.aclear()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads and loop_thread not in threads


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_keeps_the_conversation(store: StoreHandle, cid: str) -> None:
    """RunnableWithMessageHistory reads and appends turns through the memoryd history."""
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Hi Alice"), AIMessage("Alice")]))
    seen: list[list[BaseMessage]] = []

    def record(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(list(messages))
        return messages

    from langchain_core.runnables import RunnableLambda

    chain = RunnableWithMessageHistory(
        RunnableLambda(record) | model,
        lambda session_id: MemorydChatMessageHistory(store, session_id),
    )
    config: Any = {"configurable": {"session_id": cid}}
    chain.invoke([HumanMessage(content="I am Alice")], config=config)
    answer = chain.invoke([HumanMessage(content="Who am I?")], config=config)
    assert answer.content == "Alice"
    assert [m.content for m in seen[1]] == ["I am Alice", "Hi Alice", "Who am I?"]
    assert [m["content"] for m in store.get(cid)] == [
        "I am Alice",
        "Hi Alice",
        "Who am I?",
        "Alice",
    ]


def test_invalid_conversation_id_is_refused() -> None:
    """A bad conversation id fails at construction, naming the problem."""
    from memoryd.errors import InvalidConversationId

    with pytest.raises(InvalidConversationId, match="empty"):
        MemorydChatMessageHistory(cast(StoreHandle, object()), "")


_PLAIN_SHAPES = [
    ({"role": "user", "content": "hi"}, HumanMessage(content="hi", name=None)),
    ({"role": "user", "content": "hi", "name": "bob"}, HumanMessage(content="hi", name="bob")),
    ({"role": "system", "content": "be brief"}, SystemMessage(content="be brief", name=None)),
    (
        {"role": "developer", "content": "rules"},
        SystemMessage(
            content="rules", name=None, additional_kwargs={"__openai_role__": "developer"}
        ),
    ),
    (
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ToolMessage(content="42", tool_call_id="c1"),
    ),
    (
        {"role": "assistant", "content": "hello", "name": "a"},
        AIMessage(content="hello", name="a", tool_calls=[], invalid_tool_calls=[]),
    ),
    (
        {"role": "assistant", "content": None},
        AIMessage(content="", name=None, tool_calls=[], invalid_tool_calls=[]),
    ),
]


@pytest.mark.parametrize(("stored", "expected"), _PLAIN_SHAPES)
def test_a_read_builds_the_message_its_constructor_builds(
    stored: dict[str, Any], expected: BaseMessage
) -> None:
    """Plain shapes are built without pydantic's validation, yet equal the message the
    constructor builds from the same arguments field for field (set fields and defaults
    included), and serialise the same."""
    built = from_openai(stored)
    _same_state(built, expected)
    assert to_openai(built) == to_openai(expected)


def test_messages_built_for_a_read_share_no_mutable_field() -> None:
    """Two messages read do not share their dicts and lists: changing one changes nothing else."""
    first = from_openai({"role": "assistant", "content": "a"})
    second = from_openai({"role": "assistant", "content": "b"})
    first.additional_kwargs["x"] = 1
    first.response_metadata["y"] = 2
    assert isinstance(first, AIMessage) and isinstance(second, AIMessage)
    first.tool_calls.append({"name": "f", "args": {}, "id": "1", "type": "tool_call"})
    assert (second.additional_kwargs, second.response_metadata, second.tool_calls) == ({}, {}, [])
    assert from_openai({"role": "assistant", "content": "c"}).additional_kwargs == {}


def _same_state(built: BaseMessage, expected: BaseMessage) -> None:
    """``built`` holds the state the constructor left in ``expected``, field for field."""
    assert type(built) is type(expected)
    assert built == expected
    assert list(built.__dict__.items()) == list(expected.__dict__.items())  # in order
    assert repr(built) == repr(expected)
    assert built.model_fields_set == expected.model_fields_set
    assert built.__pydantic_extra__ == expected.__pydantic_extra__
    assert built.__pydantic_private__ == expected.__pydantic_private__
    assert built.model_dump() == expected.model_dump()
    assert built.model_dump(exclude_unset=True) == expected.model_dump(exclude_unset=True)


def test_a_history_read_builds_what_the_constructors_build(store: StoreHandle, cid: str) -> None:
    """Every plain shape read back through ``messages`` (one store read, plain role-and-text
    messages built straight by their maker) holds exactly the constructor's state."""
    shapes = [(stored, expected) for stored, expected in _PLAIN_SHAPES if stored["content"]]
    store.add(cid, [stored for stored, _ in shapes])
    history = MemorydChatMessageHistory(store, cid)
    built = history.messages
    assert len(built) == len(shapes)
    for message, (_, expected) in zip(built, shapes, strict=True):
        _same_state(message, expected)
    assert asyncio.run(history.aget_messages()) == [expected for _, expected in shapes]


def test_changing_a_message_read_changes_no_other() -> None:
    """Setting a field of one message read marks it set on that message only, and the
    extra fields LangChain allows land on that message only."""
    first, second = (from_openai({"role": "user", "content": text}) for text in ("a", "b"))
    first.id = "m-1"
    first.note = "extra"  # type: ignore[attr-defined]  # extra fields are allowed
    assert first.model_fields_set == {"content", "name", "id", "note"}
    assert second.model_fields_set == {"content", "name"}
    assert second.__pydantic_extra__ == {} and second.id is None
    _same_state(from_openai({"role": "user", "content": "b"}), HumanMessage(content="b", name=None))


def _every_shape() -> list[BaseMessage]:
    """One message of each role and of each extra a LangChain message can carry, built
    by LangChain's validated constructors, between plain user and assistant turns."""
    return [
        SystemMessage(content="Be brief."),
        SystemMessage(content="rules", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage(content="Weather in Paris?"),
        AIMessage(content="Let me look.", name=None, tool_calls=[], invalid_tool_calls=[]),
        AIMessage(content="", tool_calls=[TOOL_CALL]),
        ToolMessage(content="18C", tool_call_id="call_1"),
        AIMessage(content="It is 18C.", tool_calls=[], invalid_tool_calls=[]),
        HumanMessage(content="named", name="alice"),
        AIMessage(content="named too", name="bot", tool_calls=[], invalid_tool_calls=[]),
        HumanMessage(content="with an id", id="m-7"),
        AIMessage(
            content="rich",
            id="run-1",
            additional_kwargs={"refusal": None},
            response_metadata={"model": "fake"},
            usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        ),
        HumanMessage(content=[{"type": "text", "text": "parts"}]),
        ChatMessage(role="critic", content="meh"),
        ToolMessage(content="ok", tool_call_id="c1", artifact={"rows": [1, 2]}, status="error"),
        HumanMessage(content="last user turn"),
        AIMessage(content="last reply", tool_calls=[], invalid_tool_calls=[]),
    ]


def _validated(stored: dict[str, Any]) -> BaseMessage:
    """The message LangChain's validated constructors build from the fields ``stored``
    holds: the reference a read must equal, written out here apart from the adapter."""
    if LANGCHAIN_KEY in stored:
        return messages_from_dict([stored[LANGCHAIN_KEY]])[0]
    role, text, name = stored["role"], stored["content"], stored.get("name")
    if role == "user":
        return HumanMessage(content=text, name=name)
    if role == "system":
        return SystemMessage(content=text, name=name)
    if role == "developer":
        return SystemMessage(
            content=text, name=name, additional_kwargs={"__openai_role__": "developer"}
        )
    if role == "tool":
        return ToolMessage(content=text, tool_call_id=stored["tool_call_id"])
    calls = [
        {
            "name": call["function"]["name"],
            "args": json.loads(call["function"]["arguments"]),
            "id": call["id"],
        }
        for call in stored.get("tool_calls", [])
    ]
    return AIMessage(content=text or "", name=name, tool_calls=calls, invalid_tool_calls=[])


def test_a_mixed_history_reads_back_as_the_constructors_build_it(
    store: StoreHandle, cid: str
) -> None:
    """A history of every role, with tool calls, names, ids, additional_kwargs and
    response_metadata, written by ``add_messages``, reads back equal to what was written
    and, message for message, in the state LangChain's validated constructors leave when
    given the stored fields (set fields, extras and defaults, fields in order)."""
    written = _every_shape()
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(written)
    read = history.messages
    assert read == written
    for built, stored in zip(read, store.get(cid), strict=True):
        _same_state(built, _validated(stored))


def test_the_per_message_maker_loop_builds_what_the_inline_loop_builds() -> None:
    """The loop a history read falls back to (one maker call per message, used when a
    LangChain release builds other fields) builds exactly what the inline loop builds."""
    from memoryd.integrations import _langchain_makers as makers

    stored = [msgs.validate(to_openai(m)) for m in _every_shape()]
    inline = makers._history_inline([dict(m) for m in stored], from_openai)
    by_maker = makers._history_by_maker([dict(m) for m in stored], from_openai)
    assert makers.build_history is makers._history_inline  # this LangChain: the inline loop
    for built, expected in zip(inline, by_maker, strict=True):
        _same_state(built, expected)


class _OwnListStore:
    """A store a user wrote: its ``get`` hands out the list it keeps."""

    def __init__(self) -> None:
        self.kept = [msgs.user("u"), msgs.assistant("a")]

    def get(self, cid: str) -> list[dict[str, Any]]:
        return self.kept


def test_a_read_leaves_a_user_stores_own_list_alone() -> None:
    """A history on a store that is no memoryd handle reads without changing the list
    that store returned (a memoryd handle's list is fresh, and becomes the result)."""
    user_store = _OwnListStore()
    history = MemorydChatMessageHistory(cast(StoreHandle, user_store), "c")
    assert history.messages == [HumanMessage(content="u"), AIMessage(content="a")]
    assert user_store.kept == [msgs.user("u"), msgs.assistant("a")]
    assert asyncio.run(history.aget_messages()) == [
        HumanMessage(content="u"),
        AIMessage(content="a"),
    ]
    assert user_store.kept == [msgs.user("u"), msgs.assistant("a")]

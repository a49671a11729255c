"""Each message of a run is checked once on its way from `Agent.run` to the store.

The one function that checks a message, `memoryd._message_batch.check_message` (behind
`messages.validate`, `messages.check` and the builders), is wrapped with a counter; a
run goes through a real `LmdbStore` with its run journal, and the stored history shows
the messages arrived.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import _message_batch, messages
from memoryd.llm import ScriptedModel


@pytest.fixture
def store(tmp_path: Path) -> Iterator[memoryd.StoreHandle]:
    handle = memoryd.LmdbStore.start(tmp_path / "data", name=f"once-{uuid.uuid4().hex[:8]}")
    yield handle
    handle.stop()


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Counter[Any]:
    """How often each message content went through the one checking function."""
    seen: Counter[Any] = Counter()
    real = _message_batch.check_message

    def counting(message: Any, max_bytes: int | None) -> tuple[dict[str, Any], int]:
        content = message.get("content") if isinstance(message, dict) else None
        seen[content if isinstance(content, str) else repr(content)] += 1
        return real(message, max_bytes)

    monkeypatch.setattr(_message_batch, "check_message", counting)
    return seen


@memoryd.tool
def shout(text: str) -> str:
    """Say the text louder."""
    return text.upper()


def test_a_user_message_and_a_reply_are_each_checked_once(
    store: memoryd.StoreHandle, checks: Counter[Any]
) -> None:
    """One run: the input and the LLM's reply each pass the check exactly once."""
    model = ScriptedModel(["the reply"])
    agent = memoryd.Agent(llm=model, memory=store)
    checks.clear()  # the script was checked when the model was built

    result = agent.run("the question", conversation_id="c")
    counted = Counter(checks)  # before the builders below add their own checks

    assert result.text == "the reply"
    assert store.get("c") == [messages.user("the question"), messages.assistant("the reply")]
    assert agent.pending_runs("c") == []
    assert counted == Counter({"the question": 1, "the reply": 1})


def test_a_tool_round_checks_each_message_once(
    store: memoryd.StoreHandle, checks: Counter[Any]
) -> None:
    """Input, tool call, tool result and answer: one check each, journal included (only
    its header is checked there)."""
    call = messages.assistant(tool_calls=[messages.tool_call("c1", "shout", {"text": "hey"})])
    model = ScriptedModel([call, "done"])
    agent = memoryd.Agent(llm=model, memory=store, tools=[shout])
    checks.clear()

    agent.run("go", conversation_id="c")
    counted = Counter(checks)

    stored = store.get("c")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "HEY"
    assert counted == Counter({"go": 1, "None": 1, "HEY": 1, "done": 1, "run journal": 1})


def test_a_reply_changed_by_a_filter_is_checked_again(
    store: memoryd.StoreHandle, checks: Counter[Any]
) -> None:
    """A filter may rewrite the reply, so what it returns is checked before it is stored."""

    class Rewrite(memoryd.Filter):
        def around_chat(self, request: Any, next: Any) -> dict[str, Any]:
            reply = next(request)
            return {**reply, "content": "rewritten", "note": {"set"}}  # not JSON

    agent = memoryd.Agent(llm=ScriptedModel(["the reply"]), memory=store, filters=[Rewrite()])
    with pytest.raises(memoryd.InvalidMessage, match=r"message\.note is of type set"):
        agent.run("hi", conversation_id="c")
    assert store.get("c") == []
    assert checks["rewritten"] == 1


def test_a_caller_changing_its_list_after_add_changes_nothing_stored(
    store: memoryd.StoreHandle, checks: Counter[Any]
) -> None:
    """A plain list is fully checked and copied; a CheckedMessages is taken as it is."""
    batch = [messages.user("mine")]
    checks.clear()
    store.add("c", batch)
    assert checks == Counter({"mine": 1})
    batch[0]["content"] = "changed"
    assert store.get("c") == [{"role": "user", "content": "mine"}]

    checked = messages.check([messages.user("checked")])
    checks.clear()
    store.add("c", checked)
    assert checks == Counter()
    assert store.get("c")[-1] == {"role": "user", "content": "checked"}


def test_a_filter_changing_the_sent_turn_in_place_changes_nothing_stored(
    store: memoryd.StoreHandle,
) -> None:
    """The committed turn is not checked again, so filters only ever see copies of it."""

    class Scribble(memoryd.Filter):
        def around_chat(self, request: Any, next: Any) -> dict[str, Any]:
            for message in request.messages:
                message["content"] = {"not": {"a", "str"}}
            return next(request)

    agent = memoryd.Agent(llm=ScriptedModel(["fine"]), memory=store, filters=[Scribble()])
    agent.run("kept", conversation_id="c")
    assert store.get("c") == [
        {"role": "user", "content": "kept"},
        {"role": "assistant", "content": "fine"},
    ]

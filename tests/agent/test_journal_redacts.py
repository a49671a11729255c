"""A run's journal is bound by what its provider lets be stored: a secret that
``store_preprocessors=[redact(...)]`` keeps out of the conversation never reaches the
journal either, on disk or in what `pending_runs` shows, and a resumed run goes on
from the redacted record without running a recorded tool again."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd import preprocessors as pre
from memoryd.llm import ScriptedModel
from memoryd.provider.preprocessors import LEFT_OUT, run_keeping_shape

SECRET = "SECRET-4242"


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so the agent records nothing."""


def _tools(calls: list[str], *, crash_on: str | None = None) -> list[memoryd.Tool]:
    @memoryd.tool
    def card(owner: str) -> str:
        """The owner's card number."""
        calls.append(f"card:{owner}")
        return f"card number {SECRET}"

    @memoryd.tool
    def pay(number: str) -> str:
        """Pay with a card."""
        calls.append(f"pay:{number}")
        if crash_on == "pay":
            raise Crash
        return "paid"

    return [card, pay]


def _turns() -> list[Any]:
    return [
        messages.assistant(tool_calls=[messages.tool_call("c1", "card", {"owner": "ann"})]),
        messages.assistant(tool_calls=[messages.tool_call("c2", "pay", {"number": SECRET})]),
    ]


def _provider(store: memoryd.StoreHandle) -> memoryd.DefaultProvider:
    return memoryd.DefaultProvider(store, store_preprocessors=[pre.redact(r"SECRET-\d+")])


def _on_disk(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.iterdir() if p.is_file())


def test_a_finished_run_leaves_no_secret_on_disk(tmp_path: Path) -> None:
    """The run's two tool steps were journaled (a durable write each) and its turn
    committed: the data file holds the redacted turn and no byte of the secret, which
    the user's input, a tool result and a tool call's arguments all carried."""
    store = memoryd.LmdbStore.start(str(tmp_path), name=f"redact-{uuid.uuid4().hex[:8]}")
    try:
        before = store.stats()["fsyncs"]
        calls: list[str] = []
        agent = memoryd.Agent(
            llm=ScriptedModel([*_turns(), "done"]), memory=_provider(store), tools=_tools(calls)
        )
        result = agent.run(f"pay with my card {SECRET}", conversation_id="shop")
        assert calls == ["card:ann", f"pay:{SECRET}"]  # the live run saw the real values
        assert SECRET in str(result.messages)
        assert store.stats()["fsyncs"] - before >= 3  # two journaled steps and the turn
        stored = store.get("shop")
        assert "[REDACTED]" in str(stored) and SECRET not in str(stored)
    finally:
        store.stop()
    assert SECRET.encode() not in _on_disk(tmp_path)


def test_a_pending_run_shows_the_redacted_steps_and_resumes_from_them() -> None:
    """A run dies in its second tool: its pending record holds the redacted input and
    first step; the resumed run shows the model the redacted record, does not run the
    recorded tool again, and commits a redacted turn."""
    store = memoryd.EphemeralStore.start(name=f"redact-{uuid.uuid4().hex[:8]}")
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel(_turns()), memory=_provider(store), tools=_tools(calls, crash_on="pay")
    )
    with pytest.raises(Crash):
        agent.run(f"pay with my card {SECRET}", conversation_id="shop")
    [pending] = agent.pending_runs("shop")
    assert [m["role"] for m in pending.messages] == ["user", "assistant", "tool"]
    assert SECRET not in str(pending.messages)
    assert pending.messages[0]["content"] == "pay with my card [REDACTED]"
    assert pending.messages[2]["content"] == "card number [REDACTED]"

    again_calls: list[str] = []
    model = ScriptedModel([_turns()[1], "done"])
    again = memoryd.Agent(llm=model, memory=_provider(store), tools=_tools(again_calls))
    result = again.resume(pending.run_id)
    assert again_calls == [f"pay:{SECRET}"]  # the card was not looked up again
    assert SECRET not in str(model.calls[0])
    assert result.text == "done"
    assert SECRET not in str(store.get("shop"))


def test_preprocessors_that_reshape_a_step_leave_its_content_out() -> None:
    """A store preprocessor that drops messages cannot say what to keep of each: every
    message keeps its role and tool ids, and nothing of its content or arguments."""
    step = [
        messages.assistant(tool_calls=[messages.tool_call("c1", "card", {"owner": "ann"})]),
        {"role": "tool", "tool_call_id": "c1", "content": f"card number {SECRET}"},
    ]
    no_tools = pre.filter_messages(lambda m: m["role"] != "tool")
    kept = run_keeping_shape([no_tools], step)
    assert [m["role"] for m in kept] == ["assistant", "tool"]
    assert kept[1] == {"role": "tool", "tool_call_id": "c1", "content": LEFT_OUT}
    assert kept[0]["tool_calls"][0]["id"] == "c1"
    assert kept[0]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert SECRET not in str(kept)
    # a content rewrite keeps the shape: its messages are the answer; the input is unchanged
    redacted = run_keeping_shape([pre.redact(r"SECRET-\d+")], step)
    assert redacted[1]["content"] == "card number [REDACTED]"
    assert step[1]["content"] == f"card number {SECRET}"
    assert run_keeping_shape([], step) == step

"""The run journal: pending runs after a crash, and resume without re-running recorded tools."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agent.journal import index_id, journal_id
from memoryd.llm import ScriptedModel
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so the agent records nothing."""


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"resume-{uuid.uuid4().hex[:8]}")


def counting_tools(calls: list[str], *, crash_on: str | None = None) -> list[memoryd.Tool]:
    @memoryd.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        calls.append(f"lookup:{key}")
        return f"value-of-{key}"

    @memoryd.tool
    def slow(key: str) -> str:
        """Take a while."""
        calls.append(f"slow:{key}")
        if crash_on == "slow":
            raise Crash
        return f"slow-{key}"

    return [lookup, slow]


def tool_turns() -> list[Any]:
    return [
        messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"key": "k1"})]),
        messages.assistant(tool_calls=[messages.tool_call("c2", "slow", {"key": "k2"})]),
    ]


def test_crashed_run_is_pending_and_resume_skips_recorded_tools(
    store: memoryd.StoreHandle,
) -> None:
    """A run that dies in its second tool call is pending; resume runs only that tool."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools(calls, crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("do it", conversation_id="job")
    assert store.get("job") == []
    [pending] = agent.pending_runs("job")
    assert [m["role"] for m in pending.messages] == ["user", "assistant", "tool", "assistant"]

    resumed_calls: list[str] = []
    model = ScriptedModel(["all done"])
    again = memoryd.Agent(llm=model, memory=store, tools=counting_tools(resumed_calls))
    result = again.resume(pending.run_id)
    assert resumed_calls == ["slow:k2"]
    assert result.text == "all done"
    assert [m["role"] for m in model.calls[0]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert store.get("job") == list(result.messages)
    assert again.pending_runs("job") == []
    assert again.resume(pending.run_id).version == result.version  # committed: no rerun
    assert store.events("job")[-1].idempotency_key == pending.run_id


def test_journal_stays_out_of_listings_and_histories(store: memoryd.StoreHandle) -> None:
    """Journal conversations hold only memo events: conversations() lists the chat alone."""
    agent = memoryd.Agent(llm=ScriptedModel(["ok"]), memory=store)
    result = agent.run("hi", conversation_id="chat")
    assert store.conversations() == ["chat"]
    assert store.get(journal_id(result.run_id)) == []
    assert {e.kind for e in store.events(journal_id(result.run_id))} == {"memo"}
    assert len(index_id("x" * 256).encode()) <= 256


def test_resume_errors_are_named(store: memoryd.StoreHandle) -> None:
    """Unknown run ids, empty ids and agents without a journal are refused clearly."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    with pytest.raises(memoryd.UnknownRun, match="no run 'nope'"):
        agent.resume("nope")
    with pytest.raises(ValueError, match="non-empty str"):
        agent.resume("")
    with pytest.raises(ValueError, match="needs a run journal"):
        memoryd.Agent(llm=ScriptedModel([]), memory=False).pending_runs("x")


def test_run_killed_with_sigkill_in_a_tool_loop_is_resumed(tmp_path: Path) -> None:
    """SIGKILL during the second tool call: history unchanged, resume skips the first tool."""
    data, markers = tmp_path / "data", tmp_path / "markers"
    markers.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.agent._crash_child", str(data), str(markers)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: (markers / "slow.started").exists() or child.poll() is not None, timeout=30
        )
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert (markers / "lookup.calls").read_text() == "k1\n"

    store = memoryd.LmdbStore.start(data, name="crash-parent")
    assert [m["content"] for m in store.get("job")] == ["hi", "hello"]
    calls: list[str] = []
    model = ScriptedModel(["finished"])
    agent = memoryd.Agent(llm=model, memory=store, tools=counting_tools(calls))
    [pending] = agent.pending_runs("job")
    result = agent.resume(pending.run_id)
    assert calls == ["slow:k2"]
    assert (markers / "lookup.calls").read_text() == "k1\n"
    assert model.calls[0][:2] == [messages.user("hi"), messages.assistant("hello")]
    assert [m["role"] for m in store.get("job")] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert store.get("job")[4] == messages.tool("c1", "value-of-k1")
    assert store.get("job")[2:] == list(result.messages)
    assert agent.pending_runs("job") == []

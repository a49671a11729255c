"""The run journal: pending runs after a crash, and resume without re-running recorded tools."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agent.journal import MAX_RUN_ID_BYTES, journal_id
from memoryd.llm import ScriptedModel
from tests.helpers import kill9_when

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
    """A run that dies in its second tool call is pending with its first step; resume
    asks the model again and runs only the tool whose result was not recorded."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools(calls, crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("do it", conversation_id="job")
    assert store.get("job") == []
    [pending] = agent.pending_runs("job")
    assert [m["role"] for m in pending.messages] == ["user", "assistant", "tool"]
    assert pending.orphaned  # this process's run, not running here

    resumed_calls: list[str] = []
    model = ScriptedModel([tool_turns()[1], "all done"])
    again = memoryd.Agent(llm=model, memory=store, tools=counting_tools(resumed_calls))
    result = again.resume(pending.run_id)
    assert resumed_calls == ["slow:k2"]
    assert result.text == "all done"
    assert [m["role"] for m in model.calls[1]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert store.get("job") == list(result.messages)
    assert again.pending_runs("job") == []
    with pytest.raises(memoryd.UnknownRun):  # finished: nothing left to resume
        again.resume(pending.run_id)
    assert store.events("job")[-1].idempotency_key == pending.run_id


def test_a_finished_run_leaves_nothing_listed(store: memoryd.StoreHandle) -> None:
    """After a tool run commits: no journal in conversations, tail or pending runs."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel([*tool_turns(), "done"]), memory=store, tools=counting_tools(calls)
    )
    result = agent.run("hi", conversation_id="chat")
    assert store.conversations(include_empty=True) == ["chat"]
    assert {c.conversation_id for c in store.tail()} == {"chat"}
    assert store.get(journal_id(result.run_id)) == []
    assert store.conversations(prefix="memoryd.run/") == []
    assert agent.pending_runs() == []


def test_a_failed_run_is_not_left_pending(store: memoryd.StoreHandle) -> None:
    """A run whose tool step was journaled and which then fails leaves no pending run."""
    agent = memoryd.Agent(
        llm=ScriptedModel([tool_turns()[0]]), memory=store, tools=counting_tools([]), max_steps=1
    )
    with pytest.raises(memoryd.StepLimitExceeded):
        agent.run("hi", conversation_id="chat")
    assert agent.pending_runs() == []
    assert store.conversations(include_empty=True) == []


def test_pending_runs_are_store_wide_and_discard_drops_one(store: memoryd.StoreHandle) -> None:
    """Crashed runs on two conversations are both listed; discard removes one."""
    for cid in ("a", "b"):
        agent = memoryd.Agent(
            llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools([], crash_on="slow")
        )
        with pytest.raises(Crash):
            agent.run("go", conversation_id=cid)
    pending = agent.pending_runs()
    assert sorted(p.conversation_id for p in pending) == ["a", "b"]
    assert [p.conversation_id for p in agent.pending_runs("b")] == ["b"]
    agent.discard(pending[0].run_id)
    assert [p.run_id for p in agent.pending_runs()] == [pending[1].run_id]
    with pytest.raises(memoryd.UnknownRun):
        agent.resume(pending[0].run_id)


def test_a_run_with_a_live_lease_elsewhere_is_not_orphaned(store: memoryd.StoreHandle) -> None:
    """A pending run whose owner is another live process (a fresh lease) is not orphaned;
    once its lease runs out it is."""
    from memoryd.agent.journal import RunJournal

    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools([], crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("go", conversation_id="a")
    [mine] = RunJournal(store).pending()
    store.record(journal_id(mine.run_id), "memo", data={"owner": "elsewhere/1/x", "lease_s": 30.0})
    [theirs] = RunJournal(store).pending()
    assert theirs.owner == "elsewhere/1/x"
    assert not theirs.orphaned(now=theirs.heartbeat + 29.0)
    assert theirs.orphaned(now=theirs.heartbeat + 31.0)
    assert [p.orphaned for p in agent.pending_runs()] == [False]
    for act in (agent.resume, agent.discard):  # a live process's run is not taken from it
        with pytest.raises(ValueError, match="held by the live process 'elsewhere/1/x'"):
            act(mine.run_id)
    assert [p.run_id for p in agent.pending_runs()] == [mine.run_id]
    later = RunJournal(store, clock=lambda: theirs.heartbeat + 31.0)
    later.discard_orphan(later.orphan(mine.run_id))  # its lease ran out: orphaned, dropped
    assert agent.pending_runs() == []


def test_two_claims_of_one_run_let_one_win(store: memoryd.StoreHandle) -> None:
    """Claiming is compare-and-set: of two resumers that read the same record, one wins."""
    from memoryd.agent.journal import RunJournal

    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools([], crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("go", conversation_id="a")
    first, second = RunJournal(store), RunJournal(store)
    [record] = first.pending()
    first.claim(record)
    with pytest.raises(memoryd.ConflictError):
        second.claim(record)


def test_a_discard_keeps_a_run_another_process_claimed_after_it_was_read(
    store: memoryd.StoreHandle,
) -> None:
    """The discard claims before it clears: a takeover between reading the run and
    dropping it wins (ConflictError), and the run stays pending for its new owner."""
    from memoryd.agent.journal import RunJournal

    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools([], crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("go", conversation_id="a")
    dropping, taking = RunJournal(store), RunJournal(store)
    record = dropping.orphan(agent.pending_runs()[0].run_id)
    taking.claim(taking.load(record.run_id))  # another process takes it over meanwhile
    with pytest.raises(memoryd.ConflictError):
        dropping.discard_orphan(record)
    assert [p.run_id for p in agent.pending_runs()] == [record.run_id]


def test_resume_errors_are_named(store: memoryd.StoreHandle) -> None:
    """Unknown run ids, empty ids and agents without a journal are refused clearly."""
    agent = memoryd.Agent(llm=ScriptedModel([]), memory=store)
    with pytest.raises(memoryd.UnknownRun, match="no unfinished run 'nope'"):
        agent.resume("nope")
    with pytest.raises(ValueError, match="non-empty str"):
        agent.resume("")
    with pytest.raises(memoryd.UnknownRun, match="no unfinished run 'nope'"):
        memoryd.Agent(llm=ScriptedModel([]), memory=store).discard("nope")
    for bad, why in (("r" * 300, "300 characters"), ("r\x00", "control character")):
        with pytest.raises(memoryd.UnknownRun, match=f"can be recorded.*{why}|{why}.*recorded"):
            agent.resume(bad)
    with pytest.raises(ValueError, match="needs a run journal"):
        memoryd.Agent(llm=ScriptedModel([]), memory=False).pending_runs("x")


@pytest.mark.parametrize(
    ("run_id", "why"),
    [
        ("r" * (MAX_RUN_ID_BYTES + 1), r"\(245 characters\).*is 257 bytes"),
        ("é" * 123, r"\(123 characters\).*is 258 bytes"),
        ("a\nb", "control character U\\+000A"),
        ("a\ud800", "lone surrogate"),
    ],
)
def test_a_run_id_that_names_no_journal_is_refused_before_any_tool_runs(
    store: memoryd.StoreHandle, run_id: str, why: str
) -> None:
    """A run id too long for its journal's id, or holding a control character or a lone
    surrogate, is refused before the run starts (ValueError naming the id and the
    limit), where it used to fail after its first tool had run; the longest id works."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel([*tool_turns(), "done"] * 2), memory=store, tools=counting_tools(calls)
    )
    with pytest.raises(ValueError, match=why) as refused:
        agent.run("go", conversation_id="job", run_id=run_id)
    assert "cannot name its journal" in str(refused.value)
    assert "a run id is at most 244 UTF-8 bytes" in str(refused.value)
    assert calls == []
    assert store.conversations(include_empty=True) == []
    longest = "r" * MAX_RUN_ID_BYTES
    assert agent.run("go", conversation_id="job", run_id=longest).text == "done"
    assert calls == ["lookup:k1", "slow:k2"]


def test_run_killed_with_sigkill_in_a_tool_loop_is_resumed(tmp_path: Path) -> None:
    """SIGKILL during the second tool call: history unchanged, resume skips the first tool."""
    data, markers = tmp_path / "data", tmp_path / "markers"
    markers.mkdir()
    kill9_when(
        "tests.agent._crash_child",
        str(data),
        str(markers),
        ready=(markers / "slow.started").exists,
    )
    assert (markers / "lookup.calls").read_text() == "k1\n"

    store = memoryd.LmdbStore.start(data, name="crash-parent")
    assert [m["content"] for m in store.get("job")] == ["hi", "hello"]
    calls: list[str] = []
    model = ScriptedModel(
        [
            messages.assistant(tool_calls=[messages.tool_call("c2", "slow", {"key": "k2"})]),
            "finished",
        ]
    )
    agent = memoryd.Agent(llm=model, memory=store, tools=counting_tools(calls))
    [pending] = agent.pending_runs("job")
    assert pending.orphaned
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


def test_a_long_llm_call_renews_the_lease_before_the_next_tool(
    store: memoryd.StoreHandle,
) -> None:
    """Half a lease after its last journal write (here: a slow LLM call), a run writes a
    renewal (a ``memo`` naming its owner) at the next tool boundary, and its next step
    still writes on top of it (the renewal moved the compare-and-set base)."""
    from memoryd.agent.journal import OWNER, RunJournal

    now = [1000.0]
    seen: list[list[tuple[str, Any]]] = []
    scripted = ScriptedModel(
        [messages.assistant(tool_calls=[messages.tool_call(f"c{n}", "peek", {})]) for n in range(3)]
        + ["done"]
    )

    class SlowSecondCall:
        """Takes 6 s of a 10 s lease on its second call."""

        calls = 0

        def complete(self, sent: list[dict[str, Any]], *, tools: Any = None) -> dict[str, Any]:
            self.calls += 1
            if self.calls == 2:
                now[0] += 6.0
            return scripted.complete(sent, tools=tools)

    @memoryd.tool
    def peek() -> str:
        """Look at the run's journal."""
        events = store.events(journal_id("long"))
        seen.append([(e.kind, (e.data or {}).get("owner")) for e in events])
        return "ok"

    agent = memoryd.Agent(llm=SlowSecondCall(), memory=store, tools=[peek])
    agent._journal = RunJournal(store, lease_s=10.0, clock=lambda: now[0])
    result = agent.run("go", conversation_id="job", run_id="long")
    step, renewal = ("appended", None), ("memo", OWNER)
    assert seen == [[], [step, renewal], [step, renewal, step]]
    assert result.text == "done"
    assert agent.pending_runs() == []


def test_short_steps_write_no_renewal(store: memoryd.StoreHandle) -> None:
    """Steps closer together than half a lease renew nothing: each step's write is the
    run's heartbeat, so a run's journal holds only its steps."""
    seen: list[list[str]] = []

    @memoryd.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        seen.append([e.kind for e in store.events(journal_id("short"))])
        return key

    script = [
        messages.assistant(tool_calls=[messages.tool_call(f"c{n}", "lookup", {"key": "k"})])
        for n in range(3)
    ]
    agent = memoryd.Agent(llm=ScriptedModel([*script, "done"]), memory=store, tools=[lookup])
    agent.run("go", conversation_id="job", run_id="short")
    assert seen == [[], ["appended"], ["appended", "appended"]]


def test_a_run_id_given_again_while_its_run_is_pending_is_refused(
    store: memoryd.StoreHandle,
) -> None:
    """A run id whose journal holds a pending run cannot start a second run: the first
    journal write is refused with a clear error and the pending run is left as it was;
    once that run is discarded, the id runs again from its input."""
    calls: list[str] = []
    agent = memoryd.Agent(
        llm=ScriptedModel(tool_turns()), memory=store, tools=counting_tools(calls, crash_on="slow")
    )
    with pytest.raises(Crash):
        agent.run("do it", conversation_id="job", run_id="r-1")
    [pending] = agent.pending_runs("job")
    # the refused run makes its next LLM call while its first journal write is refused
    again = memoryd.Agent(
        llm=ScriptedModel([tool_turns()[0], "refused", "done"]),
        memory=store,
        tools=counting_tools(calls),
    )
    with pytest.raises(memoryd.ConflictError, match="'r-1' is already pending"):
        again.run("do it", conversation_id="job", run_id="r-1")
    assert again.pending_runs("job") == [pending]
    again.discard("r-1")
    result = again.run("do it", conversation_id="job", run_id="r-1")
    assert result.text == "done"
    # the refused run's first tool ran before its first journal write was refused
    assert calls == ["lookup:k1", "slow:k2", "lookup:k1"]

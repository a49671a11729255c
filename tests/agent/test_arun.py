"""`Agent.arun`: the run as a coroutine, on every backend, beside threads' runs."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.errors import InvalidConversationId, InvalidMessage, LLMError
from memoryd.llm import ScriptedModel
from tests.agent import _arun_crash_child as crash_child
from tests.helpers import BACKENDS, Overlap, backend_store, kill9_when

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> memoryd.StoreHandle:
    """A durable store of each backend: LMDB, Redis, and the daemon (`RemoteStore`)."""
    return backend_store(request, tmp_path, "arun")


@pytest.fixture
def lmdb(tmp_path: Path) -> memoryd.StoreHandle:
    return memoryd.LmdbStore.start(tmp_path / "data", name=f"arun-{uuid.uuid4().hex[:8]}")


def steps_then(text: str, *keys: str, tool: str = "note") -> list[Any]:
    """A script: one tool step per key, then ``text``."""
    calls = [
        messages.assistant(tool_calls=[messages.tool_call(f"c{i}", tool, {"key": key})])
        for i, key in enumerate(keys)
    ]
    return [*calls, text]


class Notes:
    """Tools that record each call: ``note`` (async) and ``plain`` (a function)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.threads: dict[str, int] = {}

        @memoryd.tool
        async def note(key: str) -> str:
            """Note a key.

            Args:
                key: The key.
            """
            self.calls.append(key)
            self.threads["note"] = threading.get_ident()
            await asyncio.sleep(0)
            return f"noted {key}"

        @memoryd.tool
        def plain(key: str) -> str:
            """Note a key, from a function.

            Args:
                key: The key.
            """
            self.calls.append(key)
            self.threads["plain"] = threading.get_ident()
            return f"plain {key}"

        self.tools = [note, plain]


def test_arun_commits_the_turn_a_threads_run_commits(store: memoryd.StoreHandle) -> None:
    """The same script run by `run` and by `arun`: the same turn stored, one commit each,
    and no journal left behind."""
    notes = Notes()
    script = steps_then("done", "a", "b")

    def agent() -> memoryd.Agent:
        return memoryd.Agent(llm=ScriptedModel(script), memory=store, tools=notes.tools)

    by_thread = agent().run("go", "threads")
    by_loop = asyncio.run(agent().arun("go", "loop"))
    assert store.get("loop") == store.get("threads") == list(by_loop.messages)
    assert by_loop.version == by_thread.version == 1
    assert by_loop.conversation_id == "loop" and by_loop.text == "done"
    assert notes.calls == ["a", "b", "a", "b"]
    assert sorted(store.conversations(include_empty=True)) == ["loop", "threads"]
    assert agent().pending_runs() == []


def test_a_turn_with_k_tool_steps_costs_k_plus_one_fsyncs(lmdb: memoryd.StoreHandle) -> None:
    """The journal's cost on a loop is a thread's: one write per tool step, and the commit."""
    notes = Notes()
    agent = memoryd.Agent(
        llm=ScriptedModel(steps_then("done", "a", "b", "c")), memory=lmdb, tools=notes.tools
    )
    before = int(lmdb.stats()["fsyncs"])
    asyncio.run(agent.arun("go", "c"))
    assert int(lmdb.stats()["fsyncs"]) - before == 3 + 1


def test_runs_on_one_loop_share_their_commits(lmdb: memoryd.StoreHandle) -> None:
    """Eight runs of three tool steps on one loop: every tool ran once, every turn is
    stored, and their journal writes shared fsyncs (fewer than eight runs' 4 each)."""
    notes = Notes()

    async def main() -> list[memoryd.RunResult]:
        runs = []
        for w in range(8):
            keys = [f"{w}.{n}" for n in range(3)]
            model = ScriptedModel(steps_then(f"done {w}", *keys))
            agent = memoryd.Agent(llm=model, memory=lmdb, tools=notes.tools)
            runs.append(agent.arun("go", f"w{w}"))
        return await asyncio.gather(*runs)

    before = int(lmdb.stats()["fsyncs"])
    results = asyncio.run(main())
    fsyncs = int(lmdb.stats()["fsyncs"]) - before
    assert sorted(notes.calls) == sorted(f"{w}.{n}" for w in range(8) for n in range(3))
    assert [r.text for r in results] == [f"done {w}" for w in range(8)]
    assert all(len(lmdb.get(f"w{w}")) == 8 for w in range(8))
    assert fsyncs < 8 * 4, fsyncs


def test_async_tools_run_on_the_loop_and_functions_in_worker_threads(
    lmdb: memoryd.StoreHandle,
) -> None:
    """A function tool may block: it runs off the loop; an async one runs on it."""
    notes = Notes()
    script = [
        messages.assistant(tool_calls=[messages.tool_call("c0", "note", {"key": "a"})]),
        messages.assistant(tool_calls=[messages.tool_call("c1", "plain", {"key": "b"})]),
        "done",
    ]
    agent = memoryd.Agent(llm=ScriptedModel(script), memory=lmdb, tools=notes.tools)

    async def main() -> tuple[memoryd.RunResult, int]:
        return await agent.arun("go", "c"), threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert notes.threads["note"] == loop_thread
    assert notes.threads["plain"] != loop_thread
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == [
        "noted a",
        "plain b",
    ]


def test_the_loop_runs_while_a_run_waits_for_a_blocking_model_and_tool(
    lmdb: memoryd.StoreHandle,
) -> None:
    """A model with only ``complete`` and a function tool both sleep; the loop keeps
    ticking through them (a run blocking it would leave the ticker at a tick or two)."""

    class SlowModel:
        def __init__(self) -> None:
            self.script = ScriptedModel(steps_then("done", "a", tool="wait"))

        def complete(self, sent: list[dict[str, Any]], *, tools: Any = None) -> dict[str, Any]:
            time.sleep(0.15)
            return self.script.complete(sent, tools=tools)

    @memoryd.tool
    def wait(key: str) -> str:
        """Wait a while.

        Args:
            key: The key.
        """
        time.sleep(0.15)
        return key

    agent = memoryd.Agent(llm=SlowModel(), memory=lmdb, tools=[wait])

    async def main() -> int:
        ticks = 0
        running = asyncio.ensure_future(agent.arun("go", "c"))
        while not running.done():
            ticks += 1
            await asyncio.sleep(0.01)
        await running
        return ticks

    assert asyncio.run(main()) >= 10  # 0.45 s of waiting, a tick every 10 ms


def test_an_async_tool_in_a_threads_run_is_run_to_completion(lmdb: memoryd.StoreHandle) -> None:
    """`run` in a thread without a loop runs an async tool in a loop of its own (its
    result, not a coroutine object, reaches the model and the store)."""
    notes = Notes()
    agent = memoryd.Agent(
        llm=ScriptedModel(steps_then("done", "a")), memory=lmdb, tools=notes.tools
    )
    result = agent.run("go", "c")
    assert result.messages[2] == messages.tool("c0", "noted a")
    assert notes.calls == ["a"]


def test_an_async_tool_called_by_run_inside_a_loop_is_an_error_result(
    lmdb: memoryd.StoreHandle,
) -> None:
    """`run` (blocking) called from a loop's thread cannot run an async tool: the model
    reads why, and the turn still commits."""
    notes = Notes()
    agent = memoryd.Agent(
        llm=ScriptedModel(steps_then("done", "a")), memory=lmdb, tools=notes.tools
    )

    async def main() -> memoryd.RunResult:
        return agent.run("go", "c")

    result = asyncio.run(main())
    assert "await it (Agent.arun)" in result.messages[2]["content"]
    assert notes.calls == []


def test_a_cancelled_run_stays_pending_and_resume_skips_its_recorded_tools(
    lmdb: memoryd.StoreHandle,
) -> None:
    """Cancelled in its second tool: nothing is committed, the run is pending (orphaned:
    not running here), its conversation is free again, and `resume` finishes it
    without calling the first tool again."""
    calls: list[str] = []
    started = asyncio.Event()

    @memoryd.tool
    async def first(key: str) -> str:
        """First.

        Args:
            key: The key.
        """
        calls.append(f"first:{key}")
        return key

    @memoryd.tool
    async def hang(key: str) -> str:
        """Hang until cancelled.

        Args:
            key: The key.
        """
        calls.append(f"hang:{key}")
        started.set()
        await asyncio.Event().wait()
        return key

    script = [
        messages.assistant(tool_calls=[messages.tool_call("c0", "first", {"key": "a"})]),
        messages.assistant(tool_calls=[messages.tool_call("c1", "hang", {"key": "b"})]),
    ]
    agent = memoryd.Agent(llm=ScriptedModel(script), memory=lmdb, tools=[first, hang])

    async def main() -> None:
        running = asyncio.ensure_future(agent.arun("go", "job"))
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert lmdb.get("job") == []
    [pending] = agent.pending_runs()
    assert pending.orphaned and pending.conversation_id == "job"
    assert [m["role"] for m in pending.messages] == ["user", "assistant", "tool"]

    @memoryd.tool
    async def hang_no_more(key: str) -> str:  # the resumed run's second tool
        """Answer at once.

        Args:
            key: The key.
        """
        calls.append(f"again:{key}")
        return key

    resumer = memoryd.Agent(
        llm=ScriptedModel([script[1], "finished"]),
        memory=lmdb,
        tools=[first, memoryd.tool(hang_no_more.function, name="hang")],
    )
    result = resumer.resume(pending.run_id)
    assert result.text == "finished"
    assert calls == ["first:a", "hang:b", "again:b"]
    assert [m["role"] for m in lmdb.get("job")] == ["user", "assistant", "tool"] * 1 + [
        "assistant",
        "tool",
        "assistant",
    ]
    after = memoryd.Agent(llm=ScriptedModel(["next"]), memory=lmdb)
    assert asyncio.run(after.arun("more", "job")).version == 2
    assert agent.pending_runs() == []


def test_runs_on_one_conversation_take_turns(lmdb: memoryd.StoreHandle) -> None:
    """Four runs on one conversation, started at once on one loop: one runs at a time,
    each commits on the one before (no conflict), and a run cancelled while it waits
    for its turn leaves the conversation to the others."""
    overlap = Overlap()

    def agent(n: int) -> memoryd.Agent:
        script = steps_then(f"done {n}", str(n), tool="work")
        return memoryd.Agent(llm=ScriptedModel(script), memory=lmdb, tools=[overlap.tool])

    async def main() -> list[memoryd.RunResult]:
        runs = [asyncio.ensure_future(agent(n).arun(f"go {n}", "shared")) for n in range(5)]
        while not overlap.inside:  # the first run, which took the lock, is in its tool
            await asyncio.sleep(0.001)
        runs[4].cancel()  # waits for its turn: the lock is never taken
        done = await asyncio.gather(*runs[:4])
        with pytest.raises(asyncio.CancelledError):
            await runs[4]
        return done

    results = asyncio.run(main())
    assert overlap.most == 1
    assert sorted(r.version for r in results) == [1, 2, 3, 4]
    assert len(lmdb.get("shared")) == 4 * 4
    late = memoryd.Agent(llm=ScriptedModel(["last"]), memory=lmdb)
    assert asyncio.run(late.arun("last one", "shared")).version == 5


def test_a_failing_model_stores_nothing_and_leaves_no_journal(
    store: memoryd.StoreHandle,
) -> None:
    """The model fails after a recorded tool step: the error reaches the caller, the
    conversation is as it was, and the run's journal is gone."""
    notes = Notes()
    script = [*steps_then("unused", "a")[:1], LLMError("the provider is down")]
    agent = memoryd.Agent(llm=ScriptedModel(script), memory=store, tools=notes.tools)
    with pytest.raises(LLMError, match="provider is down"):
        asyncio.run(agent.arun("go", "c"))
    assert notes.calls == ["a"]
    assert store.get("c") == []
    assert agent.pending_runs() == []
    assert store.conversations(include_empty=True) == []


def test_bad_input_is_refused_before_anything_runs(lmdb: memoryd.StoreHandle) -> None:
    model = ScriptedModel(["never"])
    agent = memoryd.Agent(llm=model, memory=lmdb)
    with pytest.raises(InvalidMessage, match="run input must be"):
        asyncio.run(agent.arun(42))
    with pytest.raises(InvalidConversationId):
        asyncio.run(agent.arun("hi", "bad\nid"))
    with pytest.raises(ValueError, match="run_id must be a non-empty str"):
        asyncio.run(agent.arun("hi", "c", run_id=""))
    assert model.calls == [] and lmdb.conversations(include_empty=True) == []


def test_filters_run_in_worker_threads_around_the_model_and_tools(
    lmdb: memoryd.StoreHandle,
) -> None:
    """A filter is written for threads: with one, the model's and tools' calls go
    through it off the loop, and the turn is what it made of them."""
    seen: list[str] = []

    class Shout(memoryd.Filter):
        def around_chat(self, request: Any, next: Any) -> dict[str, Any]:
            seen.append(f"chat on {threading.get_ident() != loop_thread[0]}")
            reply = next(request)
            if reply.get("content"):
                reply = {**reply, "content": reply["content"].upper()}
            return reply

        def around_tool(self, call: Any, next: Any) -> Any:
            seen.append(f"tool on {threading.get_ident() != loop_thread[0]}")
            return next(call)

    loop_thread = [0]
    notes = Notes()
    agent = memoryd.Agent(
        llm=ScriptedModel(steps_then("done", "a")),
        memory=lmdb,
        tools=notes.tools,
        filters=[Shout()],
        system_prompt="Be brief.",
    )

    async def main() -> memoryd.RunResult:
        loop_thread[0] = threading.get_ident()
        return await agent.arun("go", "c")

    result = asyncio.run(main())
    assert result.text == "DONE"
    assert seen == ["chat on True", "tool on True", "chat on True"]
    assert lmdb.get("c")[-1] == messages.assistant("DONE")


def test_the_system_prompt_reaches_an_awaited_model_and_is_not_stored(
    lmdb: memoryd.StoreHandle,
) -> None:
    model = ScriptedModel(["ok"])
    agent = memoryd.Agent(llm=model, memory=lmdb, system_prompt="Be brief.")
    asyncio.run(agent.arun("hi", "c"))
    assert model.calls[0][0] == messages.system("Be brief.")
    assert lmdb.get("c") == [messages.user("hi"), messages.assistant("ok")]


def test_an_active_session_shapes_each_call_of_an_async_run(lmdb: memoryd.StoreHandle) -> None:
    """Agently's session on a loop: its handlers shape the window and its memo is kept."""

    def analysis(full: Any, window: Any, memo: Any, settings: Any) -> str | None:
        return "keep_last_four" if len(window) > 6 else None

    def keep_last_four(full: Any, window: Any, memo: Any, settings: Any) -> Any:
        return None, window[-4:], {"previous_turns": len(full) - 4}

    lmdb.add(
        "s",
        [messages.user(f"q{i}") if i % 2 == 0 else messages.assistant(f"a{i}") for i in range(10)],
    )
    model = ScriptedModel(["ok"])
    agent = memoryd.Agent(llm=model, memory=lmdb)
    agent.activate_session("s")
    agent.register_session_analysis_handler(analysis)
    agent.register_session_resize_handler("keep_last_four", keep_last_four)
    result = asyncio.run(agent.arun("latest"))
    assert result.conversation_id == "s"
    assert len(model.calls[0]) == 4 and model.calls[0][-1] == messages.user("latest")
    assert memoryd.Session("s", lmdb).memo == {"previous_turns": 6}
    assert [m["content"] for m in lmdb.get("s")][-2:] == ["latest", "ok"]


def test_runs_of_a_loop_killed_with_sigkill_are_resumed_without_rerunning_tools(
    tmp_path: Path,
) -> None:
    """Eight runs on one loop, kill -9 while each hangs in its fourth tool: a new process
    finds all eight orphaned and resumes them; each recorded side effect happened once,
    and only the tools that were running re-run."""
    data, markers = tmp_path / "data", tmp_path / "markers"
    markers.mkdir()
    hang_log = markers / "hang.log"
    kill9_when(
        "tests.agent._arun_crash_child",
        str(data),
        str(markers),
        ready=lambda: (
            hang_log.exists() and len(hang_log.read_text().splitlines()) == crash_child.RUNS
        ),
        timeout=60,
    )
    recorded = sorted(f"{w}.{n}" for w in range(crash_child.RUNS) for n in range(crash_child.STEPS))
    assert sorted((markers / "effects.log").read_text().split()) == recorded

    store = memoryd.LmdbStore.start(data, name="arun-crash-parent")
    resumed: list[str] = []

    @memoryd.tool
    async def effect(key: str) -> str:
        """A side effect.

        Args:
            key: The key.
        """
        crash_child.append(markers / "effects.log", key)
        return f"done {key}"

    @memoryd.tool
    async def hang(key: str) -> str:
        """Answer at once this time.

        Args:
            key: The key.
        """
        resumed.append(key)
        return f"hung {key}"

    finder = memoryd.Agent(llm=ScriptedModel([]), memory=store, tools=[effect, hang])
    pending = finder.pending_runs()
    assert len(pending) == crash_child.RUNS and all(p.orphaned for p in pending)
    for run in pending:
        w = int(run.conversation_id.removeprefix("job-"))
        model = ScriptedModel([crash_child.script(w)[-1], f"finished {w}"])
        agent = memoryd.Agent(llm=model, memory=store, tools=[effect, hang])
        assert agent.resume(run.run_id).text == f"finished {w}"
    assert sorted((markers / "effects.log").read_text().split()) == recorded
    assert sorted(resumed) == [str(w) for w in range(crash_child.RUNS)]
    assert finder.pending_runs() == []
    for w in range(crash_child.RUNS):
        roles = [m["role"] for m in store.get(f"job-{w}")]
        assert roles == ["user", *["assistant", "tool"] * (crash_child.STEPS + 1), "assistant"]


@pytest.mark.parametrize(("window", "on_loop"), [(10, True), (None, False)])
def test_a_windowed_history_of_a_local_store_is_read_on_the_loop(
    lmdb: memoryd.StoreHandle,
    monkeypatch: pytest.MonkeyPatch,
    window: int | None,
    on_loop: bool,
) -> None:
    """A run's history read is a tail of a local store with a window (cheaper than a
    hand-off to a thread), read on the loop; the whole history goes to a worker thread."""
    from memoryd.provider.default import DefaultProvider

    lmdb.add("c", [messages.user("earlier"), messages.assistant("answer")])
    readers: list[int] = []
    get = lmdb.get

    def recording_get(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        readers.append(threading.get_ident())
        return get(*args, **kwargs)

    monkeypatch.setattr(lmdb, "get", recording_get)
    model = ScriptedModel(["ok"])
    agent = memoryd.Agent(llm=model, memory=DefaultProvider(lmdb, window=window))

    async def main() -> int:
        await agent.arun("now", "c")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert readers and (readers[0] == loop_thread) is on_loop
    assert [m["content"] for m in model.calls[0]] == ["earlier", "answer", "now"]


def test_a_step_write_is_waited_for_the_way_it_was_sent(lmdb: memoryd.StoreHandle) -> None:
    """A write sent from a loop is awaited there (waiting on it in a thread is refused,
    not a hang); a thread's write awaited on a loop is waited for off the loop."""
    from memoryd.agent.journal import RunJournal

    journal = RunJournal(lmdb)
    turn = messages.check([messages.user("go")], max_bytes=None)
    step = messages.check([messages.assistant("noted")], max_bytes=None)

    async def main() -> None:
        on_loop = journal.begin_step(
            "r-loop", cid="c", base_version=0, inputs=1, turn=turn, added=turn, from_loop=True
        )
        with pytest.raises(RuntimeError, match="await wait_async"):
            on_loop.wait()
        await on_loop.wait_async()
        threads = journal.begin_step(
            "r-thread", cid="c", base_version=0, inputs=1, turn=turn, added=turn
        )
        await threads.wait_async()
        again = journal.begin_step(
            "r-loop", cid="c", base_version=0, inputs=1, turn=turn, added=step, from_loop=True
        )
        await again.wait_async()

    asyncio.run(main())
    assert sorted(r.run_id for r in journal.pending()) == ["r-loop", "r-thread"]
    [loop_run] = [r for r in journal.pending() if r.run_id == "r-loop"]
    assert [m["content"] for m in loop_run.messages] == ["go", "noted"]


def test_a_run_dropped_with_its_closed_loop_is_finalised_quietly(
    lmdb: memoryd.StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop closed while a run awaits its tool, the task then garbage-collected: the
    run's coroutine is finalised without an error of memoryd's (Python used to print
    "Exception ignored" with a `ValueError` from the tool-call context and a
    `RuntimeError` from a failure handler awaiting on no loop), nothing is stored, and
    the next run on the conversation works."""
    import gc
    import sys

    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    entered = asyncio.Event()

    @memoryd.tool
    async def wait_forever(n: int) -> int:
        """Wait for good."""
        entered.set()
        await asyncio.Event().wait()
        return n

    call = messages.assistant(tool_calls=[messages.tool_call("c1", "wait_forever", {"n": 1})])
    agent = memoryd.Agent(llm=ScriptedModel([call]), memory=lmdb, tools=[wait_forever])
    loop = asyncio.new_event_loop()
    task = loop.create_task(agent.arun("go", "dropped"))
    loop.run_until_complete(asyncio.wait_for(entered.wait(), 10))
    loop.close()
    del task
    gc.collect()
    assert unraisable == []
    assert lmdb.version("dropped") == 0
    assert (
        memoryd.Agent(llm=ScriptedModel(["ok"]), memory=lmdb).run("again", "dropped").text == "ok"
    )

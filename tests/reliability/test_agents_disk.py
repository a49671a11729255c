"""Agent systems on a full disk (a real tmpfs filled to the brim; needs root, as CI has).

A run that cannot record its tool step or its turn fails with `DiskFull`, its instance
lives on (no restart, no escalation), and a run that journaled tool steps before its
commit met the full disk leaves no pending run behind once space is freed: a later
recovery never commits a turn whose caller was told it failed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.agent.drops import UNDROPPED
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.agents._agents import note_tool, stepping_model, tool_steps_done


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` to the brim with one file, then give ``leave`` bytes back."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    if leave:
        os.ftruncate(fd, os.fstat(fd).st_size - leave)
    os.close(fd)
    return filler


def big_answer_model(steps: int, answer_bytes: int) -> ScriptedModel:
    """Calls ``note`` ``steps`` times, then answers with ``answer_bytes`` of text."""

    def decide(sent: list[dict[str, Any]]) -> Any:
        done = tool_steps_done(sent)
        if done < steps:
            call = messages.tool_call(f"c{done}", "note", {"n": done})
            return messages.assistant(tool_calls=[call])
        return "answer " + "y" * answer_bytes

    return ScriptedModel([decide] * 1000)


def users(store: memoryd.StoreHandle, cid: str) -> list[str]:
    return [m["content"] for m in store.get(cid) if m["role"] == "user"]


def test_runs_on_a_full_disk_fail_with_disk_full_and_the_instance_lives_on(
    small_disk: Path, systems: list[AgentSystem]
) -> None:
    """20 calls on a full disk: each `DiskFull` to its caller; the first ran the tool
    whose result it could not record, the 19 after it stopped before their tool step (the
    store is known to refuse writes), so no tool ran for nothing; the instance kept its
    one incarnation, nothing is pending; once the filler is deleted the next call runs
    its three steps."""
    store = memoryd.LmdbStore.start(small_disk / "db", name="agents-full", map_size=1 << 22)
    log: list[Any] = []
    agents = {
        "w": lambda key: memoryd.Agent(llm=stepping_model(3), memory=store, tools=[note_tool(log)])
    }
    system = AgentSystem.start(agents, store=store, name="full")
    systems.append(system)
    assert system.call("w", "k", "first").text == "done 3 for first"
    filler = fill(small_disk)
    with pytest.raises(memoryd.DiskFull, match="No space left on device"):
        system.call("w", "k", "refused 0", timeout=30)
    for i in range(1, 20):
        with pytest.raises(memoryd.DiskFull, match="stopped before its tool step"):
            system.call("w", "k", f"refused {i}", timeout=30)
    assert len(log) == 3 + 1  # only the call that found the disk full ran its tool
    stats = system.stats()
    assert (stats["restarts"], stats["escalations"], stats["calls"]) == (0, 0, 21)
    assert [i.incarnations for i in system.instances()] == [1]
    assert system.pending_runs() == []
    filler.unlink()
    assert system.call("w", "k", "after").text == "done 3 for after"
    assert users(store, "w/k") == ["first", "after"]


@pytest.mark.parametrize("dropped_by", ["the next run", "pending_runs"])
def test_a_run_whose_commit_meets_a_full_disk_leaves_no_pending_run_once_space_is_freed(
    small_disk: Path, systems: list[AgentSystem], dropped_by: str
) -> None:
    """A run journals two tool steps, then its 400 KB turn meets a full disk: the caller
    gets `DiskFull`, with a note that the run stays pending until it can be dropped.
    While the disk is full the run is listed; once space is freed, the next run (or
    listing the pending runs) drops it, so a system recovering the store resumes
    nothing and the failed turn is never committed."""
    store = memoryd.LmdbStore.start(small_disk / "db", name="commit-full", map_size=1 << 22)
    log: list[Any] = []

    def agent(key: str) -> memoryd.Agent:
        return memoryd.Agent(llm=big_answer_model(2, 400_000), memory=store, tools=[note_tool(log)])

    system = AgentSystem.start({"w": agent}, store=store, name="commit-full")
    systems.append(system)
    assert system.call("w", "k", "first").text.startswith("answer")
    filler = fill(small_disk, leave=200_000)
    with pytest.raises(memoryd.DiskFull) as failed:
        system.call("w", "k", "lost", timeout=30)
    assert len(log) == 4  # both tool steps of "lost" were recorded before the commit
    assert any("stays pending until this process drops it" in n for n in failed.value.__notes__)
    [pending] = system.pending_runs()
    assert pending.conversation_id == "w/k"
    filler.unlink()
    if dropped_by == "the next run":
        assert system.call("w", "k", "after").text.startswith("answer")
        assert users(store, "w/k") == ["first", "after"]
    assert system.pending_runs() == []
    system.stop()
    systems.remove(system)
    recovered = AgentSystem.start({"w": agent}, store=store, name="commit-full", recover="resume")
    systems.append(recovered)
    assert recovered.stats()["resumed"] == 0
    assert "lost" not in users(store, "w/k")
    assert len(log) == (6 if dropped_by == "the next run" else 4)


def test_runs_failing_side_by_side_on_a_full_disk_leave_none_pending_once_space_is_freed(
    small_disk: Path, systems: list[AgentSystem]
) -> None:
    """Six callers keep calling while the disk fills and is freed again. Their runs that
    failed with the journal undroppable are noted, and each run starting meanwhile tries
    to drop them: two threads trying one run at once must not lose its note. Once space
    is back, no run is left pending and none is noted, so a recovering system resumes
    nothing; every acknowledged turn is stored once."""
    store = memoryd.LmdbStore.start(small_disk / "db", name="side-by-side", map_size=1 << 22)
    log: list[Any] = []

    def agent(key: str) -> memoryd.Agent:
        return memoryd.Agent(llm=stepping_model(3), memory=store, tools=[note_tool(log)])

    system = AgentSystem.start({"w": agent}, store=store, name="side-by-side")
    systems.append(system)
    acked: dict[int, list[str]] = {k: [] for k in range(6)}
    failed: list[str] = []
    stop = threading.Event()

    def caller(k: int) -> None:
        n = 0
        while not stop.is_set():
            request = f"k{k}-{n}"
            n += 1
            try:
                system.call("w", f"k{k}", request, request_id=request, timeout=30)
            except (memoryd.DiskFull, memoryd.StorageError):
                failed.append(request)
                time.sleep(0.01)
            else:
                acked[k].append(request)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    filler = fill(small_disk)
    time.sleep(2.0)
    filler.unlink()
    time.sleep(1.5)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert failed, "the full disk failed no call"
    assert system.pending_runs() == []
    assert UNDROPPED.of(store) == {}
    for k, requests in acked.items():
        assert users(store, f"w/k{k}") == requests
    system.stop()
    systems.remove(system)
    recovered = AgentSystem.start({"w": agent}, store=store, name="side-by-side", recover="resume")
    systems.append(recovered)
    assert recovered.stats()["resumed"] == 0

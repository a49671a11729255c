"""Acting on pending runs while a system runs: `AgentSystem.resume` and
`AgentSystem.discard` finish or drop an orphaned run (one a killed process left, or one
a failed store left here) and refuse a run a live process holds."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.agents._agents import (
    call_at_gate,
    factory,
    file_note_tool,
    start,
    start_gated,
    stepping_model,
)
from tests.agents._spawn import crashing
from tests.helpers import wait_until
from tests.server.daemon import Daemon


def on_store(store: memoryd.StoreHandle, effects: Path) -> dict[str, Any]:
    """The child's agent type ``w``, its tool appending to ``effects``."""

    def make(key: str) -> memoryd.Agent:
        return memoryd.Agent(
            llm=stepping_model(4), memory=store, tools=[file_note_tool(effects, key)]
        )

    return {"w": make}


def test_orphaned_runs_are_resumed_or_discarded_by_id(
    tmp_path: Path, systems: list[AgentSystem]
) -> None:
    """Runs a SIGKILLed process left: one is resumed (each tool side effect once), the
    other discarded (no turn, never resumed); neither can be acted on again."""
    effects, data = tmp_path / "effects", tmp_path / "data"
    process = crashing(f"lmdb:{data}", effects)
    process.kill()
    process.wait()
    store = memoryd.LmdbStore.start(data, name="pending")
    system = start(systems, on_store(store, effects), store=store, recover="keep")
    runs = {run.conversation_id: run for run in system.pending_runs()}
    assert sorted(runs) == ["w/k0", "w/k1"] and all(r.orphaned for r in runs.values())
    assert system.resume(runs["w/k0"].run_id).text == "done 4 for job 0"
    system.discard(runs["w/k1"].run_id)
    assert system.pending_runs() == []
    done = Counter(effects.read_text().split("\n")[:-1])
    assert done == {"k0 0": 1, "k0 1": 1, "k0 2": 1, "k0 3": 1, "k1 0": 1, "k1 1": 1}
    assert len(store.get("w/k0")) == 10 and store.get("w/k1") == []
    assert (system.stats()["resumed"], system.stats()["discarded"]) == (1, 1)
    for act in (system.resume, system.discard):
        for run in runs.values():
            with pytest.raises(memoryd.UnknownRun, match="no unfinished run"):
                act(run.run_id)


def test_runs_a_live_process_holds_over_the_daemon_are_refused_until_it_dies(
    daemon: Daemon, tmp_path: Path, systems: list[AgentSystem]
) -> None:
    """Another live process's runs are its own (their leases say so); once it is killed,
    they are orphaned and this process resumes one."""
    name = f"pending-{uuid.uuid4().hex[:8]}"
    effects = tmp_path / "effects"
    process = crashing(f"remote:{daemon.address}/{name}", effects)
    try:
        store = memoryd.connect(daemon.address, store=name)
        system = start(systems, on_store(store, effects), store=store, recover="keep")
        runs = {run.conversation_id: run for run in system.pending_runs()}
        assert sorted(runs) == ["w/k0", "w/k1"] and not any(r.orphaned for r in runs.values())
        for act in (system.resume, system.discard):
            with pytest.raises(ValueError, match=r"held by the live process .*lease runs out"):
                act(runs["w/k0"].run_id)
    finally:
        process.kill()
        process.wait()
    wait_until(lambda: all(run.orphaned for run in system.pending_runs()), timeout=10)
    assert system.resume(runs["w/k0"].run_id).text == "done 4 for job 0"
    assert [run.conversation_id for run in system.pending_runs()] == ["w/k1"]


def test_a_run_going_on_in_this_process_is_neither_resumed_nor_discarded(
    systems: list[AgentSystem],
) -> None:
    """The run a caller is waiting for is not orphaned: both refuse it, naming why, and
    the run finishes as if nothing was asked."""
    store = memoryd.EphemeralStore.start(name="pending-live")
    system, gate, log = start_gated(systems, store, steps=2, gate_at=1)
    caller = call_at_gate(system, gate, "busy")
    (run,) = system.pending_runs()
    assert not run.orphaned
    for act in (system.resume, system.discard):
        with pytest.raises(ValueError, match="running in this process"):
            act(run.run_id)
    gate.release.set()
    assert caller.outcome().text == "done 2 for busy"
    assert log == ["0", "1"] and system.pending_runs() == []


def test_bad_or_foreign_run_ids_are_refused(systems: list[AgentSystem]) -> None:
    """An empty id, an id never recorded, and a run of another system's agent type."""
    store = memoryd.EphemeralStore.start(name="pending-foreign")
    ours = start(systems, {"w": factory(store, stepping_model)}, store=store, recover="keep")
    theirs, gate, _ = start_gated(systems, store, steps=2, gate_at=1)
    other_types = start(systems, {"x": factory(store, stepping_model)}, store=store, recover="keep")
    caller = call_at_gate(theirs, gate, "elsewhere")
    (run,) = theirs.pending_runs()
    with pytest.raises(memoryd.UnknownRun, match="none of the agent types \\['x'\\]"):
        other_types.resume(run.run_id)
    with pytest.raises(ValueError, match="non-empty str"):
        ours.discard("")
    with pytest.raises(memoryd.UnknownRun, match="no unfinished run"):
        ours.resume("never-ran")
    gate.release.set()
    caller.outcome()


def test_recovery_on_start_logs_each_failed_run_and_its_end(
    tmp_path: Path, systems: list[AgentSystem]
) -> None:
    """Two orphaned runs resumed on start, one of them failing again (its model is down):
    the failure is logged with its run id, then the recovery's end with the counts."""
    effects, data = tmp_path / "effects", tmp_path / "data"
    process = crashing(f"lmdb:{data}", effects)
    process.kill()
    process.wait()
    store = memoryd.LmdbStore.start(data, name="pending-logs")

    def make(key: str) -> memoryd.Agent:
        model = ScriptedModel([memoryd.LLMError("down")]) if key == "k1" else stepping_model(4)
        return memoryd.Agent(llm=model, memory=store, tools=[file_note_tool(effects, key)])

    with capture_logs() as logs:
        system = start(systems, {"w": make}, store=store, recover="resume")
        assert system.recovered(timeout=60)
        wait_until(lambda: any(e["event"] == "agent_system_recovered" for e in logs))
    events = {e["event"]: e for e in logs if e["event"].startswith(("agent_system_rec", "recov"))}
    assert events["agent_system_recovering"]["runs"] == 2
    (failed,) = [e for e in logs if e["event"] == "recovered_run_failed"]
    assert "down" in failed["error"]
    recovered = events["agent_system_recovered"]
    assert (recovered["runs"], recovered["failed"]) == (2, 1)
    assert Counter(effects.read_text().split("\n")[:-1])["k0 3"] == 1

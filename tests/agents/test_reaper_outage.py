"""An agent system's reaper while its store is away: one warning, not one a tick."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

import memoryd
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel
from tests.helpers import wait_until


def test_the_reaper_says_once_that_it_fails_while_the_store_is_away_and_when_it_works(
    tmp_path: Path, systems: list[AgentSystem]
) -> None:
    """The store stops under a system whose reaper ticks every 50 ms (leases of 0.2 s):
    40 ticks, most of them failed, log ``agent_reaper_failed`` once (it used to log each
    one, up to a hundred lines a second), and once the store is back the first tick that
    works logs ``agent_reaper_working_again`` with how many tries failed."""
    store = memoryd.LmdbStore.start(tmp_path / "data", name="reaped")
    system = AgentSystem.start(
        {"e": lambda key: memoryd.Agent(llm=ScriptedModel(["hi"] * 10), memory=store)},
        store=store,
        name="reaping",
        lease_s=0.2,
    )
    systems.append(system)
    system.call("e", "a", "x")
    ticks: list[int] = []
    placement = system._placement
    reap = placement.passivate_idle

    def counted() -> int:
        ticks.append(1)
        return reap()

    placement.passivate_idle = counted  # type: ignore[method-assign]
    with capture_logs() as logs:
        store.stop()
        wait_until(lambda: len(ticks) >= 40, timeout=20)
        memoryd.LmdbStore.start(tmp_path / "data", name="reaped")
        wait_until(
            lambda: any(e["event"] == "agent_reaper_working_again" for e in logs), timeout=20
        )
    said = [e for e in logs if e["event"].startswith("agent_reaper")]
    assert [e["event"] for e in said] == ["agent_reaper_failed", "agent_reaper_working_again"]
    assert said[1]["tries"] >= 20  # the ticks counted before the stop worked

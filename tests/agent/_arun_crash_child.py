"""Child process for the SIGKILL test of `Agent.arun`: RUNS runs on one event loop, each
killed in its last tool.

Usage: python -m tests.agent._arun_crash_child DATA_DIR MARKER_DIR

Run ``w`` (conversation ``job-w``) calls ``effect`` STEPS times, each call appending
``w.n`` to MARKER_DIR/effects.log, then ``hang``, which appends ``hang w`` to
MARKER_DIR/hang.log and waits for ever. The parent kills the process once every run
hangs.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel

RUNS = 8
STEPS = 3


def script(w: int) -> list[dict[str, object]]:
    """Run ``w``'s model: STEPS effects, then the hang (the resumed run answers after it)."""
    calls = [
        messages.assistant(tool_calls=[messages.tool_call(f"e{n}", "effect", {"key": f"{w}.{n}"})])
        for n in range(STEPS)
    ]
    hang = messages.assistant(tool_calls=[messages.tool_call("h", "hang", {"key": str(w)})])
    return [*calls, hang]


def append(path: Path, line: str) -> None:
    with path.open("a") as log:
        log.write(f"{line}\n")


def main(data: str, markers: str) -> None:
    """Run the scenario; never returns normally (the parent kills it)."""
    out = Path(markers)
    store = memoryd.LmdbStore.start(data, name="arun-crash-child")

    @memoryd.tool
    async def effect(key: str) -> str:
        """A side effect.

        Args:
            key: The key.
        """
        append(out / "effects.log", key)
        return f"done {key}"

    @memoryd.tool
    async def hang(key: str) -> str:
        """Wait for ever.

        Args:
            key: The key.
        """
        append(out / "hang.log", f"hang {key}")
        await asyncio.Event().wait()
        return "never"

    async def everything() -> None:
        agents = [
            memoryd.Agent(llm=ScriptedModel(script(w)), memory=store, tools=[effect, hang])
            for w in range(RUNS)
        ]
        await asyncio.gather(*(a.arun("work", f"job-{w}") for w, a in enumerate(agents)))

    asyncio.run(everything())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

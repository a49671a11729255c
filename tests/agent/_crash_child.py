"""Child process for the SIGKILL test: an agent run that hangs in its second tool call.

Usage: python -m tests.agent._crash_child DATA_DIR MARKER_DIR

It commits one whole run first, then starts a run whose tool loop calls ``lookup``
(recorded in MARKER_DIR/lookup.calls) and then ``slow``, which writes
MARKER_DIR/slow.started and blocks until the test kills the process.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel


def main(data: str, markers: str) -> None:
    """Run the scenario; never returns normally (the parent kills it)."""
    out = Path(markers)
    store = memoryd.LmdbStore.start(data, name="crash-child")

    @memoryd.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        with (out / "lookup.calls").open("a") as log:
            log.write(f"{key}\n")
        return f"value-of-{key}"

    @memoryd.tool
    def slow(key: str) -> str:
        """Take forever."""
        (out / "slow.started").write_text(key)
        threading.Event().wait()
        return "never"

    model = ScriptedModel(
        [
            "hello",
            messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"key": "k1"})]),
            messages.assistant(tool_calls=[messages.tool_call("c2", "slow", {"key": "k2"})]),
        ]
    )
    agent = memoryd.Agent(llm=model, memory=store, tools=[lookup, slow])
    agent.run("hi", conversation_id="job")
    agent.run("do the job", conversation_id="job")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

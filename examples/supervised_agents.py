"""Three supervised agents: a researcher with a tool, a writer, and an editor who asks
both (agents as tools); a crash in the middle of a run, and recovery.

Runs offline with scripted models:

    python examples/supervised_agents.py [DATA_DIR]

1. The editor asks the researcher (who calls ``search``) and the writer.
2. The researcher is killed with ``supervisors.kill`` while its tool runs: the
   supervisor restarts it, the new incarnation resumes the run from its journal
   without calling ``search`` again, and the waiting editor gets the answer.
3. The system is stopped and started again with ``recover="resume"``: nothing is
   pending, and the instances come back with their memory.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from typing import Any

import memoryd
import supervisors
from memoryd import messages
from memoryd.agents import AgentSystem
from memoryd.llm import ScriptedModel

searches: list[str] = []
search_started = threading.Event()
search_may_finish = threading.Event()


@memoryd.tool
def search(query: str) -> str:
    """Search the literature.

    Args:
        query: What to look for.
    """
    search_started.set()
    search_may_finish.wait(10.0)
    searches.append(query)
    return f"3 papers about {query}"


def last_tool_result(sent: list[dict[str, Any]]) -> str | None:
    return sent[-1]["content"] if sent[-1]["role"] == "tool" else None


def researcher_model(sent: list[dict[str, Any]]) -> Any:
    found = last_tool_result(sent)
    if found is not None:
        return f"Findings: {found}."
    query = sent[-1]["content"]
    return messages.assistant(tool_calls=[messages.tool_call("s1", "search", {"query": query})])


def writer_model(sent: list[dict[str, Any]]) -> str:
    return f"Draft: {sent[-1]['content']}"


def main(data: str) -> None:
    """Run the scenario on a durable store in ``data``."""
    store = memoryd.LmdbStore.start(data, name="crew-store")
    holder: dict[str, AgentSystem] = {}

    def editor(key: str) -> memoryd.Agent:
        system = holder["system"]

        def model(sent: list[dict[str, Any]]) -> Any:
            answer = last_tool_result(sent)
            last_user = max(i for i, m in enumerate(sent) if m["role"] == "user")
            tool_results = [m for m in sent[last_user:] if m["role"] == "tool"]  # this turn's
            if answer is None:
                ask = {"key": key, "message": "memory in LLM agents"}
                return messages.assistant(
                    tool_calls=[messages.tool_call("e1", "ask_researcher", ask)]
                )
            if len(tool_results) == 1:
                ask = {"key": key, "message": answer}
                return messages.assistant(tool_calls=[messages.tool_call("e2", "ask_writer", ask)])
            return f"Approved. {answer}"

        tools = [system.tool("researcher"), system.tool("writer")]
        return memoryd.Agent(llm=ScriptedModel([model] * 20), memory=store, tools=tools)

    agents = {
        "researcher": lambda key: memoryd.Agent(
            llm=ScriptedModel([researcher_model] * 20), memory=store, tools=[search]
        ),
        "writer": lambda key: memoryd.Agent(llm=ScriptedModel([writer_model] * 20), memory=store),
        "editor": editor,
    }
    system = holder["system"] = AgentSystem.start(agents, store=store, name="crew")

    result: dict[str, Any] = {}
    editing = threading.Thread(target=lambda: result.update(r=system.call("editor", "ed", "go")))
    editing.start()
    search_started.wait(10.0)
    supervisors.kill("crew/researcher/ed")  # honoured at the run's next step boundary
    search_may_finish.set()
    editing.join(30.0)
    print("editor:", result["r"].text)
    print("search ran", len(searches), "time(s)")
    print("restarts:", system.stats()["restarts"])
    system.stop()

    system = holder["system"] = AgentSystem.start(
        agents, store=store, name="crew", recover="resume"
    )
    print("pending after restart:", len(system.pending_runs()))
    memory = store.get("researcher/ed")
    print("researcher remembers", len(memory), "messages")
    system.stop()
    memoryd.shutdown()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:  # a directory of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="crew-") as scratch:
            main(scratch)

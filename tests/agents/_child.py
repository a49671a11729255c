"""Child process for the agent-system process tests.

Usage: python -m tests.agents._child MODE STORE EFFECTS [N]

STORE is ``lmdb:<dir>``, ``remote:<address>/<store name>`` or ``redis:<url>``; EFFECTS
is the side-effect file the tools append to.

* ``crash``: starts N instances ``w/k0`` .. ``w/k<N-1>`` of a 4-step agent whose tool
  blocks for ever at step 2 (after writing ``EFFECTS.<key>.blocked``, before its side
  effect); the test kills the process with SIGKILL.
* ``recover``: starts the system with ``recover="resume"`` and no ids, waits for the
  recovered runs, and prints ``recovered <count>``.
* ``left``: leaves a run of ``w/k0`` (request id ``job``) pending after one tool step,
  stops its system and lives on, holding the run's lease (prints ``left``).
* ``share``: calls instance ``w/shared`` N times, letting it passivate (and release its
  lease) after each call; its tool appends ``start <pid>`` and ``end <pid>`` around its
  work, so overlapping runs of the instance would show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

import memoryd
from memoryd.agents import AgentSystem
from tests.agents._agents import file_note_tool, stepping_model


def open_store(spec: str) -> memoryd.StoreHandle:
    """The store a STORE argument names."""
    kind, _, where = spec.partition(":")
    if kind == "lmdb":
        return memoryd.LmdbStore.start(where, name="agents-child")
    if kind == "remote":
        address, _, name = where.rpartition("/")
        return memoryd.connect(address, store=name)
    if kind == "redis":
        return memoryd.RedisStore.start(where, name="agents-child", prefix="agents")
    raise SystemExit(f"unknown store {spec!r}")


def crash(store: memoryd.StoreHandle, effects: Path, count: int) -> None:
    def make(key: str) -> memoryd.Agent:
        tool = file_note_tool(effects, key, block_at=2)
        return memoryd.Agent(llm=stepping_model(4), memory=store, tools=[tool])

    system = AgentSystem.start({"w": make}, store=store, name="crash", recover="keep")
    for n in range(count):
        threading.Thread(target=system.call, args=("w", f"k{n}", f"job {n}"), daemon=True).start()
    threading.Event().wait()


def recover(store: memoryd.StoreHandle, effects: Path) -> None:
    def make(key: str) -> memoryd.Agent:
        tool = file_note_tool(effects, key)
        return memoryd.Agent(llm=stepping_model(4), memory=store, tools=[tool])

    system = AgentSystem.start({"w": make}, store=store, name="recover", recover="resume")
    if not system.recovered(timeout=120):
        raise SystemExit("recovery did not finish")
    print(f"recovered {system.stats()['resumed']}", flush=True)
    system.stop()


def left(store: memoryd.StoreHandle, effects: Path) -> None:
    """Leave a run pending while this process lives on: a call with request id ``job``
    is cancelled in its LLM call after its first tool step; the system stops (its
    instance lease is free) and the process waits with the run's lease still its own."""

    def make(key: str) -> memoryd.Agent:
        model = stepping_model(2)

        class Slow:  # the reply after the first step comes too late for the caller
            def complete(self, sent: list[Any], *, tools: Any = None) -> Any:
                return model.complete(sent, tools=tools)

            async def acomplete(self, sent: list[Any], *, tools: Any = None) -> Any:
                if sent[-1].get("role") == "tool":
                    await asyncio.sleep(60)
                return model.complete(sent, tools=tools)

        return memoryd.Agent(llm=Slow(), memory=store, tools=[file_note_tool(effects, key)])

    system = AgentSystem.start({"w": make}, store=store, name="left", recover="keep")

    async def cancelled() -> None:
        call = system.acall("w", "k0", "job 0", request_id="job")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(call, 2.0)

    asyncio.run(cancelled())
    system.stop()
    print("left", flush=True)
    threading.Event().wait()


def share(store: memoryd.StoreHandle, effects: Path, count: int) -> None:
    pid = os.getpid()

    @memoryd.tool
    def work(n: int) -> str:
        """Work on step n.

        Args:
            n: The step.
        """
        with effects.open("a") as out:
            out.write(f"start {pid}\n")
        for _ in range(50):  # give another process the chance to overlap, if it could
            os.sched_yield()
        with effects.open("a") as out:
            out.write(f"end {pid}\n")
        return "worked"

    def make(key: str) -> memoryd.Agent:
        return memoryd.Agent(llm=stepping_model(2, tool="work"), memory=store, tools=[work])

    system = AgentSystem.start(
        {"w": make}, store=store, name="share", idle_after_s=0.01, recover="keep"
    )
    for n in range(count):
        system.call("w", "shared", f"call {pid} {n}", timeout=120)
        while system.instances():  # passivated: the lease is free for the other process
            os.sched_yield()
    system.stop()
    print("shared done", flush=True)


def main(argv: list[str]) -> None:
    """Run one mode (see the module docstring)."""
    mode, spec, effects = argv[0], argv[1], Path(argv[2])
    count = int(argv[3]) if len(argv) > 3 else 1
    store: Any = open_store(spec)
    if mode == "crash":
        crash(store, effects, count)
    elif mode == "recover":
        recover(store, effects)
    elif mode == "left":
        left(store, effects)
    elif mode == "share":
        share(store, effects, count)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    memoryd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])

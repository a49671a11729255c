"""Agent systems against their anchors: DBOS Transact (durable steps, recovery) and
AutoGen Core (messaging, activation), measured in one run and printed as ratios.

    python tools/bench_agents.py [--quick]

* durable steps: a run of 10 trivial tool steps (a stepping chat model that copies
  nothing, memory on a durable LmdbStore read through a window of 50 messages, through an
  AgentSystem) against a DBOS workflow of 10 ``@DBOS.step`` on its SQLite system
  database; 1 and 8 concurrent runs; memoryd with its journal off as well (seven
  alternating rounds of on and off: the on/off row shows the median round, the notes
  its range); a round of DBOS follows each round of memoryd's (total over total time on
  both sides); fsyncs per turn from the store's ``stats()``.
* recovery: 100 runs killed with SIGKILL at step 6 of 10, then the time from a new
  process's start to all 100 finished (memoryd: ``AgentSystem.start(recover="resume")``
  with no ids; DBOS: recovery at ``DBOS.launch()``), and the side effects counted.
* messaging: a call's round trip to an instance with a trivial model and no memory,
  against AutoGen Core's ``SingleThreadedAgentRuntime.send_message`` to an agent that
  answers at once; 1 and 8 callers, three rounds of each side alternating (total over
  total time).
* activation: 1,000 distinct instances called once each, against AutoGen registering
  and messaging 1,000 agents, five rounds of each alternating (total over total time,
  so the whole-heap garbage collections either side sets off are paid for); 10,000
  instances with max_active=256: live threads and RSS.
* floor: the 8-run journal ratio's shape with no memoryd (`benchlib.journal_floor`):
  threads spinning at the journal-off runs' pace per step, one record per step
  group-committed to a bare LMDB file.
* bare journal: memoryd's own 8 runs with their journal off, each step first handing one
  200-byte record to that bare group-committing thread and waiting until it is durable,
  run in each round of the 8-run rows right after the journal-off side and set against
  it (the median round): the least any journal that makes each step durable before the
  next costs these runs; memoryd's journal against it is the median of the rounds'
  on/bare ratios.
* own-thread log: the same, each step's record appended by the runner's own thread to a
  file of its own and fdatasynced there (no hand-off, no grouping): the cheapest shape of
  such a journal on callers' threads; memoryd's journal against it likewise.
* a note: what a py-lmdb put costs beside a busy thread (`benchlib.lmdb_gil`), the
  reason the store builds a batch while its writers wait.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib.journal_floor import Committer, ThreadLog, floor_on_off
from benchlib.lmdb_gil import put_cost

import memoryd
from memoryd.agents import AgentSystem
from memoryd.kernel.tools import Tool

STEPS = 10
KILL_AT = 6
ROUNDS = 7
"""Alternating rounds of the journal on and off in each durable-steps row (one with --quick)."""
THREAD_ROUNDS = 21
"""Rounds of the 8 runs on callers' threads, whose rounds scatter the most (0.28x to 0.66x
in two runs of seven rounds): their median, and the floors' beside it, then move less."""
MODEL_LATENCY_S = 0.001
"""How long the model of the latency row takes to answer: about one LMDB commit here."""


# -- memoryd agents ----------------------------------------------------------------------------


class Stepping:
    """A chat model (a `memoryd.llm.ChatModel`) calling ``tool`` ``steps`` times in a turn,
    then answering: it reads the turn (the tool results since the last user message) and
    copies nothing, so a run measures memoryd, not a test double's bookkeeping.

    Args:
        steps: Tool steps per turn.
        tool: The tool's name.
        latency_s: How long each answer takes (a sleep, as a model's network wait).
    """

    def __init__(self, steps: int, tool: str = "step", latency_s: float = 0.0) -> None:
        self.steps = steps
        self.tool = tool
        self.latency_s = latency_s

    def complete(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._answer(messages)

    async def acomplete(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """`complete`, awaited: the model of runs on an event loop (`Agent.arun`)."""
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._answer(messages)

    def _answer(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        done = 0
        for message in reversed(messages):
            role = message.get("role")
            if role == "user":
                break
            done += role == "tool"
        if done < self.steps:
            call = {
                "id": f"c{done}",
                "type": "function",
                "function": {"name": self.tool, "arguments": f'{{"n": {done}}}'},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}


def stepping(steps: int, tool: str = "step", latency_s: float = 0.0) -> Stepping:
    """A model calling ``tool`` ``steps`` times per turn, then answering."""
    return Stepping(steps, tool, latency_s)


@memoryd.tool
def step(n: int) -> int:
    """A trivial step.

    Args:
        n: The step.
    """
    return n


@memoryd.tool
async def astep(n: int) -> int:
    """A trivial step, awaited on the run's event loop.

    Args:
        n: The step.
    """
    return n


BARE_RECORD = b"s" * 200
"""What a bare-journal step makes durable: about the size of a step's journal record."""


def bare_tool(committer: Committer | ThreadLog) -> Tool:
    """A trivial step that first makes one small record durable through ``committer``."""

    @memoryd.tool
    def bare_step(n: int) -> int:
        """A trivial step after a durable record.

        Args:
            n: The step.
        """
        committer.write(BARE_RECORD)
        return n

    return bare_step


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def in_threads(workers: int, fn: Callable[[int], None]) -> float:
    threads = [threading.Thread(target=fn, args=(w,)) for w in range(workers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


WINDOW = int(os.environ.get("BENCH_WINDOW", "50"))


def memory(store: memoryd.StoreHandle) -> Any:
    """The instances' memory: the store, read through a window of the last ``WINDOW``
    messages (as a long-lived agent reads it), so a run's cost does not grow with the
    runs the benchmark made before it; ``BENCH_WINDOW=0`` reads the whole history."""
    from memoryd.provider.default import DefaultProvider

    return DefaultProvider(store, window=WINDOW) if WINDOW else store


def memoryd_steps(
    workers: int,
    runs: int,
    *,
    journal: bool,
    latency_s: float = 0.0,
    on_loop: bool = False,
    tool: Tool | None = None,
    timing: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Runs/s of 10-step runs on ``workers`` instances, and fsyncs per run; the model
    answers in ``latency_s``. The ``workers`` callers are threads calling
    `AgentSystem.call`, or with ``on_loop`` coroutines of one event loop calling
    `AgentSystem.acall` (each turn runs on the loop, the model's ``acomplete`` and the
    tool awaited there). ``tool`` replaces the trivial step (`bare_tool`); ``timing`` is
    called once the warm-up run is done, as the timed runs begin (threads only)."""
    data = tempfile.mkdtemp(prefix="bench-agents-")
    try:
        store = memoryd.LmdbStore.start(data, name="bench-steps")
        if tool is None:
            tool = astep if on_loop else step

        def make(key: str) -> memoryd.Agent:
            return memoryd.Agent(
                llm=stepping(STEPS, tool=tool.name, latency_s=latency_s),
                memory=memory(store),
                tools=[tool],
                journal=None if journal else False,
                max_steps=STEPS + 1,
            )

        system = AgentSystem.start({"w": make}, store=store, name="bench-steps-system")
        if on_loop:
            elapsed, before = asyncio.run(on_one_loop(system, store, workers, runs))
        else:
            system.call("w", "warm", "warm up")
            before = int(store.stats()["fsyncs"])
            if timing is not None:
                timing()

            def work(w: int) -> None:
                for n in range(runs):
                    system.call("w", f"k{w}", f"run {n}")

            elapsed = in_threads(workers, work)
        fsyncs = (int(store.stats()["fsyncs"]) - before) / (workers * runs)
        system.stop()
        memoryd.shutdown()
        return workers * runs / elapsed, fsyncs
    finally:
        shutdown_and_remove(data)


async def on_one_loop(
    system: AgentSystem, store: memoryd.StoreHandle, workers: int, runs: int
) -> tuple[float, int]:
    """``workers`` coroutines each making ``runs`` calls in turn, after a warm-up: the
    time they took, and the store's fsyncs before them."""
    await system.acall("w", "warm", "warm up")
    before = int(store.stats()["fsyncs"])

    async def work(w: int) -> None:
        for n in range(runs):
            await system.acall("w", f"k{w}", f"run {n}")

    start = time.perf_counter()
    await asyncio.gather(*(work(w) for w in range(workers)))
    return time.perf_counter() - start, before


@dataclass(frozen=True)
class Bare:
    """One bare-journal side: memoryd's runs with their journal off, a durable record a step."""

    rate: float
    """Runs/s."""
    records: int
    """Records the bare file holds afterwards: one per step, the warm-up run's included."""
    commits: int
    """Transactions (each fsynced) the timed runs took."""
    store_fsyncs: float
    """Fsyncs per run of memoryd's own store: its turn commits only."""


def bare_journal(workers: int, runs: int) -> Bare:
    """`memoryd_steps` with the journal off and a `bare_tool` step: each step first hands
    one record to a bare group-committing LMDB thread (`benchlib.journal_floor`) and
    waits until it is durable."""
    path = tempfile.mkdtemp(prefix="bench-bare-journal-")
    try:
        committer = Committer(path, workers)
        warm_up = 0

        def timing() -> None:
            nonlocal warm_up
            warm_up = committer.commits

        try:
            rate, fsyncs = memoryd_steps(
                workers, runs, journal=False, tool=bare_tool(committer), timing=timing
            )
        finally:
            commits = committer.commits - warm_up
            records = committer.stop()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return Bare(rate, records, commits, fsyncs)


def bare_rate(workers: int, runs: int) -> float:
    """`bare_journal`'s runs/s: the ``bare`` side of `journal_on_off`."""
    return bare_journal(workers, runs).rate


@dataclass(frozen=True)
class OwnLog:
    """One own-thread-log side: memoryd's runs with their journal off, each step's record
    appended and fdatasynced by the runner's own thread (`benchlib.journal_floor.ThreadLog`)."""

    rate: float
    """Runs/s."""
    records: int
    """Records the files hold afterwards: one per step, the warm-up run's included."""


def own_log_journal(workers: int, runs: int) -> OwnLog:
    """`memoryd_steps` with the journal off and a `bare_tool` step writing through a
    `ThreadLog`."""
    path = tempfile.mkdtemp(prefix="bench-own-log-")
    try:
        log = ThreadLog(path)
        try:
            rate = memoryd_steps(workers, runs, journal=False, tool=bare_tool(log))[0]
        finally:
            held = log.stop()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return OwnLog(rate, held // len(BARE_RECORD))


def own_log_rate(workers: int, runs: int) -> float:
    """`own_log_journal`'s runs/s: the ``log`` side of `journal_on_off`."""
    return own_log_journal(workers, runs).rate


def loop_steps(
    workers: int, runs: int, *, journal: bool, latency_s: float = 0.0
) -> tuple[float, float]:
    """`memoryd_steps` with its callers on one event loop."""
    return memoryd_steps(workers, runs, journal=journal, latency_s=latency_s, on_loop=True)


@dataclass(frozen=True)
class OnOff:
    """Runs/s with the journal on and off, over alternating rounds of the two sides."""

    on: float
    """Journal on: total runs over total time."""
    off: float
    """Journal off: total runs over total time."""
    fsyncs: float
    """Fsyncs per run with the journal on."""
    rounds: tuple[tuple[float, float], ...]
    """Each round's (on, off) runs/s, a round of each side run one after the other."""
    anchor: float | None = None
    """The anchor's runs/s, a round of it run after each (on, off) round: total runs
    over total time (None: no anchor was measured)."""
    bare: tuple[float, ...] = ()
    """Each round's bare-journal runs/s (`bare_journal`), run right after its (on, off);
    empty when none was measured."""
    log: tuple[float, ...] = ()
    """Each round's own-thread-log runs/s (`own_log_journal`), run after its bare
    journal; empty when none was measured."""

    def median_round(self) -> tuple[float, float]:
        """The (on, off) of the round whose on/off ratio is the median (the upper one of
        an even count).

        Each ratio compares two sides measured within a second of each other. Total over
        total time weighs a round by its length, so one slow moment of the machine that
        falls on one side of one round moves it; the median round does not move with it.
        """
        ordered = sorted(self.rounds, key=lambda pair: pair[0] / pair[1])
        return ordered[len(ordered) // 2]

    def spread(self) -> tuple[float, float]:
        """The lowest and highest per-round on/off ratio."""
        ratios = [on / off for on, off in self.rounds]
        return min(ratios), max(ratios)

    def bare_median_round(self) -> tuple[float, float]:
        """The (bare, off) of the round whose bare/off ratio is the median (the upper one
        of an even count): the bare journal against the same round's journal-off runs."""
        return self._floor_median_round(self.bare)

    def log_median_round(self) -> tuple[float, float]:
        """`bare_median_round` for the own-thread log."""
        return self._floor_median_round(self.log)

    def on_vs_bare(self) -> float:
        """The median over rounds of memoryd's journal-on rate over the bare journal's:
        what memoryd's journal costs beyond the least a per-step durable write costs."""
        return self._on_vs(self.bare)

    def on_vs_log(self) -> float:
        """`on_vs_bare` for the own-thread log."""
        return self._on_vs(self.log)

    def middle_halves(self) -> dict[str, tuple[float, float]]:
        """The lower and upper quartile of the rounds' ratios to the journal-off side,
        for memoryd's journal (``"on"``) and each floor measured (``"bare"``, ``"log"``):
        where the middle half of the rounds fell."""
        offs = [off for _, off in self.rounds]
        sides = {"on": [on for on, _ in self.rounds], "bare": self.bare, "log": self.log}
        halves = {}
        for name, rates in sides.items():
            if len(rates) >= 2:
                ratios = [rate / off for rate, off in zip(rates, offs, strict=True)]
                low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
                halves[name] = (low, high)
        return halves

    def _floor_median_round(self, floor: tuple[float, ...]) -> tuple[float, float]:
        pairs = [(rate, off) for rate, (_, off) in zip(floor, self.rounds, strict=True)]
        return sorted(pairs, key=lambda pair: pair[0] / pair[1])[len(pairs) // 2]

    def _on_vs(self, floor: tuple[float, ...]) -> float:
        ratios = sorted(on / rate for rate, (on, _) in zip(floor, self.rounds, strict=True))
        return ratios[len(ratios) // 2]


def journal_on_off(
    workers: int,
    runs: int,
    rounds: int,
    latency_s: float = 0.0,
    steps: Callable[..., tuple[float, float]] = memoryd_steps,
    anchor: Callable[[int, int], float] | None = None,
    anchor_runs: int = 0,
    bare: Callable[[int, int], float] | None = None,
    log: Callable[[int, int], float] | None = None,
) -> OnOff:
    """Runs/s with the journal on and off in ``rounds`` alternating rounds, and fsyncs per
    run with it on; ``steps`` runs one side (`memoryd_steps`, threads; `loop_steps`, one
    event loop). With ``bare`` (``bare(workers, runs)`` -> runs/s, `bare_rate`), the bare
    journal runs after each round's off side, against the same off; with ``log``
    (`own_log_rate`), the own-thread log after that. With ``anchor``
    (``anchor(workers, anchor_runs)`` -> runs/s, DBOS's `dbos_steps`), a round of the
    anchor follows each round, so a slow moment of a shared machine falls on both sides
    alike, not on whichever was measured then."""
    on_s = off_s = anchor_s = fsyncs = 0.0
    pairs = []
    bares: list[float] = []
    logs: list[float] = []
    for _ in range(rounds):
        rate, per_run = steps(workers, runs, journal=True, latency_s=latency_s)
        on_s += workers * runs / rate
        fsyncs += per_run / rounds
        off = steps(workers, runs, journal=False, latency_s=latency_s)[0]
        off_s += workers * runs / off
        pairs.append((rate, off))
        if bare is not None:
            bares.append(bare(workers, runs))
        if log is not None:
            logs.append(log(workers, runs))
        if anchor is not None:
            anchor_s += workers * anchor_runs / anchor(workers, anchor_runs)
    total = rounds * workers * runs
    theirs = rounds * workers * anchor_runs / anchor_s if anchor is not None else None
    return OnOff(
        total / on_s, total / off_s, fsyncs, tuple(pairs), theirs, tuple(bares), tuple(logs)
    )


def shutdown_and_remove(data: str) -> None:
    memoryd.shutdown()
    shutil.rmtree(data, ignore_errors=True)


def side_effect(effects: str, tag: str, n: int, block_at: int | None) -> None:
    """Step ``n`` of run ``tag``'s side effect: a line ``"<tag> <n>"`` appended to
    ``effects``; at step ``block_at`` it first writes ``<effects>.<tag>.blocked`` and
    blocks for ever (the crash process is killed there)."""
    if n == block_at:
        Path(f"{effects}.{tag}.blocked").write_text("")
        threading.Event().wait()
    with open(effects, "a") as out:
        out.write(f"{tag} {n}\n")


# -- DBOS ----------------------------------------------------------------------------------------


def dbos_launch(db: str, effects: str | None = None, block_at: int | None = None) -> Any:
    """Configure DBOS on a SQLite system database and register the 10-step workflow."""
    from dbos import DBOS

    DBOS(config={"name": "bench", "system_database_url": f"sqlite:///{db}", "log_level": "ERROR"})

    @DBOS.step()
    def dbos_step(n: int) -> int:
        if effects is not None:
            side_effect(effects, str(DBOS.workflow_id), n, block_at)
        return n

    @DBOS.workflow()
    def ten_steps(tag: str) -> str:
        for n in range(STEPS):
            dbos_step(n)
        return tag

    DBOS.launch()
    return ten_steps


def dbos_steps(workers: int, runs: int) -> float:
    from dbos import DBOS

    root = tempfile.mkdtemp(prefix="bench-dbos-")
    try:
        workflow = dbos_launch(os.path.join(root, "sys.sqlite"))
        workflow("warm")

        def work(w: int) -> None:
            for n in range(runs):
                workflow(f"{w}-{n}")

        elapsed = in_threads(workers, work)
        DBOS.destroy()
        return workers * runs / elapsed
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- recovery (child processes) -----------------------------------------------------------------


def child(args: list[str]) -> None:
    """The crash and recovery processes: ``--child KIND PHASE DIR N``."""
    kind, phase, root, count = args[0], args[1], args[2], int(args[3])
    effects = os.path.join(root, "effects")
    started = time.perf_counter()
    if kind == "dbos":
        from dbos import DBOS

        workflow = dbos_launch(
            os.path.join(root, "sys.sqlite"), effects, KILL_AT if phase == "crash" else None
        )
        if phase == "crash":
            for n in range(count):
                DBOS.start_workflow(workflow, f"w{n}")
            threading.Event().wait()
        while sum(1 for _ in DBOS.list_workflows(status="SUCCESS")) < count:
            time.sleep(0.01)
        print(time.perf_counter() - started, flush=True)
        DBOS.destroy()
        return
    store = memoryd.LmdbStore.start(os.path.join(root, "data"), name="bench-recovery")
    blocked_at = KILL_AT if phase == "crash" else None

    def make(key: str) -> memoryd.Agent:
        @memoryd.tool
        def step(n: int) -> int:
            """A step with a side effect.

            Args:
                n: The step.
            """
            side_effect(effects, key, n, blocked_at)
            return n

        return memoryd.Agent(llm=stepping(STEPS), memory=store, tools=[step], max_steps=STEPS + 1)

    recover = "keep" if phase == "crash" else "resume"
    system = AgentSystem.start({"w": make}, store=store, name="bench-rec", recover=recover)
    if phase == "crash":
        for n in range(count):
            threading.Thread(target=system.call, args=("w", f"k{n}", "go"), daemon=True).start()
        threading.Event().wait()
    assert system.recovered(timeout=600)
    print(time.perf_counter() - started, flush=True)
    system.stop()
    memoryd.shutdown()


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def recovery(kind: str, count: int) -> tuple[float, float, int]:
    """Wall time of the recovering process (from its start, interpreter included; and from
    its first line of code), and how many side effects were written more than once."""
    root = tempfile.mkdtemp(prefix=f"bench-rec-{kind}-")
    try:
        crashing = spawn(kind, "crash", root, str(count))
        deadline = time.monotonic() + 300
        while len(list(Path(root).glob("effects.*.blocked"))) < count:
            if crashing.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{kind} crash phase failed: {crashing.communicate()[1][-2000:]}")
            time.sleep(0.01)
        crashing.send_signal(signal.SIGKILL)
        crashing.wait()
        start = time.perf_counter()
        recovering = spawn(kind, "recover", root, str(count))
        out, err = recovering.communicate(timeout=600)
        wall = time.perf_counter() - start
        if recovering.returncode != 0:
            raise SystemExit(f"{kind} recovery failed: {err[-2000:]}")
        lines = Path(root, "effects").read_text().split("\n")[:-1]
        twice = len(lines) - len(set(lines))
        if len(set(lines)) != count * STEPS:
            raise SystemExit(f"{kind}: {len(set(lines))} side effects, expected {count * STEPS}")
        return wall, float(out.strip().splitlines()[-1]), twice
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- messaging and activation ---------------------------------------------------------------------


class Trivial:
    """A chat model that answers at once (a `memoryd.llm.ChatModel`)."""

    def complete(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return {"role": "assistant", "content": "ok"}


def echo(key: str) -> memoryd.Agent:
    return memoryd.Agent(llm=Trivial(), memory=False)


def memoryd_round_trips(callers: int, calls: int) -> float:
    system = AgentSystem.start({"echo": echo}, name="bench-msg", recover="keep")
    for c in range(callers):
        system.call("echo", f"k{c}", "warm")

    def work(c: int) -> None:
        for _ in range(calls):
            system.call("echo", f"k{c}", "ping")

    elapsed = in_threads(callers, work)
    system.stop()
    return callers * calls / elapsed


def alternating(
    ours: Callable[[int], float], theirs: Callable[[int], float], count: int, rounds: int
) -> tuple[float, float]:
    """Both sides' rates over ``rounds`` alternating rounds of ``count`` each: the total
    count over the total time, so a garbage collection of the whole heap, which lands in
    one round of several, is paid by whichever side's allocations set it off."""
    ours_s = theirs_s = 0.0
    for _ in range(rounds):
        ours_s += count / ours(count)
        theirs_s += count / theirs(count)
    return rounds * count / ours_s, rounds * count / theirs_s


def memoryd_activations(count: int) -> float:
    system = AgentSystem.start({"echo": echo}, name="bench-act", recover="keep", max_active=count)
    elapsed = timed(lambda: [system.call("echo", f"k{n}", "hi") for n in range(count)])
    system.stop()
    return count / elapsed


@dataclass
class Ping:
    """AutoGen's message type (it routes by dataclass)."""

    text: str


def autogen_echo() -> Any:
    """AutoGen Core's agent that answers at once (imported only when measured; its
    handler's hints are resolved in this module's globals, hence the names put there)."""
    import autogen_core

    globals()["MessageContext"] = autogen_core.MessageContext

    class Echo(autogen_core.RoutedAgent):
        def __init__(self) -> None:
            super().__init__("echo")

        @autogen_core.message_handler
        async def on_text(self, message: Ping, ctx: MessageContext) -> Ping:  # noqa: F821
            return Ping(text="ok")

    return Echo


def autogen_round_trips(callers: int, calls: int) -> float:
    from autogen_core import AgentId, SingleThreadedAgentRuntime

    echo_agent = autogen_echo()

    async def scenario() -> float:
        runtime = SingleThreadedAgentRuntime()
        await echo_agent.register(runtime, "echo", echo_agent)
        runtime.start()
        for c in range(callers):
            await runtime.send_message(Ping("warm"), AgentId("echo", f"k{c}"))

        async def work(c: int) -> None:
            for _ in range(calls):
                await runtime.send_message(Ping("ping"), AgentId("echo", f"k{c}"))

        start = time.perf_counter()
        await asyncio.gather(*(work(c) for c in range(callers)))
        elapsed = time.perf_counter() - start
        await runtime.stop()
        return callers * calls / elapsed

    return asyncio.run(scenario())


def autogen_activations(count: int) -> float:
    from autogen_core import AgentId, SingleThreadedAgentRuntime

    echo_agent = autogen_echo()

    async def scenario() -> float:
        runtime = SingleThreadedAgentRuntime()
        await echo_agent.register(runtime, "echo", echo_agent)
        runtime.start()
        start = time.perf_counter()
        for n in range(count):
            await runtime.send_message(Ping("hi"), AgentId("echo", f"k{n}"))
        elapsed = time.perf_counter() - start
        await runtime.stop()
        return count / elapsed

    return asyncio.run(scenario())


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def objects_per_instance(count: int) -> float:
    """Objects the garbage collector tracks per live instance (activated and idle): what
    a whole-heap collection walks for each."""
    system = AgentSystem.start(
        {"echo": echo}, name="bench-objects", recover="keep", max_active=count + 1
    )
    system.call("echo", "warm", "hi")
    gc.collect()
    before = len(gc.get_objects())
    for n in range(count):
        system.call("echo", f"k{n}", "hi")
    gc.collect()
    per = (len(gc.get_objects()) - before) / count
    system.stop()
    return per


def many_instances(count: int, max_active: int) -> tuple[int, int, float, float, float]:
    """Threads before and at most during; RSS at start, peak and after passivation."""
    now = [0.0]
    system = AgentSystem.start(
        {"echo": echo},
        name="bench-many",
        recover="keep",
        max_active=max_active,
        idle_after_s=3600.0,
        clock=lambda: now[0],
    )
    system.call("echo", "warm", "hi")
    threads_before, rss_start = threading.active_count(), rss_mb()
    peak_threads, peak_rss = threads_before, rss_start
    for n in range(count):
        system.call("echo", f"k{n}", "hi")
        if n % 100 == 0:
            peak_threads = max(peak_threads, threading.active_count())
            peak_rss = max(peak_rss, rss_mb())
    now[0] = 3600.0  # every instance has been idle long enough
    system.passivate_idle()
    rss_end = rss_mb()
    system.stop()
    return threads_before, peak_threads, rss_start, peak_rss, rss_end


# -- report ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    runs = 20 if args.quick else 100
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, ours: float, theirs: float, unit: str) -> None:
        rows.append((what, f"{ours:,.1f} {unit}", f"{theirs:,.1f} {unit}", f"{ours / theirs:.2f}x"))
        print(f"  {what}: {rows[-1][1]} vs {rows[-1][2]} ({rows[-1][3]})", file=sys.stderr)

    fsync_notes = []
    round_notes = []
    for workers in (1, 8):
        mine = runs // workers if workers > 1 else runs
        measured = journal_on_off(
            workers,
            mine,
            1 if args.quick else ROUNDS if workers == 1 else THREAD_ROUNDS,
            anchor=dbos_steps,
            anchor_runs=max(mine // 4, 2),  # a round of DBOS takes about as long as ours
            # the least a journal that makes each step durable before the next can cost
            # these runs on callers' threads: one bare record a step, nothing of memoryd's
            bare=bare_rate if workers > 1 else None,
            # and the cheapest: each step's record flushed by its runner's own thread
            log=own_log_rate if workers > 1 else None,
        )
        assert measured.anchor is not None
        row(
            f"durable 10-step runs, {workers} concurrent (vs DBOS)",
            measured.on,
            measured.anchor,
            "runs/s",
        )
        row(f"journal on vs off, {workers} concurrent", *measured.median_round(), "runs/s")
        low, high = measured.spread()
        round_notes.append(
            f"journal on vs off, {workers} concurrent: the median of {len(measured.rounds)} "
            f"rounds; rounds ranged {low:.2f}x to {high:.2f}x; total over total time "
            f"{measured.on / measured.off:.2f}x"
        )
        fsync_notes.append(f"{workers} concurrent: {measured.fsyncs:.2f} fsyncs per 10-step run")
        if workers > 1:  # the journal's shape at this concurrency, with no memoryd at all
            off = measured.off
            step_s = 1 / (off * (STEPS + 1))  # the journal-off runs' own pace per step
            floor = floor_on_off(workers, runs // workers, STEPS, step_s, 1 if args.quick else 3)
            row(
                f"bare journal vs off, {workers} concurrent callers' threads (memoryd's runs, "
                "journal off, each step first making one 200-byte record durable in a bare "
                "LMDB file; the same rounds)",
                *measured.bare_median_round(),
                "runs/s",
            )
            round_notes.append(
                f"memoryd's journal vs the bare journal, {workers} concurrent: the median "
                f"of the rounds' ratios {measured.on_vs_bare():.2f}x"
            )
            row(
                f"own-thread log vs off, {workers} concurrent callers' threads (memoryd's "
                "runs, journal off, each step first appending one 200-byte record to its "
                "thread's own file and fdatasyncing it there; the same rounds)",
                *measured.log_median_round(),
                "runs/s",
            )
            round_notes.append(
                f"memoryd's journal vs the own-thread log, {workers} concurrent: the median "
                f"of the rounds' ratios {measured.on_vs_log():.2f}x"
            )
            halves = ", ".join(
                f"{name} {low:.2f}x to {high:.2f}x"
                for name, (low, high) in measured.middle_halves().items()
            )
            if halves:
                round_notes.append(
                    f"the middle half of the rounds against the journal-off side, {workers} "
                    f"concurrent: {halves}"
                )
            row(
                f"floor: journal on vs off, {workers} threads, bare LMDB group commit, "
                f"{step_s * 1e6:.0f} us steps (no memoryd)",
                floor.on,
                floor.off,
                "runs/s",
            )
    # The same 8 runs as coroutines of one event loop (`Agent.arun`): a run waiting for its
    # journal's write is a coroutine's wait, not a thread's.
    looped = journal_on_off(8, runs // 8, 1 if args.quick else ROUNDS, steps=loop_steps)
    row("journal on vs off, 8 concurrent, on one event loop", *looped.median_round(), "runs/s")
    low, high = looped.spread()
    round_notes.append(
        f"journal on vs off, 8 concurrent, on one event loop: the median of "
        f"{len(looped.rounds)} rounds; rounds ranged {low:.2f}x to {high:.2f}x; total over "
        f"total time {looped.on / looped.off:.2f}x"
    )
    fsync_notes.append(
        f"8 concurrent on one event loop: {looped.fsyncs:.2f} fsyncs per 10-step run"
    )
    # A model that takes about one commit to answer: the run makes its next LLM call while
    # its step's commit runs, so the journal's commits hide behind the model.
    slow = journal_on_off(1, max(runs // 5, 4), 1 if args.quick else 3, latency_s=MODEL_LATENCY_S)
    row(
        f"journal on vs off, 1 at a time, model answering in {MODEL_LATENCY_S * 1e3:g} ms",
        slow.on,
        slow.off,
        "runs/s",
    )
    count = 20 if args.quick else 100
    md_wall, md_inner, md_twice = recovery("memoryd", count)
    db_wall, db_inner, db_twice = recovery("dbos", count)
    row(
        f"recovery of {count} runs killed at step {KILL_AT} (process start to done)",
        1 / md_wall,
        1 / db_wall,
        "1/s",
    )
    row(f"recovery of {count} runs (after imports)", 1 / md_inner, 1 / db_inner, "1/s")
    calls = 500 if args.quick else 8000
    for callers in (1, 8):
        # Three alternating rounds of each side, total calls over total time: a round is
        # a fraction of a second, and one moment of load on the machine would decide it.
        ours_rt, theirs_rt = alternating(
            lambda n, c=callers: memoryd_round_trips(c, n // c),
            lambda n, c=callers: autogen_round_trips(c, n // c),
            calls,
            1 if args.quick else 3,
        )
        row(
            f"round trip, {callers} caller(s) (vs AutoGen send_message)",
            ours_rt,
            theirs_rt,
            "calls/s",
        )
    ours_act, theirs_act = alternating(
        memoryd_activations, autogen_activations, 1000, 1 if args.quick else 5
    )
    row("1,000 activations, one call each (vs AutoGen)", ours_act, theirs_act, "1/s")
    many = 2000 if args.quick else 10_000
    before, peak, rss0, rss_peak, rss_end = many_instances(many, 256)
    kept = objects_per_instance(1000)

    print("\n| measure | memoryd | anchor | ratio |\n|---|---|---|---|")
    for what, ours_s, theirs_s, ratio in rows:
        print(f"| {what} | {ours_s} | {theirs_s} | {ratio} |")
    print()
    for note in round_notes:
        print(f"- {note}")
    for note in fsync_notes:
        print(f"- fsyncs: {note} (k + 1 = {STEPS + 1} expected)")
    gil = put_cost()
    print(
        f"- py-lmdb put, {gil.count} each: {gil.alone_us:.1f} us alone, "
        f"{gil.beside_busy_us:.1f} us beside a busy thread ({gil.stalls} waited over 1 ms "
        f"for the interpreter lock, the longest {gil.longest_ms:.1f} ms; switch interval "
        f"{gil.switch_interval_ms:g} ms): why the store builds a batch while its writers "
        "wait (memoryd/store/group_commit.py)"
    )
    print(f"- recovery side effects written twice: memoryd {md_twice}, DBOS {db_twice}")
    print(f"- objects the garbage collector tracks per live instance: {kept:.1f}")
    print(
        f"- {many:,} instances, max_active=256: threads {before} before, at most {peak} "
        f"(limit 256 + {before}); RSS {rss0:.1f} MB at start, {rss_peak:.1f} MB peak, "
        f"{rss_end:.1f} MB once passivated ({rss_end - rss0:+.1f} MB)"
    )


if __name__ == "__main__":
    main()

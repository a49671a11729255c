"""Recovery on start: the orphaned runs of a system's agent types, resumed or discarded.

A run is orphaned when no live process holds it (its owner died, or its lease ran
out); a run belongs to an agent type when its conversation is ``"<type>/<key>"``, so
the store-wide journal names them without the application knowing any conversation id.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Literal, Protocol

import structlog

from memoryd.agent.agent import RunResult
from memoryd.agent.journal import RunJournal, RunRecord, check_run_id
from memoryd.agent.locks import active_runs
from memoryd.agents.naming import split_conversation
from memoryd.errors import ConflictError, UnknownRun
from memoryd.store.handle import StoreHandle

__all__ = ["Recover", "Recovering", "Recovery", "orphan", "orphaned_runs"]

log = structlog.get_logger(__name__)

Recover = Literal["resume", "discard", "keep"]


def orphaned_runs(store: StoreHandle, agent_types: Collection[str]) -> list[RunRecord]:
    """The store's pending runs that belong to ``agent_types`` and that no live process
    holds (store-wide, oldest first), found without knowing any conversation id.

    Args:
        store: The store.
        agent_types: The agent types.

    Returns:
        Their journal records.
    """
    now, here = time.time(), active_runs()
    return [
        record
        for record in RunJournal(store).pending()
        if split_conversation(record.conversation_id)[0] in agent_types
        and record.orphaned(now, record.run_id in here)
    ]


def orphan(store: StoreHandle, agent_types: Collection[str], run_id: object) -> RunRecord:
    """The orphaned run ``run_id`` of one of ``agent_types`` (`AgentSystem.resume` and
    `AgentSystem.discard` act on no other).

    Args:
        store: The store.
        agent_types: The agent types.
        run_id: The run id (from ``pending_runs()``).

    Returns:
        Its journal record.

    Raises:
        ValueError: ``run_id`` is not a non-empty str, or a live process holds the run
            (`RunJournal.orphan`).
        UnknownRun: No unfinished run of that id, or it runs on a conversation of
            none of ``agent_types``.
    """
    journal = RunJournal(store)
    record = journal.load(check_run_id(run_id))
    agent_type = split_conversation(record.conversation_id)[0]
    if agent_type not in agent_types or "/" not in record.conversation_id:
        raise UnknownRun(
            f"run {run_id!r} runs on conversation {record.conversation_id!r}, an instance "
            f"of none of the agent types {sorted(agent_types)}"
        )
    journal.check_orphaned(record)
    return record


class Recovering(Protocol):
    """What recovery needs of its agent system."""

    name: str
    store: StoreHandle

    @property
    def agent_types(self) -> Collection[str]:
        """The system's agent types."""

    def count(self, what: str) -> None:
        """Count an event in the system's stats."""


class Recovery:
    """The orphaned runs one start of a system found, and what became of them.

    Args:
        system: The agent system.
        resume: Queues the resumption of a run on its instance, activates the
            instance, and returns the future of the run's result.
    """

    def __init__(
        self, system: Recovering, *, resume: Callable[[RunRecord], Future[RunResult]]
    ) -> None:
        self._system = system
        self._resume = resume
        self._futures: list[Future[RunResult]] = []
        self._done = threading.Event()

    def start(self, policy: Recover) -> None:
        """Apply ``policy`` to the orphaned runs: resume them (in a background thread),
        discard them, or keep them pending."""
        system = self._system
        if policy == "keep":
            self._done.set()
            return
        runs = orphaned_runs(system.store, system.agent_types)
        if policy == "discard":
            for record in runs:
                try:
                    RunJournal(system.store).discard_orphan(record)
                except (ConflictError, ValueError):  # another process or run took it
                    continue
                system.count("discarded")
                log.info("run_discarded", system=system.name, run_id=record.run_id)
            self._done.set()
            return
        if runs:
            log.info("agent_system_recovering", system=system.name, runs=len(runs))
        threading.Thread(
            target=self._resume_all,
            args=(runs,),
            name=f"memoryd-agents-{system.name}-recover",
            daemon=True,
        ).start()

    def _resume_all(self, runs: list[RunRecord]) -> None:
        """Queue every run on its instance; activations are bounded by ``max_active``.
        Each run that fails is logged as it ends, and the whole recovery once its last
        run ended (``agent_system_recovered``: how many finished, how many failed)."""
        tally = _Tally(self._system.name, len(runs))
        try:
            for record in runs:
                future = self._resume(record)
                self._futures.append(future)
                future.add_done_callback(functools.partial(tally.ended, record.run_id))
        except Exception as exc:  # the system stopped meanwhile
            log.warning("agent_recovery_stopped", system=self._system.name, error=repr(exc))
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the runs this recovery resumed have finished.

        Args:
            timeout: The most seconds to wait (None: no limit).

        Returns:
            True when every one finished (with a result or an error).
        """
        if not self._done.wait(timeout):
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in self._futures:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.exception(timeout=left)
            except TimeoutError:
                return False
        return True


PROGRESS_EVERY_S = 5.0
"""A long recovery logs how far it is (``agent_system_recovery_progress``) at most this often."""


class _Tally:
    """The runs of one recovery as they end: each failure logged, how far it is at most
    every `PROGRESS_EVERY_S` while it lasts, the total at the end.

    Args:
        system: The system's name.
        runs: How many runs it resumes.
        clock: Monotonic seconds.
        every_s: The least time between two progress events.
    """

    def __init__(
        self,
        system: str,
        runs: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self._system = system
        self._runs = self._left = runs
        self._failed = 0
        self._clock = clock
        self._every_s = every_s
        self._started = self._told = clock()
        self._lock = threading.Lock()

    def ended(self, run_id: str, done: Future[RunResult]) -> None:
        """One resumed run ended (called in whichever thread ended it)."""
        error = None if done.cancelled() else done.exception()
        if error is not None:
            log.warning(
                "recovered_run_failed", system=self._system, run_id=run_id, error=repr(error)
            )
        now = self._clock()
        with self._lock:
            self._left -= 1
            self._failed += error is not None
            last = self._left == 0
            tell = not last and now - self._told >= self._every_s
            if tell:
                self._told = now
            done_runs, failed = self._runs - self._left, self._failed
        if last or tell:
            log.info(
                "agent_system_recovered" if last else "agent_system_recovery_progress",
                system=self._system,
                runs=self._runs,
                **({} if last else {"done": done_runs}),
                failed=failed,
                seconds=round(now - self._started, 3),
            )

"""Recovery on start: the orphaned runs of a system's agent types, resumed or discarded.

A run is orphaned when no live process holds it (its owner died, or its lease ran
out); a run belongs to an agent type when its conversation is ``"<type>/<key>"``, so
the store-wide journal names them without the application knowing any conversation id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Literal, Protocol

import structlog

from memoryd.agent.agent import RunResult
from memoryd.agent.journal import RunJournal, RunRecord
from memoryd.agent.locks import active_runs
from memoryd.agents.naming import split_conversation
from memoryd.store.handle import StoreHandle

__all__ = ["Recover", "Recovering", "Recovery", "orphaned_runs"]

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
            journal = RunJournal(system.store)
            for record in runs:
                journal.discard(record.run_id)
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
        """Queue every run on its instance; activations are bounded by ``max_active``."""
        try:
            for record in runs:
                self._futures.append(self._resume(record))
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

"""A hypothesis state machine: a store against a model, through crashes and reopens.

Rules: keyed and unkeyed appends (repeated keys must write nothing), clears,
reads, stop + start on the same path, ``supervisors.kill``, and one-shot crashes
of the actor before or after a commit. The map starts at 64 KiB so it grows.
Shared by ``tests/reliability/test_stateful.py`` (CI) and ``tools/soak.py``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

import memoryd
import supervisors
from memoryd import messages
from memoryd.store import actor, lookup
from tools.reliability.workload import relaxed_intensity

CIDS = st.sampled_from(["a", "b", "a/b", "a b", "é"])
KEYS = st.one_of(st.none(), st.sampled_from([f"k{i}" for i in range(12)]))
NAME = "stateful"


class StoreMachine(RuleBasedStateMachine):
    """Model: conversation -> contents; idempotency key -> (conversation, version)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memoryd-stateful-"))
        self.model: dict[str, list[str]] = {}
        self.versions: dict[str, int] = {}
        self.keys: dict[tuple[str, str], int] = {}
        self.counter = 0
        self.store = self._start()

    def _start(self) -> Any:
        return memoryd.LmdbStore.start(
            self.dir / "db", name=NAME, map_size=1 << 16, call_timeout_s=10.0
        )

    @rule(cid=CIDS, key=KEYS, size=st.integers(0, 3000), count=st.integers(1, 3))
    def add(self, cid: str, key: str | None, size: int, count: int) -> None:
        """Append; a repeated key returns the first version and writes nothing."""
        self.counter += 1
        body = [f"{self.counter}.{i}:" + "x" * size for i in range(count)]
        version = self.store.add(cid, [messages.user(b) for b in body], idempotency_key=key)
        if key is not None and (cid, key) in self.keys:
            assert version == self.keys[(cid, key)]
            return
        self.versions[cid] = self.versions.get(cid, 0) + 1
        assert version == self.versions[cid]
        self.model.setdefault(cid, []).extend(body)
        if key is not None:
            self.keys[(cid, key)] = version

    @rule(cid=CIDS)
    def clear(self, cid: str) -> None:
        """Clear: history empties; the version moves on unless it was empty already."""
        self.store.clear(cid)
        if self.model.get(cid):
            self.versions[cid] += 1
        self.model[cid] = []

    @rule()
    def reopen(self) -> None:
        """Stop and start on the same path: everything acknowledged is still there."""
        self.store.stop()
        self.store = self._start()

    @rule()
    def kill(self) -> None:
        """supervisors.kill: the actor crashes between messages and is restarted."""
        old = lookup.engine(NAME)
        supervisors.kill(NAME)
        deadline = time.monotonic() + 10
        while lookup.engine(NAME) in (None, old) and time.monotonic() < deadline:
            time.sleep(0.001)

    @rule(point=st.sampled_from(["before_commit", "after_commit"]), cid=CIDS, key=KEYS)
    def crash_during_add(self, point: str, cid: str, key: str | None) -> None:
        """One injected crash around a keyed commit; the handle's resend stores one copy."""
        key = key or f"crash{self.counter}"
        fired = []

        def once(where: str, name: str) -> None:
            if where == point and name == NAME and not fired:
                fired.append(where)
                raise RuntimeError(f"injected crash at {where}")

        actor.fault_hook = once
        try:
            self.add(cid, key, 10, 1)
        finally:
            actor.fault_hook = None
        assert fired

    @invariant()
    def matches_model(self) -> None:
        """Every conversation reads back exactly as the model says."""
        for cid, contents in self.model.items():
            assert [m["content"] for m in self.store.get(cid)] == contents
            assert self.store.version(cid) == self.versions.get(cid, 0)

    def teardown(self) -> None:
        """Stop the tree and remove the directory."""
        actor.fault_hook = None
        memoryd.shutdown()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_machine(chosen_seed: int, *, examples: int, steps: int) -> None:
    """Run ``StoreMachine`` for ``examples`` examples of up to ``steps`` steps each.

    No deadline, no example database, no health checks (the machine starts real
    stores, so every example is slow by hypothesis's measure).

    Args:
        chosen_seed: hypothesis's seed; the same seed replays the same examples.
        examples: how many examples.
        steps: the most rules run in one example.

    Raises:
        AssertionError: the store and the model disagreed (shrunk to the rules).
    """
    # The machine crashes its store far more often than the stock restart window
    # allows, and checks the model, not the backoff: restarts stay immediate.
    with relaxed_intensity():
        run_state_machine_as_test(
            seed(chosen_seed)(StoreMachine),
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )

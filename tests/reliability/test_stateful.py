"""Hypothesis state machine: store vs model through reopen, kill, map growth, actor crashes."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tools.reliability.stateful import StoreMachine

EXAMPLES = 250


def test_the_store_matches_its_model_through_crashes_and_reopens() -> None:
    """A hundred-odd examples of up to 12 steps, seed printed; a failure shrinks to the rules."""
    chosen = int(os.environ.get("MEMORYD_STATEFUL_SEED", "0")) or int.from_bytes(
        os.urandom(4), "big"
    )
    print(f"stateful seed {chosen} (rerun with MEMORYD_STATEFUL_SEED={chosen})")
    run_state_machine_as_test(
        seed(chosen)(StoreMachine),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=12,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )

"""Hypothesis state machine: store vs model through reopen, kill, map growth, actor crashes."""

from __future__ import annotations

import os

from tools.reliability.stateful import run_machine

EXAMPLES = 250


def test_the_store_matches_its_model_through_crashes_and_reopens() -> None:
    """A hundred-odd examples of up to 12 steps, seed printed; a failure shrinks to the rules."""
    chosen = int(os.environ.get("MEMORYD_STATEFUL_SEED", "0")) or int.from_bytes(
        os.urandom(4), "big"
    )
    print(f"stateful seed {chosen} (rerun with MEMORYD_STATEFUL_SEED={chosen})")
    run_machine(chosen, examples=EXAMPLES, steps=12)

"""A program that never calls shutdown() still exits, cleanly, with its writes kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import memoryd

SCRIPT = textwrap.dedent(
    """
    import logging
    import sys
    logging.basicConfig(level=logging.INFO)  # to see the atexit stop's store_closed
    import memoryd
    from memoryd import messages
    store = memoryd.LmdbStore.start(sys.argv[1], name="exit.test")
    store.add("c", [messages.user("kept")])
    print("WROTE", flush=True)
    # no shutdown(): the interpreter must still exit, and close the store on the way
    """
)


def test_a_program_without_shutdown_exits_and_keeps_its_writes(tmp_path: Path) -> None:
    """The supervision tree never keeps the interpreter alive; the atexit stop is clean."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "WROTE" in done.stdout
    assert "store_closed" in done.stderr  # stopped by the atexit handler
    store = memoryd.LmdbStore.start(tmp_path / "db", name="exit.reopen")
    assert [m["content"] for m in store.get("c")] == ["kept"]

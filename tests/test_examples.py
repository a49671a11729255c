"""Every example runs, twice, as a user runs it: a real process from a fresh directory,
with no model server configured (each falls back to its scripted model)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
EXPECTED = {
    "agent_with_memory.py": "agent: Order A-100 has shipped and arrives in about 2 days.",
    "custom_store.py": "",
    "langchain_history.py": "assistant: You are Alice.",
    "openai_agents_session.py": "assistant: You asked about order A-100.",
    "supervised_agents.py": "",
}
"""A line each example prints when it works (empty: its own test checks its output)."""


def run(name: str, cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORYD_"))}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_example_is_listed() -> None:
    assert sorted(EXPECTED) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_runs_twice(name: str, tmp_path: pathlib.Path) -> None:
    """Two runs in one directory both succeed and print what they promise."""
    for attempt in (1, 2):
        done = run(name, tmp_path)
        assert done.returncode == 0, (attempt, done.stdout[-2000:], done.stderr[-2000:])
        assert EXPECTED[name] in done.stdout, (attempt, done.stdout[-2000:])


def test_the_agent_example_keeps_its_memory_across_processes(tmp_path: pathlib.Path) -> None:
    """Given one data directory, the second process finds the first one's turns."""
    data = tmp_path / "data"
    first = run("agent_with_memory.py", tmp_path, str(data))
    second = run("agent_with_memory.py", tmp_path, str(data))
    assert first.returncode == second.returncode == 0, second.stderr[-2000:]
    stored = [line for line in second.stdout.splitlines() if line.startswith("  user ")]
    assert len(stored) == 2 * len(
        [line for line in first.stdout.splitlines() if line.startswith("  user ")]
    )


def test_make_demo_runs_twice_on_one_data_directory(tmp_path: pathlib.Path) -> None:
    """``make demo``'s command: both runs survive the actor crash they cause, losing nothing."""
    for attempt in (1, 2):
        done = subprocess.run(
            [sys.executable, "-m", "memoryd.demo", "--data", str(tmp_path / "demo")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (attempt, done.stderr[-2000:])
        assert "after a crash of the store actor: 4 messages, nothing lost" in done.stdout

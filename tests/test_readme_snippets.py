"""The README's Python blocks run as written, twice in a row: each block is run by a test
(here or where its feature is tested) or named as a fragment of a larger program."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.server.daemon import Daemon

ROOT = Path(__file__).resolve().parents[1]

RUN_ELSEWHERE = {"## Quick start": "tests/cli/test_readme_quickstart.py"}
"""Blocks run twice by the tests of their feature."""

FRAGMENTS = {
    "## Providers": "uses a store, a turn and a run id the surrounding text describes",
    "## Agents as supervised actors (`memoryd.agents`)": (
        "an overview with a model, tools and an event loop of the reader's own; "
        "examples/supervised_agents.py is the runnable version (tests/agents/test_example.py)"
    ),
    "## Framework integrations": "needs the frameworks' own chains and sessions",
}
"""Blocks that show calls inside a larger program, and why they cannot run alone."""


def python_blocks() -> dict[str, str]:
    """The README's Python blocks by the heading they sit under (one block per heading)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks: dict[str, str] = {}
    heading = ""
    pattern = r"^(#+ [^\n]*)$|^```python\n(.*?)^```"
    for match in re.finditer(pattern, text, flags=re.MULTILINE | re.DOTALL):
        if match.group(1):
            heading = match.group(1)
        else:
            assert heading not in blocks, f"two Python blocks under {heading!r}"
            blocks[heading] = match.group(2)
    return blocks


def run_twice(code: str, cwd: Path) -> list[str]:
    """Run ``code`` twice in ``cwd``; each run must exit 0. Returns both stdouts."""
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(done.stdout)
    return outputs


def test_every_block_is_run_or_named_as_a_fragment() -> None:
    """A new block must be run by a test, or say why it cannot run alone."""
    here = {heading for heading, _ in STANDALONE} | {"## The daemon", "## Writing a backend"}
    assert set(python_blocks()) == here | set(RUN_ELSEWHERE) | set(FRAGMENTS)


SHIPPED = "".join(f"customer-{o} Order {o} has shipped.\n" for o in ("A-100", "B-200", "C-300"))

STANDALONE = [
    ("## Kernel and agents", ["You are Alice\nYour order A-100 has shipped.\n"] * 2),
    ("### Async runs", [SHIPPED] * 2),
    ("## Logging", ["", ""]),
    ("## Supervision (`supervisors`)", ["", ""]),  # a library's events never reach stdout
]


@pytest.mark.parametrize(("heading", "expected"), STANDALONE)
def test_a_standalone_block_runs_twice(heading: str, expected: list[str], tmp_path: Path) -> None:
    """The block, alone in a fresh process, twice: the same output each time."""
    assert run_twice(python_blocks()[heading], tmp_path) == expected


def test_the_daemon_block_runs_twice_against_a_daemon_serving_data() -> None:
    """`memoryd serve --data data`, then the block from the same directory: the second
    run finds the first run's message and adds its own."""
    root = Path(tempfile.mkdtemp(prefix="md-readme-", dir="/tmp"))  # a short socket path
    daemon = Daemon(root / "data", extra=()).start()
    try:
        first, second = run_twice(python_blocks()["## The daemon"], root)
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)
    alice = "{'role': 'user', 'content': 'My name is Alice'}"
    assert (first, second) == (f"[{alice}]\n", f"[{alice}, {alice}]\n")


def test_the_backend_block_is_a_contract_suite_that_passes(tmp_path: Path) -> None:
    """Saved as a test module, the block collects the whole contract and a slice of it
    passes against the store it starts (all of it runs in tests/contract)."""
    (tmp_path / "test_my_store.py").write_text(python_blocks()["## Writing a backend"])
    listed = pytest_in(tmp_path, "--collect-only")
    assert listed.returncode == 0, listed.stdout[-3000:]
    collected = int(re.search(r"(\d+) tests? collected", listed.stdout).group(1))  # type: ignore[union-attr]
    assert collected > 50
    ran = pytest_in(tmp_path, "-k", "idempotency or fork or conflict")
    assert ran.returncode == 0, ran.stdout[-3000:]
    passed = int(re.search(r"(\d+) passed", ran.stdout).group(1))  # type: ignore[union-attr]
    assert 5 <= passed < collected


def pytest_in(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest on ``directory``'s ``test_my_store.py`` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_store.py", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

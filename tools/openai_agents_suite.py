#!/usr/bin/env python3
"""Run the OpenAI Agents SDK's own session tests against `MemorydSession`.

Fetches the source distribution of the installed ``openai-agents`` version from the
package registry (``pip download --no-binary :all:``), installs its test-only plugins
(pytest-asyncio, pytest-mock, inline-snapshot) into a folder of their own, and runs the
SDK test files that construct ``SQLiteSession`` with a pytest plugin that makes
``agents.SQLiteSession`` a `MemorydSession` (an ``EphemeralStore`` for ``:memory:``, an
``LmdbStore`` per database path otherwise): the tests are adapted only in what they
construct. Then it prints the counts and each failure, split into

* expected: tests of SQLite itself (its connections, locks, tables, corrupt rows, the
  exact ``"SQLiteSession is closed"`` wording) or of the SDK-private compaction snapshot
  hook (``_get_compaction_snapshot``, an atomic suffix replacement memoryd's append-only
  log does not offer), which do not apply to another backend;
* unexpected: everything else, a difference from ``SQLiteSession`` to look at.

The exit status is 1 when there is an unexpected failure. Needs the network (the
registry) once; the download is kept in ``--work`` and reused.

    python tools/openai_agents_suite.py
    python tools/openai_agents_suite.py --work /tmp/sdk-suite -k limit
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEST_FILES = (
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_compaction_suffix.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_max_turns.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_run_impl_resume_paths.py",
    "tests/test_soft_cancel.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_tool_failure_boundaries.py",
)
"""The SDK test files that construct a ``SQLiteSession``."""

TEST_PLUGINS = ("pytest-asyncio", "pytest-mock", "inline-snapshot", "executing", "asttokens")

EXPECTED = re.compile(
    r"no attribute '_(connections|connections_lock|lock|locked_connection|insert_items"
    r"|get_compaction_snapshot)'"
    r"|sqlite3\.|SQLiteSession is closed|Regex pattern did not match"
    r"|test_automatic_compaction_rollback_budget\[True\]"
    r"|compact to have been awaited once"
)
"""A failure that does not apply to another backend (see the module docstring)."""

PLUGIN = '''
"""Make the SDK tests construct MemorydSession where they construct SQLiteSession."""
from pathlib import Path
import agents, agents.memory
import memoryd
from memoryd.integrations.openai_agents import MemorydSession

_stores = {}


class SQLiteSession(MemorydSession):
    def __init__(self, session_id, db_path=":memory:", sessions_table="agent_sessions",
                 messages_table="agent_messages", session_settings=None):
        if str(db_path) == ":memory:":
            store = memoryd.EphemeralStore.start()
        else:
            key = str(Path(db_path).expanduser().resolve()) + ".memoryd"
            store = _stores.get(key) or _stores.setdefault(key, memoryd.LmdbStore.start(key))
        self.db_path = db_path
        super().__init__(session_id, store, session_settings)


agents.SQLiteSession = SQLiteSession
agents.memory.SQLiteSession = SQLiteSession
'''


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True)


def fetch(work: Path) -> Path:
    """The unpacked SDK source of the installed version, downloading it once."""
    version = metadata.version("openai-agents")
    source = work / f"openai_agents-{version}"
    if not source.is_dir():
        archive = work / f"openai_agents-{version}.tar.gz"
        if not archive.exists():
            _pip("download", "--no-binary", ":all:", "--no-deps", "-d", str(work),
                 f"openai-agents=={version}")  # fmt: skip
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
    plugins = work / "plugins"
    if not (plugins / "pytest_asyncio").is_dir():
        _pip("install", "--no-deps", "--target", str(plugins), *TEST_PLUGINS)
    (plugins / "memoryd_swap.py").write_text(PLUGIN)
    return source


def main(argv: list[str] | None = None) -> int:
    """Run the suite and print what failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "sdk-suite")
    parser.add_argument("-k", default="", help="pytest -k expression")
    args = parser.parse_args(argv)
    args.work = args.work.resolve()  # the tests run from the source folder, not from here
    args.work.mkdir(parents=True, exist_ok=True)
    source = fetch(args.work)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(args.work / "plugins"), str(ROOT)])
    env["COLUMNS"] = "400"  # whole failure reasons in the summary lines
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "memoryd_swap", "--tb=line", "-rf", *TEST_FILES]
    if args.k:
        command += ["-k", args.k]
    done = subprocess.run(command, check=False, cwd=source, env=env, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    failed = [line[len("FAILED ") :] for line in lines if line.startswith("FAILED ")]
    expected = [f for f in failed if EXPECTED.search(f)]
    unexpected = [f for f in failed if not EXPECTED.search(f)]
    summary = next((line for line in reversed(lines) if " in " in line and "passed" in line), "")
    print(f"openai-agents {metadata.version('openai-agents')}: {summary.strip('= ')}")
    print(f"failures that do not apply to another backend: {len(expected)}")
    for line in unexpected:
        print(f"UNEXPECTED {line}")
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        return 2
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

"""The command line loads only what its command needs: no server, agent, memory or
HTTP-server stack for ``get``, ``add`` or ``--help``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd

_HEAVY_PREFIXES = (
    "memoryd.server",
    "memoryd.agent",
    "memoryd.agents",
    "memoryd.memory",
    "memoryd.kernel",
    "memoryd.provider",
    "memoryd.llm",
    "memoryd.integrations",
)
_HEAVY_PACKAGES = {"starlette", "uvicorn", "anyio", "sse_starlette", "uvloop", "openai"}

_PROBE = """
import contextlib, io, json, sys
from memoryd.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(*args: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``memoryd *args``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if name.split(".")[0] in _HEAVY_PACKAGES
        or any(name == p or name.startswith(p + ".") for p in _HEAVY_PREFIXES)
    ]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    store = memoryd.LmdbStore.start(tmp_path / "data", name="cli-imports")
    store.add("c", [memoryd.messages.user("hello")])
    store.stop()
    return tmp_path / "data"


def test_get_loads_no_server_agent_memory_or_http_server(data: Path) -> None:
    """``memoryd get`` on a data directory reads without the serving or agent stacks."""
    modules = _loaded("--data", str(data), "--json", "get", "c")
    assert "memoryd.cli.commands" in modules  # the probe ran the command
    assert _heavy(modules) == []


def test_add_loads_no_server_agent_memory_or_http_server(data: Path) -> None:
    """``memoryd add`` writes without the serving or agent stacks."""
    modules = _loaded(
        "--data", str(data), "--json", "add", "c", "--role", "user", "--content", "hi"
    )
    assert _heavy(modules) == []


def test_help_loads_no_server_agent_memory_or_http_server() -> None:
    """``memoryd --help`` prints its usage without the serving or agent stacks."""
    assert _heavy(_loaded("--help")) == []


_STORE_STACK = ("structlog", "rich", "pykka", "lmdb", "supervisors", "asyncio", "ssl")


def test_get_through_a_daemon_loads_no_store_stack_or_structlog() -> None:
    """``memoryd get`` against a daemon loads the client only: no LMDB, actors, supervision
    tree, structlog (nor the rich it pulls in), asyncio or TLS."""
    from tests.server.daemon import Daemon

    with Daemon().start() as daemon:
        daemon.connect().add("c", [memoryd.messages.user("hello")])
        modules = _loaded("--address", daemon.address, "--json", "get", "c")
    assert "memoryd.client.remote" in modules  # the probe used the daemon
    assert [m for m in modules if m.split(".")[0] in _STORE_STACK] == []
    assert [m for m in modules if m in ("memoryd.app", "memoryd.logging")] == []
    started = ("memoryd.store.lookup", "memoryd.store.actor", "memoryd.store.lmdb.handle")
    assert [m for m in modules if m in started] == []


def test_get_on_a_data_directory_attaches_the_tree_and_routes_the_logs(data: Path) -> None:
    """With ``--data`` the store stack loads as needed: the tree that runs the store, and
    the logging that routes structlog into the standard loggers."""
    modules = _loaded("--data", str(data), "--json", "get", "c")
    assert {"memoryd.app", "memoryd.logging", "structlog", "lmdb"} <= set(modules)


def test_the_probe_sees_the_server_stack_when_serve_loads_it(tmp_path: Path) -> None:
    """``serve`` loads the server before it refuses a bad address: the probe sees it."""
    modules = _loaded("serve", "--data", str(tmp_path / "d"), "--listen", "not-an-address")
    assert "memoryd.server" in _heavy(modules)

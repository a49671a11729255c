"""The command line loads only what its command needs: no server, agent, memory or
HTTP-server stack for ``get``, ``add`` or ``--help``; and a read through a daemon, the
busiest command, loads exactly the modules of memoryd listed here and none of the
costly standard modules it does not need, so its start cannot grow back unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from tests.server.daemon import Daemon

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


def _named(modules: list[str], names: frozenset[str]) -> list[str]:
    """The modules that are one of ``names`` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def _memoryd(modules: list[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "memoryd"}


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


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """A daemon on a Unix socket and on TCP (with a token), holding conversation ``c``."""
    with Daemon(tcp=True).start() as running:
        running.connect().add("c", [memoryd.messages.user("hello")])
        yield running


def test_get_through_a_daemon_loads_no_store_stack_or_structlog(daemon: Daemon) -> None:
    """``memoryd get`` against a daemon loads the client only: no LMDB, actors, supervision
    tree, structlog (nor the rich it pulls in), asyncio or TLS."""
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


_COMMAND_LINE = frozenset(
    {
        "memoryd",
        "memoryd._after_import",
        "memoryd._event_kinds",
        "memoryd._json_values",
        "memoryd._lazy",
        "memoryd._message_batch",
        "memoryd._message_checks",
        "memoryd._shown",
        "memoryd._version",
        "memoryd.cli",
        "memoryd.cli.commands",
        "memoryd.cli.interrupts",
        "memoryd.cli.main",
        "memoryd.cli.output",
        "memoryd.cli.parser",
        "memoryd.errors",
        "memoryd.events",
        "memoryd.messages",
        "memoryd.protocol",
    }
)
"""Every module of memoryd that ``memoryd --help`` loads: the command line alone."""

_READ_THROUGH_A_DAEMON = _COMMAND_LINE | frozenset(
    {
        "memoryd._deadline",
        "memoryd._ids",
        "memoryd.client",
        "memoryd.client._answers",
        "memoryd.client._http",
        "memoryd.client.calls",
        "memoryd.client.remote",
        "memoryd.store",
        "memoryd.store._argument_checks",
        "memoryd.store.handle",
        "memoryd.store.requests",
        "memoryd.store.systems",
    }
)
"""Every module of memoryd that ``memoryd get`` through a daemon loads: the command line,
the daemon client, and the pure checks they share. A module added here costs every
command's start; a module that a change adds to the read path fails the test below."""


_RECORDS = frozenset({"dataclasses", "inspect", "ast", "dis", "tokenize", "memoryd._event_records"})
"""The event records and write requests: `dataclasses` and what it loads (``inspect``,
``ast``, ``dis``, ``tokenize``); built only by a command that writes or reads events."""

_NOT_FOR_A_SHORT_COMMAND = frozenset(
    {
        "memoryd.codec",
        "msgpack",
        "datetime",
        "shutil",
        "bz2",
        "lzma",
        "encodings.idna",
        "stringprep",
        "importlib.metadata",
        "ssl",
        "asyncio",
        "structlog",
        "pykka",
        "lmdb",
    }
)
"""What a one-call command does not load: the msgpack codec (it talks JSON to the
daemon), shutil and its archive modules (argparse's help width is read without it), the
IDNA codec (an address literal needs no name encoding), version lookups in the installed
package's metadata, TLS on a plain address, asyncio, and the store stack."""


def test_get_through_a_daemon_loads_exactly_the_read_path(daemon: Daemon, tmp_path: Path) -> None:
    """``memoryd get`` on a TCP address loads the modules of memoryd in
    `_READ_THROUGH_A_DAEMON`, no event records or write requests, and nothing of
    `_NOT_FOR_A_SHORT_COMMAND`."""
    token = tmp_path / "token"
    token.write_text(daemon.token or "", encoding="utf-8")
    modules = _loaded(
        "--address", f"http://{daemon.http}", "--token-file", str(token), "--json", "get", "c"
    )
    assert "memoryd.client.remote" in modules  # the probe read through the daemon
    assert _memoryd(modules) == _READ_THROUGH_A_DAEMON
    assert _named(modules, _RECORDS | _NOT_FOR_A_SHORT_COMMAND) == []


def test_add_through_a_daemon_loads_the_write_requests_and_no_codec(
    daemon: Daemon, tmp_path: Path
) -> None:
    """``memoryd add`` through a daemon builds its write request (so loads the records),
    and still nothing of `_NOT_FOR_A_SHORT_COMMAND`."""
    token = tmp_path / "token"
    token.write_text(daemon.token or "", encoding="utf-8")
    modules = _loaded(
        "--address",
        f"http://{daemon.http}",
        "--token-file",
        str(token),
        "--json",
        "add",
        "c",
        "--content",
        "x",
    )
    assert "memoryd.store._write_requests" in modules  # the probe wrote through the daemon
    assert _memoryd(modules) == _READ_THROUGH_A_DAEMON | {
        "memoryd._event_records",
        "memoryd.store._write_requests",
    }
    assert _named(modules, _NOT_FOR_A_SHORT_COMMAND) == []


@pytest.mark.parametrize("args", [("--help",), ("get", "--help")], ids=["top", "get"])
def test_help_loads_the_command_line_alone(args: tuple[str, ...]) -> None:
    """``memoryd --help`` and a command's ``--help`` load the modules of memoryd in
    `_COMMAND_LINE`: no client, no socket, no records, nothing of
    `_NOT_FOR_A_SHORT_COMMAND`."""
    modules = _loaded(*args)
    assert "memoryd.cli.parser" in modules  # the probe ran the command line
    assert _memoryd(modules) == _COMMAND_LINE
    assert _named(modules, frozenset({"socket", "httptools"}) | _RECORDS) == []
    assert _named(modules, _NOT_FOR_A_SHORT_COMMAND) == []

"""A ``memoryd serve`` that fails at start says why in one line, exits non-zero, and
leaves nothing it made behind: no new data directory (nor a parent it made), no new
store files, never a directory, a file or a store that was there before."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from tests.server.daemon import Daemon

STORE_FILES = {"data.mdb", "lock.mdb", "identity.json", "memoryd.lock"}


@pytest.fixture
def root() -> Iterator[Path]:
    """A short temp directory (a socket path under it must fit)."""
    path = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that another socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(*args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
    """``memoryd serve ARGS`` expected to exit at once (with ``token``, a TCP token in
    the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    if token:
        env["MEMORYD_TOKEN"] = "test-token"
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    """The one line for people on stderr (the others are JSON log events)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = []
    for line in done.stderr.splitlines():
        try:
            json.loads(line)
        except ValueError:
            lines.append(line)
    assert len(lines) == 1, done.stderr
    return lines[0]


def _entries(path: Path) -> set[str]:
    return {p.name for p in path.iterdir()}


@pytest.mark.parametrize(
    "case", ["socket_under_a_file", "socket_dir_missing", "port_taken", "host_unknown"]
)
def test_a_serve_that_cannot_listen_removes_the_directories_it_made(
    root: Path, taken_port: int, case: str
) -> None:
    """The data directory and the parents serve made are gone; the error names the
    socket or the address and the reason."""
    (root / "afile").write_text("not a directory")
    data = root / "a" / "b" / "N"
    args, needle = {
        "socket_under_a_file": (
            ["--socket", str(root / "afile" / "x.sock")],
            f"unix socket {root}/afile/x.sock: its directory {root}/afile is not a directory",
        ),
        "socket_dir_missing": (
            ["--socket", str(root / "nodir" / "x.sock")],
            f"its directory {root}/nodir does not exist",
        ),
        "port_taken": (
            ["--listen", f"127.0.0.1:{taken_port}"],
            f"cannot listen on 127.0.0.1:{taken_port}: the address is in use",
        ),
        "host_unknown": (
            ["--listen", "no-such-host.invalid:0"],
            "cannot listen on no-such-host.invalid:0: the host name does not resolve",
        ),
    }[case]
    done = serve("--data", str(data), *args)
    assert done.returncode == 1
    line = said(done)
    assert line.startswith("memoryd: cannot listen") and needle in line, line
    assert _entries(root) == {"afile"}
    assert (root / "afile").read_text() == "not a directory"


def test_a_serve_whose_redis_is_unreachable_removes_the_directory_it_made(root: Path) -> None:
    """``--backend redis://`` with nothing listening: exit 1 naming the Redis, no directory."""
    pytest.importorskip("redis")
    url = f"redis://127.0.0.1:{_closed_port()}"
    done = serve("--data", str(root / "N"), "--backend", url)
    assert done.returncode == 1
    assert url in said(done)
    assert _entries(root) == set()


def test_a_failed_start_keeps_a_directory_that_existed_and_its_files(
    root: Path, taken_port: int
) -> None:
    """In an existing directory the store files serve made go; the directory and a file
    that was in it stay."""
    data = root / "d"
    data.mkdir(mode=0o700)
    (data / "notes.txt").write_text("mine")
    done = serve("--data", str(data), "--listen", f"127.0.0.1:{taken_port}")
    assert done.returncode == 1
    said(done)
    assert _entries(data) == {"notes.txt"}
    assert (data / "notes.txt").read_text() == "mine"


def test_a_failed_start_keeps_a_store_that_holds_data(root: Path, taken_port: int) -> None:
    """A store that existed is left whole, and still holds what it held."""
    data = root / "d"
    with Daemon(data) as daemon:
        daemon.start().connect().add("c", [memoryd.messages.user("kept")])
    before = _entries(data)
    assert before >= STORE_FILES
    done = serve("--data", str(data), "--listen", f"127.0.0.1:{taken_port}")
    assert done.returncode == 1
    said(done)
    assert _entries(data) == before
    with Daemon(data) as daemon:
        assert daemon.start().connect().get("c")[0]["content"] == "kept"


def test_a_serve_on_a_directory_in_use_leaves_it_and_its_daemon_alone(root: Path) -> None:
    """A second serve of a served directory exits 1 naming the owner; the first daemon's
    files and socket stay, and it still answers."""
    data = root / "d"
    with Daemon(data) as daemon:
        store = daemon.start().connect()
        store.add("c", [memoryd.messages.user("one")])
        before = _entries(data)
        done = serve("--data", str(data))
        assert done.returncode == 1
        assert "is in use by process" in said(done)
        assert _entries(data) == before
        assert store.version("c") == 1


def test_a_socket_another_daemon_listens_on_is_refused(root: Path) -> None:
    """``--socket`` naming a live daemon's socket is refused: that daemon keeps its
    socket and still answers; the refused serve leaves no directory."""
    with Daemon(root / "first") as daemon:
        store = daemon.start().connect()
        done = serve("--data", str(root / "second"), "--socket", daemon.unix)
        assert done.returncode == 1
        assert f"another process listens on {daemon.unix}" in said(done)
        assert not (root / "second").exists()
        assert store.version("c") == 0


def test_a_file_at_the_socket_path_is_refused_and_kept(root: Path) -> None:
    """A regular file where the socket would go is never replaced."""
    target = root / "important.txt"
    target.write_text("keep me")
    done = serve("--data", str(root / "N"), "--socket", str(target))
    assert done.returncode == 1
    assert "is a file that is not a socket" in said(done)
    assert target.read_text() == "keep me"
    assert _entries(root) == {"important.txt"}


def test_a_data_path_in_a_symlink_loop_is_one_line(root: Path) -> None:
    """A ``--data`` that cannot be resolved is said in one line (exit 2), not a traceback."""
    (root / "loop").symlink_to("loop")
    done = serve("--data", str(root / "loop" / "x"))
    assert done.returncode == 2
    assert "Symlink loop" in said(done)


def test_a_data_path_under_a_file_is_one_line(root: Path) -> None:
    """``--data FILE/N``: exit 1 naming the file that is not a directory; the file stays."""
    (root / "afile").write_text("x")
    done = serve("--data", str(root / "afile" / "N"))
    assert done.returncode == 1
    assert f"{root}/afile is not a directory" in said(done)
    assert _entries(root) == {"afile"}


@pytest.mark.parametrize("content", [None, ""])
def test_a_bad_token_file_creates_nothing(root: Path, content: str | None) -> None:
    """A missing or empty token file: exit 2 in one line, no data directory."""
    token = root / "token"
    if content is not None:
        token.write_text(content)
    done = serve(
        "--data",
        str(root / "N"),
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(token),
        token=False,
    )
    assert done.returncode == 2
    assert "token file" in said(done)
    assert not (root / "N").exists()

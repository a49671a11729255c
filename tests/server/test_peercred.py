"""A client of another uid is refused on the Unix socket, even when its mode was loosened.

The daemon runs as the test's user (root in CI); the other client is a real
process running as ``nobody``, started after the socket (and the directories
above it) were opened to everyone.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from memoryd.server.peercred import PeerCredentials, peer_checked, peer_credentials, refusal
from tests.helpers import wait_until
from tests.server.daemon import Daemon

ADD = json.dumps({"messages": [{"role": "user", "content": "from another uid"}]})

# The other user's client: stdlib only, so it runs under the system interpreter
# without reading the test's virtualenv.
_CLIENT = r"""
import json, socket, sys
path, cid, body = sys.argv[1], sys.argv[2], sys.argv[3].encode()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(30)
sock.connect(path)
sock.sendall(
    f"POST /v1/conversations/{cid}/messages HTTP/1.1\r\nhost: localhost\r\n"
    f"content-type: application/json\r\nconnection: close\r\n"
    f"content-length: {len(body)}\r\n\r\n".encode() + body
)
data = b""
while chunk := sock.recv(65536):
    data += chunk
head, _, payload = data.partition(b"\r\n\r\n")
print(json.dumps({"status": int(head.split()[1]), "body": json.loads(payload)}))
"""


def _system_python() -> str | None:
    found = shutil.which("python3", path="/usr/bin:/bin")
    return found


def _run_as(uid: int, gid: int, *args: str) -> dict[str, object]:
    python = _system_python()
    assert python is not None
    done = subprocess.run(
        [python, "-I", "-S", "-c", _CLIENT, *args],
        user=uid,
        group=gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    """A fresh daemon for each test, on its Unix socket (a test may loosen it)."""
    with Daemon(extra=()).start() as running:
        yield running


def _open_to_everyone(daemon: Daemon) -> None:
    """Loosen the socket to 0666 and let anyone through the directories above it."""
    for directory in (daemon.root, daemon.data):
        os.chmod(directory, 0o711)
    os.chmod(daemon.unix, 0o666)


def _require(*, other_uid: bool) -> None:
    """Fail, naming what is missing, where this test cannot prove its point.

    `.ci/run` provides all of it (Linux, root, Debian's python3); a machine without it
    fails these tests rather than skipping them, so a green run always means proven.
    """
    missing = []
    if not hasattr(socket, "SO_PEERCRED"):
        missing.append("SO_PEERCRED (Linux)")
    if other_uid and os.geteuid() != 0:
        missing.append("root, to run a client as another uid")
    if other_uid and _system_python() is None:
        missing.append("/usr/bin/python3 for the other user's client")
    if missing:
        pytest.fail("this test needs " + ", ".join(missing) + "; run it as .ci/run does")


@pytest.fixture
def other_uid() -> None:
    _require(other_uid=True)


@pytest.fixture
def peercred() -> None:
    _require(other_uid=False)


@pytest.mark.usefixtures("other_uid")
def test_a_client_of_another_uid_is_refused_even_on_a_world_writable_socket(
    daemon: Daemon,
) -> None:
    """nobody connects through a 0666 socket: 403 naming the uid, nothing written; root works."""
    nobody = pwd.getpwnam("nobody")
    _open_to_everyone(daemon)
    answer = _run_as(nobody.pw_uid, nobody.pw_gid, daemon.unix, "intruder", ADD)
    print(f"nobody's add: {answer}")
    assert answer["status"] == 403
    body = answer["body"]
    assert isinstance(body, dict)
    assert body["error"]["type"] == "Forbidden"
    assert f"uid {nobody.pw_uid} are refused" in body["error"]["message"]
    store = daemon.connect()
    assert store.version("intruder") == 0
    assert store.conversations() == []
    # the daemon's own user still works on the same loosened socket
    store.add("owner", [{"role": "user", "content": "mine"}])
    assert store.version("owner") == 1
    assert any("peer_refused" in line for line in daemon.stderr_lines)


@pytest.mark.usefixtures("other_uid")
def test_the_same_uid_in_another_process_is_served(daemon: Daemon) -> None:
    """A separate client process of the daemon's own uid writes normally (the check is by uid)."""
    _open_to_everyone(daemon)
    answer = _run_as(os.geteuid(), os.getegid(), daemon.unix, "same-uid", ADD)
    assert answer["status"] == 200, answer
    assert daemon.connect().version("same-uid") == 1


def _protocols() -> list[type[asyncio.Protocol]]:
    found: list[type[asyncio.Protocol]] = [H11Protocol]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional
        return found
    return [*found, HttpToolsProtocol]


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"ok": True})(scope, receive, send)


@pytest.mark.usefixtures("other_uid")
@pytest.mark.parametrize("base", _protocols(), ids=lambda cls: cls.__name__)
def test_each_uvicorn_protocol_refuses_another_uid(base: type[asyncio.Protocol]) -> None:
    """The hook works on both of uvicorn's HTTP/1.1 protocols (h11 and httptools)."""
    root = Path(tempfile.mkdtemp(prefix="pc-", dir="/tmp"))
    os.chmod(root, 0o711)
    path = str(root / "s")
    server = uvicorn.Server(
        uvicorn.Config(
            _ok,
            uds=path,
            http=peer_checked(base, os.geteuid()),
            loop="asyncio",
            lifespan="off",
            log_config=None,
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=10)
        os.chmod(path, 0o666)
        nobody = pwd.getpwnam("nobody")
        refused = _run_as(nobody.pw_uid, nobody.pw_gid, path, "x", "{}")
        served = _run_as(os.geteuid(), os.getegid(), path, "x", "{}")
    finally:
        server.should_exit = True
        thread.join(10)
        shutil.rmtree(root, ignore_errors=True)
    assert refused["status"] == 403, refused
    assert served == {"status": 200, "body": {"ok": True}}


@pytest.mark.usefixtures("peercred")
def test_peer_credentials_are_read_from_a_connected_unix_socket() -> None:
    """SO_PEERCRED names this very process at the other end of a socket pair."""
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_credentials(left) == PeerCredentials(
            pid=os.getpid(), uid=os.geteuid(), gid=os.getegid()
        )


def test_a_tcp_socket_has_no_peer_credentials() -> None:
    """TCP peers are not judged by uid (the token guards TCP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert peer_credentials(sock) is None


def test_refusal_lets_the_same_uid_and_root_in_and_names_any_other_uid() -> None:
    """The pure rule: own uid and root pass, unknown peers pass (mode decides), others refused."""
    assert refusal(PeerCredentials(pid=1, uid=1000, gid=1000), 1000) is None
    assert refusal(PeerCredentials(pid=1, uid=0, gid=0), 1000) is None
    assert refusal(None, 1000) is None
    reason = refusal(PeerCredentials(pid=1, uid=65534, gid=65534), 1000)
    assert reason is not None
    assert "uid 65534" in reason and "uid 1000" in reason


def test_the_socket_file_is_created_0600(daemon: Daemon) -> None:
    """Without loosening, the socket itself already keeps other users out."""
    assert Path(daemon.unix).stat().st_mode & 0o777 == 0o600

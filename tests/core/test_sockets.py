"""`unix_socket_state` tells what is at a socket's path, with real sockets and files."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

from memoryd._sockets import unix_socket_state


def test_each_thing_at_a_path_is_told_apart() -> None:
    """Nothing, a file, a directory, a socket nobody listens on (left by a closed
    listener), and one a process listens on."""
    root = Path(tempfile.mkdtemp(prefix="socks-", dir="/tmp"))  # short: a socket path fits
    assert unix_socket_state(root / "none") == "absent"
    assert unix_socket_state(root / "none" / "deeper") == "absent"
    (root / "file").write_text("x")
    assert unix_socket_state(root / "file") == "file"
    (root / "dir").mkdir()
    assert unix_socket_state(root / "dir") == "directory"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(root / "s"))
    listening.listen(1)
    try:
        assert unix_socket_state(root / "s") == "listening"
    finally:
        listening.close()
    assert unix_socket_state(root / "s") == "stale"  # the file stays, nobody listens

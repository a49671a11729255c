"""What is at a Unix socket's path: the one probe the daemon (before it binds) and the
command line (before it opens a data directory itself) both make. Pure standard
library, cheap to import."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Literal

__all__ = ["SocketState", "unix_socket_state"]

SocketState = Literal["absent", "directory", "file", "stale", "listening"]


def unix_socket_state(path: Path, timeout_s: float = 2.0) -> SocketState:
    """What is at ``path``: nothing, a directory, a file that is not a socket, a socket
    nobody listens on (a killed daemon's), or one a process accepts connections on.

    Raises:
        OSError: ``path`` cannot be checked (permissions, a connect that fails for
            another reason than nobody listening), naming the reason.
    """
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "absent"
    if not stat.S_ISSOCK(mode):
        return "directory" if stat.S_ISDIR(mode) else "file"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout_s)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return "stale"
    return "listening"

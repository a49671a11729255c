"""ServerConfig: how the daemon listens and what it accepts, as one validated value.

The bind policy lives here, in one pure check: TCP needs a token, except on a
loopback address with ``no_auth`` (which logs a warning); a non-loopback address
without a token is refused with an error that says what to do.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "DECODE_THREADS",
    "DEFAULT_HEAD_TIMEOUT_S",
    "MAX_HEAD_TIMEOUT_S",
    "MIN_HEAD_TIMEOUT_S",
    "ServerConfig",
    "is_loopback",
    "parse_listen",
]

DECODE_THREADS = 2
"""How many large request bodies are decoded at once (each in a worker thread)."""

_MAX_UNIX_PATH = 107


def parse_listen(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:8080`` for IPv6; port 0 picks a free port).

    Raises:
        ValueError: not of that form, or the port is outside 0..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"--listen takes HOST:PORT (e.g. 127.0.0.1:8765), not {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"port {port} is out of range 0..65535")
    return host, port


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _positive_int(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, not {value!r}")


DEFAULT_HEAD_TIMEOUT_S = 10.0
"""How long a connection may take to send a request's head unless told otherwise."""

MIN_HEAD_TIMEOUT_S = 0.1
"""The shortest head timeout a daemon takes: a head needs a few round trips to arrive."""

MAX_HEAD_TIMEOUT_S = 3600.0
"""The longest head timeout a daemon takes: a connection may hold a slot no longer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerConfig:
    """How the daemon serves a data directory.

    Attributes:
        data: the data directory (the default store lives in it; named stores under
            ``data/stores/<name>``).
        socket_path: the Unix socket (default ``data/memoryd.sock``), created 0600.
        listen: a TCP ``(host, port)`` to listen on as well, or None.
        token: the bearer token TCP clients must send (the Unix socket, 0600, needs none).
        no_auth: serve TCP without a token; only allowed on a loopback address.
        max_body_bytes: the largest request body accepted (413 above it).
        max_messages_per_add: the most messages one add may carry.
        max_message_bytes: the largest message the daemon's stores accept.
        threads: worker threads for store calls (the event loop never waits on a store).
        tail_waiters: how many ``tail`` long-polls may wait at once.
        grace_s: on shutdown, how long in-flight requests get to finish.
        allowed_origins: browser origins allowed to call the API (none by default).
        max_stores: the most named stores that may run at once (a write to one more
            is refused; lowered at start when file descriptors cannot hold as many).
        fault_injection: enable ``POST /v1/stores/{name}/crash`` (tests only).
        backend: ``redis://``, ``rediss://`` or ``unix://`` URL of a Redis (or Redis
            Cluster node) holding every store, or None for LMDB in ``data``.
        require_durable: refuse a ``backend`` that does not fsync every write
            (``RedisStore.start(require_durable=...)``); False only with a backend.
        head_timeout_s: how long a connection may take to send a request's head, and
            how long it may stay idle between requests (408 and closed after it).
    """

    data: Path
    socket_path: Path | None = None
    listen: tuple[str, int] | None = None
    token: str | None = None
    no_auth: bool = False
    max_body_bytes: int = 64 << 20
    max_messages_per_add: int = 10_000
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    threads: int = 32
    tail_waiters: int = 256
    grace_s: float = 10.0
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    max_stores: int = 256
    fault_injection: bool = False
    backend: str | None = None
    require_durable: bool = True
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.require_durable and self.backend is None:
            raise ValueError(
                "--redis-not-durable applies to a Redis backend only: pass --backend too"
            )
        if self.backend is not None and not self.backend.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError(
                f"--backend must be a redis://, rediss:// or unix:// URL, not {self.backend!r}"
            )
        object.__setattr__(self, "data", Path(self.data))
        if self.socket_path is None:
            object.__setattr__(self, "socket_path", self.data / "memoryd.sock")
        sock = self.unix_socket
        if len(str(sock).encode()) > _MAX_UNIX_PATH:
            raise ValueError(
                f"the socket path {str(sock)!r} is longer than the {_MAX_UNIX_PATH} bytes a "
                "Unix socket allows; pass --socket with a shorter path"
            )
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ValueError("the token must be a non-empty str")
        if self.token is not None and self.no_auth:
            raise ValueError("pass either a token or --no-auth, not both")
        if self.listen is not None:
            host, _ = self.listen
            if self.token is None and not self.no_auth:
                where = "a loopback" if is_loopback(host) else "a public"
                raise ValueError(
                    f"refusing to listen on {where} address {host} without a token: set "
                    "MEMORYD_TOKEN or pass --token-file (on 127.0.0.1 you may pass --no-auth "
                    "instead)"
                )
            if self.no_auth and not is_loopback(host):
                raise ValueError(
                    f"--no-auth is only allowed on a loopback address, not {host}: "
                    "set MEMORYD_TOKEN or pass --token-file"
                )
        for name in ("max_body_bytes", "max_messages_per_add", "max_message_bytes"):
            _positive_int(getattr(self, name), name)
        for name in ("threads", "tail_waiters", "max_stores"):
            _positive_int(getattr(self, name), name)
        if not isinstance(self.grace_s, int | float) or not math.isfinite(self.grace_s):
            raise ValueError(f"grace_s must be a finite number, not {self.grace_s!r}")
        timeout = self.head_timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not MIN_HEAD_TIMEOUT_S <= timeout <= MAX_HEAD_TIMEOUT_S
        ):
            raise ValueError(
                f"head_timeout_s (--head-timeout) must be a number of seconds from "
                f"{MIN_HEAD_TIMEOUT_S:g} to {MAX_HEAD_TIMEOUT_S:g}, not {timeout!r}"
            )

    @property
    def unix_socket(self) -> Path:
        """The Unix socket path."""
        assert self.socket_path is not None
        return self.socket_path

    @property
    def tcp_needs_token(self) -> bool:
        """True when TCP requests must carry the token."""
        return self.token is not None

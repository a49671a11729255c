"""Peer credentials on the Unix socket: a client of another uid is refused.

The socket is created 0600, so the kernel already keeps other users out; this is
the second wall, for when that mode was loosened (a ``chmod 666`` to share the
daemon, a directory with default ACLs). On Linux the kernel records who called
``connect()`` (``SO_PEERCRED``); a connection whose uid is neither the daemon's
nor root's gets a 403 JSON error for every request on it, and no endpoint runs.
Root is let in because it can read the data files directly anyway (as ssh-agent
does). Elsewhere (no ``SO_PEERCRED``) the 0600 mode is the only guard.

The check runs once per connection, at accept time: ``peer_checked(base, uid)``
builds a subclass of uvicorn's HTTP protocol whose ``connection_made`` reads the
credentials and, for a refused peer, answers every request on that connection
with the refusal instead of the app.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.types import Receive, Scope, Send

from memoryd.protocol import error_to_wire
from memoryd.server.http import HttpError, error_response

__all__ = ["PeerCredentials", "peer_checked", "peer_credentials", "refusal"]

log = structlog.get_logger("memoryd.server")

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True, kw_only=True, slots=True)
class PeerCredentials:
    """Who connected: the process, user and group the kernel recorded at ``connect()``."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: Any) -> PeerCredentials | None:
    """The credentials of the process at the other end of a Unix socket.

    Args:
        sock: a connected socket (or uvloop's socket-like object) with ``getsockopt``.

    Returns:
        The peer's credentials, or None where the platform cannot tell (no
        ``SO_PEERCRED``) or the socket is not a Unix socket.
    """
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or getattr(sock, "family", None) != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size)
    except OSError:
        return None
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


def refusal(peer: PeerCredentials | None, own_uid: int) -> str | None:
    """Why a peer is refused, or None when it may talk to the daemon.

    Args:
        peer: the peer's credentials (None: unknown, so the socket's mode decides).
        own_uid: the daemon's effective uid.

    Returns:
        A message naming the reason and what to do, or None.
    """
    if peer is None or peer.uid in (own_uid, 0):
        return None
    return (
        f"connections from uid {peer.uid} are refused: this daemon runs as uid {own_uid} "
        "and serves only its own user (and root) on its Unix socket; run the client as "
        "that user, or start a daemon of your own"
    )


class _Refuse:
    """An ASGI app that answers every request with the peer refusal (403)."""

    def __init__(self, message: str) -> None:
        error = HttpError(403, "Forbidden", message)
        self._body = error_to_wire(error, type_name=error.type_name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await error_response(403, self._body)(scope, receive, send)


def peer_checked(base: type[asyncio.Protocol], own_uid: int) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's HTTP protocol ``base`` that checks each Unix peer's uid.

    Args:
        base: uvicorn's protocol class (``HttpToolsProtocol`` or ``H11Protocol``),
            which keeps the app it serves in ``self.app``.
        own_uid: the daemon's effective uid.

    Returns:
        The protocol class to pass as ``uvicorn.Config(http=...)``.
    """

    class PeerChecked(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            peer = peer_credentials(sock) if sock is not None else None
            reason = refusal(peer, own_uid)
            if reason is not None and peer is not None:
                log.warning("peer_refused", uid=peer.uid, pid=peer.pid, own_uid=own_uid)
                self.app = _Refuse(reason)

    PeerChecked.__name__ = PeerChecked.__qualname__ = f"PeerChecked{base.__name__}"
    return PeerChecked

"""Server: the supervised network listener ("memoryd.server" in the app's tree).

``init`` binds the sockets in the actor's thread (so a taken port fails the
start with a clear error), shares the file descriptors out (`memoryd.server.limits`)
and runs one uvicorn server per listener, each with its own connection budget, in a
thread of its own with its own event loop. ``terminate`` stops accepting, lets
in-flight requests finish within the grace period (answering any still running near
its end with a JSON error: `memoryd.server.calls.Drain`), and removes the Unix socket. If
the uvicorn thread ends on its own, the actor crashes and its supervisor starts a new listener.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog
import uvicorn
from starlette.types import ASGIApp

from memoryd._sockets import unix_socket_state
from memoryd.server.application import create_app
from memoryd.server.calls import ServerContext
from memoryd.server.config import ServerConfig
from memoryd.server.lane import FastLane
from memoryd.server.limits import MAX_HEAD_BYTES, bounded, fd_budget, raise_fd_limit
from memoryd.server.metrics import Metrics
from memoryd.server.peercred import peer_checked
from memoryd.server.stores import StoreRegistry
from supervisors import Exit, SupervisedActor, kill

__all__ = ["SERVER", "Server", "bind_tcp", "bind_unix"]

SERVER = "memoryd.server"

log = structlog.get_logger("memoryd.server")


def _in_the_way(path: Path) -> str | None:
    """Why ``path`` may not become the daemon's socket, or None (nothing there, or a
    stale socket a killed daemon left)."""
    try:
        state = unix_socket_state(path)
    except OSError as exc:
        return (
            f"{path} cannot be checked ({exc.strerror or exc}): remove it, or pass another --socket"
        )
    if state in ("absent", "stale"):
        return None  # binding says what is wrong with its directory, or replaces it
    if state in ("directory", "file"):
        kind = "a directory" if state == "directory" else "a file that is not a socket"
        return (
            f"{path} is {kind}, which the socket would replace: remove it, or pass another --socket"
        )
    return f"another process listens on {path}: stop it, or pass another --socket (or --data)"


def bind_unix(path: Path) -> socket.socket:
    """A listening Unix socket at ``path``, mode 0600 from the moment it appears.

    It is bound in a private 0700 directory beside ``path``, set to 0600, then
    renamed into place, so no other user can ever connect to it. A stale socket
    file left by a killed daemon is replaced; anything else at ``path`` (a file, a
    directory, a socket another process listens on) is refused.

    Raises:
        OSError: it cannot be bound; the message names the path and the reason.
    """
    reason = _in_the_way(path)
    if reason is not None:
        raise FileExistsError(errno.EEXIST, f"cannot listen on the unix socket {path}: {reason}")
    try:
        return _bind_unix(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not path.parent.is_dir():
            why = f"its directory {path.parent} " + (
                "is not a directory" if path.parent.exists() else "does not exist"
            )
        else:
            why = exc.strerror or str(exc)
        raise OSError(exc.errno, f"cannot listen on the unix socket {path}: {why}") from None


def _bind_unix(path: Path) -> socket.socket:
    private = Path(tempfile.mkdtemp(prefix=".sock-", dir=path.parent))
    temp = private / "s"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(temp))
        os.chmod(temp, 0o600)
        sock.listen(1024)
        os.replace(temp, path)
    except BaseException:
        sock.close()
        raise
    finally:
        temp.unlink(missing_ok=True)
        private.rmdir()
    return sock


_TCP_REASONS = {
    errno.EADDRINUSE: "the address is in use: stop what listens on it, or choose another port",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def bind_tcp(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one).

    Raises:
        OSError: it cannot be bound; the message names the address and the reason.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if isinstance(exc, socket.gaierror):
            why = f"the host name does not resolve ({exc.strerror})"
        else:
            why = _TCP_REASONS.get(exc.errno or 0) or exc.strerror or str(exc)
        raise OSError(exc.errno, f"cannot listen on {where}: {why}") from None
    except BaseException:
        sock.close()
        raise
    return sock


def _uvicorn_grace(grace_s: float) -> int:
    """The grace period uvicorn is given, in whole seconds (it takes an int)."""
    return max(int(grace_s), 1)


def _cut_after(grace_s: float) -> float:
    """How long after the stop the requests still running are answered with an error
    (`memoryd.server.calls.Drain`): a second before uvicorn would cancel them (half the
    grace period when it is under two seconds), so the answer is written in time."""
    grace = _uvicorn_grace(grace_s)
    return max(grace - 1.0, grace / 2)


class Server(SupervisedActor):
    """The HTTP listener as a supervised child.

    Args:
        config: what to listen on and accept.
        stores: the daemon's stores.
        ready: called once listening, with ``{"unix": path, "tcp": "host:port"}``.
    """

    start_timeout_s = 30.0

    def __init__(
        self,
        config: ServerConfig,
        stores: StoreRegistry,
        ready: Callable[[dict[str, str]], None] | None = None,
    ) -> None:
        super().__init__(name=SERVER)
        self.config = config
        self.stores = stores
        self._ready = ready
        self._ctx: ServerContext | None = None
        self._servers: list[uvicorn.Server] = []
        self._thread: threading.Thread | None = None
        self._sockets: list[socket.socket] = []
        self._stopping = False
        self.addresses: dict[str, str] = {}

    def init(self) -> None:
        """Bind the sockets and start serving. Runs in the actor's thread."""
        cfg = self.config
        self._sockets.append(bind_unix(cfg.unix_socket))
        self.addresses["unix"] = str(cfg.unix_socket)
        if cfg.listen is not None:
            tcp = bind_tcp(*cfg.listen)
            self._sockets.append(tcp)
            host, port = tcp.getsockname()[:2]
            self.addresses["tcp"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._ctx = ServerContext(config=cfg, stores=self.stores, metrics=Metrics(self.stores))
        budget = fd_budget(raise_fd_limit(), max_stores=cfg.max_stores, tcp=len(self._sockets) > 1)
        self.stores.limit(budget.stores)
        log.info(
            "fd_budget",
            nofile=budget.nofile,
            max_stores=budget.stores,
            unix_connections=budget.unix,
            tcp_connections=budget.tcp,
        )
        app = create_app(self._ctx)
        # one uvicorn server per listener, each with its own connection budget, so a
        # flood on TCP never takes the Unix socket's connections; the first runs the
        # app's lifespan for both
        self._servers = [
            uvicorn.Server(self._uvicorn_config(app, limit, lifespan=i == 0))
            for i, limit in enumerate((budget.unix, budget.tcp)[: len(self._sockets)])
        ]
        self._thread = threading.Thread(target=self._serve, name="memoryd-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not all(server.started for server in self._servers):
            if not self._thread.is_alive():
                raise RuntimeError("the HTTP server stopped while starting; see the log")
            if time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start in time")
            time.sleep(0.005)
        log.info("server_listening", **self.addresses)
        if self._ready is not None:
            self._ready(dict(self.addresses))

    def _uvicorn_config(self, app: ASGIApp, limit: int, *, lifespan: bool) -> uvicorn.Config:
        return uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on" if lifespan else "off",
            loop="auto",  # uvloop when installed
            # httptools, with bounded request heads; refuses Unix peers of another uid
            http=peer_checked(
                bounded(limit, FastLane.over(app), self.config.head_timeout_s), os.geteuid()
            ),
            ws="none",
            proxy_headers=False,  # clients connect directly: no proxy-headers pass per request
            server_header=False,  # one header less for every client to parse; names no version
            timeout_graceful_shutdown=_uvicorn_grace(self.config.grace_s),
            limit_concurrency=limit + 1,  # the protocol itself drops connections past limit
            timeout_keep_alive=30,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )

    def _serve(self) -> None:
        servers = self._servers

        async def serve_all() -> None:
            pairs = zip(servers, self._sockets, strict=True)
            await asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in pairs))

        try:
            with asyncio.Runner(loop_factory=servers[0].config.get_loop_factory()) as runner:
                runner.run(serve_all())
        except BaseException as exc:  # uvicorn exits with SystemExit on startup failures
            log.error("server_thread_failed", error=repr(exc))
        finally:
            if not self._stopping:
                log.error("server_thread_exited")
                kill(self.actor_ref, "the HTTP server thread exited")

    def terminate(self, exit: Exit) -> None:
        """Stop accepting, finish in-flight requests, release the sockets. Actor's thread."""
        self._stopping = True
        if self._ctx is not None:
            self._ctx.stopping.set()
            self._ctx.drain.stop(_cut_after(self.config.grace_s))
        thread = self._thread
        if thread is not None and thread.is_alive():
            for server in self._servers:
                server.should_exit = True
            thread.join(self.config.grace_s + 5.0)
            if thread.is_alive():
                for server in self._servers:
                    server.force_exit = True
                thread.join(5.0)
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        if "unix" in self.addresses:
            with_path = Path(self.addresses["unix"])
            try:
                if with_path.is_socket():
                    with_path.unlink()
            except OSError:
                pass
        log.info("server_stopped", reason=exit.describe())

"""``memoryd serve``: run the supervision tree with a listener until SIGTERM, SIGINT or SIGHUP.

The default store (durable in the data directory) starts first, then the
``Server`` child beside the stores supervisor. On SIGTERM (or SIGINT, SIGHUP) the
daemon stops accepting, lets in-flight requests finish within the grace period, their
stores still running, then stops the tree (closing every LMDB environment) and exits 0.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TextIO

import structlog

from memoryd import app
from memoryd.errors import AlreadyStarted, MemorydError
from memoryd.server.config import ServerConfig
from memoryd.server.footprint import StartFootprint
from memoryd.server.listener import SERVER, Server
from memoryd.server.stores import (
    StoreRegistry,
    durable_exists,
    durable_stores,
    private_data_dir,
)
from memoryd.store.handle import StoreHandle
from supervisors import ChildSpec, Restart, StartError, whereis

__all__ = ["run", "usage_text"]

log = structlog.get_logger("memoryd.server")

_SWITCH_INTERVAL_S = 0.0002

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that stop the daemon gracefully. SIGHUP is one of them: the daemon has
no configuration file to reload (everything comes from its command line), and a hangup
(the terminal or session that started it went away) left to its default action killed
it at once, with no log line, requests cut and its socket file left behind."""


def _force_quit() -> None:
    """A second Ctrl-C while the daemon stops: exit at once, cutting the requests still
    in flight (their clients see the connection close; each write acknowledged before is
    on disk, so nothing acknowledged is lost, and the next start replaces the socket
    file). Only SIGINT does this: a supervisor that repeats SIGTERM wants a clean stop."""
    sys.stderr.write(
        "memoryd: Ctrl-C again: stopping at once, requests in flight are cut "
        "(every acknowledged write is on disk)\n"
    )
    sys.stderr.flush()
    os._exit(128 + signal.SIGINT)


def _runnable(path: Path) -> str:
    """How a shell in the current directory runs ``path``.

    Its bare name when that is what the shell finds on PATH, else the path itself:
    relative when below the current directory (``.venv/bin/memoryd`` after ``make run``).
    """
    found = shutil.which(path.name)
    if found is not None and os.path.abspath(found) == os.path.abspath(path):
        return path.name
    try:
        relative = str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return os.path.abspath(path)
    return relative if os.sep in relative else f".{os.sep}{relative}"


def usage_text(addresses: dict[str, str], token: bool) -> str:
    """The lines printed once the daemon listens: its addresses and how to talk to it.

    The commands name this daemon's own environment (``.venv/bin/memoryd`` when its
    ``bin`` is not on PATH), so they run as printed.
    """
    sock = addresses["unix"]
    python = _runnable(Path(sys.executable))
    script = Path(sys.executable).parent / "memoryd"
    cli = _runnable(script) if script.exists() else f"{python} -m memoryd.cli"
    lines = [
        f"memoryd ready unix://{sock}"
        + (f" http://{addresses['tcp']}" if "tcp" in addresses else "")
    ]
    lines += [
        "  talk to it:",
        f"    {cli} --address unix://{sock} add demo --role user --content 'hello'",
        f"    {cli} --address unix://{sock} get demo",
        f"    curl -s --unix-socket {sock} http://memoryd/v1/conversations/demo/messages",
        f"    {python} -c \"import memoryd; print(memoryd.connect('unix://{sock}').get('demo'))\"",
    ]
    if "tcp" in addresses:
        auth = " -H 'Authorization: Bearer $MEMORYD_TOKEN'" if token else ""
        lines.append(f"    curl -s{auth} http://{addresses['tcp']}/v1/conversations/demo/messages")
    return "\n".join(lines)


def _reason(exc: BaseException) -> str:
    """An error as one line: an OSError's text without its errno, else its message
    (its type's name when it has none)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror if exc.filename is None else f"{exc.strerror}: {exc.filename}"
    else:
        text = str(exc) or type(exc).__name__
        if not isinstance(exc, MemorydError | OSError | ValueError | RuntimeError):
            text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())


def _holds_nothing(store: StoreHandle) -> bool:
    """True when the store's change feed is empty: nothing was ever written to it."""
    try:
        return not store.tail(after=0, limit=1)
    except Exception:  # unsure: keep the store
        return False


def _give_up(
    footprint: StartFootprint, default: StoreHandle | None, message: str, *, owned: bool = True
) -> int:
    """End a start that failed: stop what started, remove what the start made (see
    `memoryd.server.footprint`), say why in one line on stderr.

    Args:
        footprint: what the start made.
        default: the default store, if it started (it is checked to hold nothing before
            its files may go).
        message: why the daemon cannot start.
        owned: the data directory was this process's (False when another owns it).

    Returns:
        The exit status, 1.
    """
    empty = owned and (default is None or _holds_nothing(default))
    app.shutdown()
    removed = footprint.undo(store_files=empty)
    if removed:
        log.info("start_undone", removed=[str(path) for path in removed])
    # one write: the logging thread writes to stderr too, and must not split the line
    sys.stderr.write(f"memoryd: {message}\n")
    sys.stderr.flush()
    return 1


def run(config: ServerConfig, *, out: TextIO | None = None) -> int:
    """Serve until SIGTERM, SIGINT or SIGHUP; call from the main thread.

    Args:
        config: what to serve and how.
        out: where the ready line and usage go (default stdout).

    Returns:
        The exit status: 0 after a clean stop, 1 if the daemon could not start or its
        supervision tree gave up.
    """
    out = out if out is not None else sys.stdout
    # Requests hop between the event loop, worker threads and store actors; with the
    # default 5 ms GIL switch interval each hop can wait a whole interval behind a busy
    # thread (a convoy); a short interval lets a waiting hop run sooner.
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and received:
            _force_quit()
        received.append(signal.Signals(signum).name)
        stop.set()

    for signum in _STOP_SIGNALS:
        signal.signal(signum, on_signal)
    if config.listen is not None and config.no_auth:
        log.warning("tcp_without_auth", listen=f"{config.listen[0]}:{config.listen[1]}")
    footprint = StartFootprint(config.data, lmdb=config.backend is None)
    default: StoreHandle | None = None
    try:
        private_data_dir(config.data, footprint.made)
        footprint.note_files()
        stores = StoreRegistry(
            durable_stores(config),
            max_message_bytes=config.max_message_bytes,
            exists=durable_exists(config),
            max_stores=config.max_stores,
        )
        default = stores.start_default()
    except AlreadyStarted as exc:
        log.error("data_directory_in_use", data=str(config.data), error=str(exc))
        return _give_up(footprint, None, str(exc), owned=False)
    except Exception as exc:  # any failure to start is said in one line
        log.error("default_store_failed", data=str(config.data), error=_reason(exc))
        where = f"the Redis at {config.backend}" if config.backend else str(config.data)
        return _give_up(footprint, default, f"cannot open {where}: {_reason(exc)}")
    addresses: dict[str, str] = {}
    spec = ChildSpec(
        id=SERVER,
        start=Server.start,
        args=(config, stores, addresses.update),
        restart=Restart.PERMANENT,
        shutdown_s=config.grace_s + 15.0,
        start_timeout_s=35.0,
    )
    try:
        app.start_server(spec)
    except Exception as exc:  # any failure to start is said in one line
        cause = exc.__cause__ if isinstance(exc, StartError) and exc.__cause__ else exc
        text = _reason(cause)
        log.error("server_start_failed", error=text)
        if not text.startswith("cannot listen"):
            text = f"cannot listen: {text}"
        return _give_up(footprint, default, text)
    print(usage_text(addresses, config.token is not None), file=out, flush=True)
    log.info("daemon_started", data=str(config.data), **addresses)
    status = 0
    while not stop.wait(0.25):
        if whereis(app.ROOT) is None:
            log.error("supervision_tree_stopped")
            status = 1
            break
    log.info("daemon_stopping", **({"signal": received[0]} if received else {}))
    # The listener first: it stops accepting and lets the requests in flight finish
    # within its grace period, while every store still runs and may still be started
    # (app.stop_child holds no lock meanwhile). Then no store may start any more, and
    # the tree stops the stores.
    app.stop_child(SERVER)
    stores.close()
    app.shutdown()
    log.info("daemon_stopped", status=status)
    return status

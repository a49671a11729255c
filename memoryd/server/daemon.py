"""``memoryd serve``: run the supervision tree with a listener until SIGTERM or SIGINT.

The default store (durable in the data directory) starts first, then the
``Server`` child beside the stores supervisor. On SIGTERM the daemon stops
accepting, lets in-flight requests finish, stops the tree (closing every LMDB
environment) and exits 0.
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
from memoryd.server.listener import SERVER, Server
from memoryd.server.stores import (
    StoreRegistry,
    durable_exists,
    durable_stores,
    private_data_dir,
)
from supervisors import ChildSpec, Restart, StartError, whereis

__all__ = ["run", "usage_text"]

log = structlog.get_logger("memoryd.server")

_SWITCH_INTERVAL_S = 0.0002


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


def run(config: ServerConfig, *, out: TextIO | None = None) -> int:
    """Serve until SIGTERM/SIGINT; call from the main thread.

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

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if config.listen is not None and config.no_auth:
        log.warning("tcp_without_auth", listen=f"{config.listen[0]}:{config.listen[1]}")
    try:
        private_data_dir(config.data)
        stores = StoreRegistry(
            durable_stores(config),
            max_message_bytes=config.max_message_bytes,
            exists=durable_exists(config),
            max_stores=config.max_stores,
        )
        stores.start_default()
    except AlreadyStarted as exc:
        log.error("data_directory_in_use", data=str(config.data), error=str(exc))
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1
    except (MemorydError, OSError) as exc:
        log.error("default_store_failed", data=str(config.data), error=str(exc))
        print(f"memoryd: cannot open {config.data}: {exc}", file=sys.stderr)
        app.shutdown()
        return 1
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
    except StartError as exc:
        cause = exc.__cause__ or exc
        log.error("server_start_failed", error=str(cause))
        print(f"memoryd: cannot listen: {cause}", file=sys.stderr)
        app.shutdown()
        return 1
    print(usage_text(addresses, config.token is not None), file=out, flush=True)
    log.info("daemon_started", data=str(config.data), **addresses)
    status = 0
    while not stop.wait(0.25):
        if whereis(app.ROOT) is None:
            log.error("supervision_tree_stopped")
            status = 1
            break
    log.info("daemon_stopping")
    app.shutdown()
    log.info("daemon_stopped", status=status)
    return status

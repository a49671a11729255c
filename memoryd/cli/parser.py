"""The ``memoryd`` command's arguments: the daemon's ``serve`` and the store commands.

Every store command takes the options that say where its store is (``--address``,
``--token``, ``--data``, ``--store``, ``--json``, ``--timeout``), before or after
the command's name. An option left out is absent from the parsed namespace (not
None), so one given before the command is not reset by the command's defaults.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["parser"]


def _where(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where")
    sup = argparse.SUPPRESS
    group.add_argument("--address", default=sup, help="daemon address (or MEMORYD_ADDRESS)")
    group.add_argument("--token", default=sup, help="daemon token (or MEMORYD_TOKEN)")
    group.add_argument("--data", default=sup, help="a data directory to use directly")
    group.add_argument("--store", default=sup, help="a named store (default: the default store)")
    group.add_argument("--json", action="store_true", default=sup, help="JSON output")
    group.add_argument(
        "--timeout", type=float, default=sup, help="seconds to wait for the daemon (default 10)"
    )


def _serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the daemon", description="run the daemon")
    serve.add_argument("--data", required=True, help="the data directory")
    serve.add_argument("--listen", help="also listen on TCP HOST:PORT (needs a token)")
    serve.add_argument("--token", help="bearer token for TCP (or MEMORYD_TOKEN)")
    serve.add_argument("--no-auth", action="store_true", help="TCP without a token (loopback only)")
    serve.add_argument("--socket", help="the Unix socket (default DATA/memoryd.sock)")
    serve.add_argument("--log-level", default="info", help="debug, info, warning, error")
    serve.add_argument(
        "--backend",
        help="keep every store in Redis (redis://HOST:PORT/DB, rediss://, unix://); "
        "several daemons may serve one Redis or Redis Cluster",
    )
    serve.add_argument("--fault-injection", action="store_true", help=argparse.SUPPRESS)


def parser() -> argparse.ArgumentParser:
    """The parser of ``memoryd``'s arguments (``args.command`` names the command)."""
    top = argparse.ArgumentParser(prog="memoryd", description="durable conversation memory")
    _where(top)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, description=text)
        _where(p)
        return p

    _serve(sub)

    p = command("get", "print a conversation's messages")
    p.add_argument("cid")
    p.add_argument("--limit", type=int)
    p.add_argument("--at-version", type=int)
    p = command("add", "append a message (or JSON messages from stdin)")
    p.add_argument("cid")
    p.add_argument("--role")
    p.add_argument("--content")
    p.add_argument("--idempotency-key")
    p.add_argument("--expected-version", type=int)
    command("clear", "delete a conversation's messages").add_argument("cid")
    command("pop", "remove and print the last message").add_argument("cid")
    command("version", "print a conversation's version").add_argument("cid")
    p = command("events", "print a conversation's event log")
    p.add_argument("cid")
    p.add_argument("--after", type=int, default=0)
    p = command("conversations", "list conversations holding messages")
    p.add_argument("--prefix", default="")
    p.add_argument("--limit", type=int)
    p.add_argument("--all", action="store_true", help="also those holding no messages now")
    p = command("tail", "print the change feed")
    p.add_argument("-f", "--follow", action="store_true", help="keep waiting for changes")
    p.add_argument("--after", type=int, default=0)
    p.add_argument("--limit", type=int, default=1000)
    command("stats", "print the store's counts and sizes")
    p = command("export", "write every event as JSONL")
    p.add_argument("--out", help="the file (default stdout)")
    p = command("import", "import an export file (idempotent)")
    p.add_argument("file")
    p.add_argument("--workers", type=int, default=8)
    p = command("backup", "write a consistent copy of a store into a new directory (needs --data)")
    p.add_argument("dest", help="the new directory (must not exist or be empty)")
    p = command("fork", "start DST as a copy of SRC")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--at-version", type=int)
    return top

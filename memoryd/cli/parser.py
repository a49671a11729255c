"""The ``memoryd`` command's arguments: the daemon's ``serve`` and the store commands.

Every store command takes the options that say where its store is (``--address``,
``--token``, ``--data``, ``--store``, ``--json``, ``--timeout``), before or after
the command's name. An option left out is absent from the parsed namespace (not
None), so one given before the command is not reset by the command's defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["parser", "positive_int"]


def _terminal_columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` reads it: ``COLUMNS``, else
    the terminal on stdout, else 80 (shutil itself would load the archive modules)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stream = sys.__stdout__
        try:
            columns = 0 if stream is None else os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, as wide as the terminal (see `_terminal_columns`)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)


def _where(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where")
    sup = argparse.SUPPRESS
    group.add_argument("--address", default=sup, help="daemon address (or MEMORYD_ADDRESS)")
    group.add_argument(
        "--token",
        default=sup,
        help="daemon token; visible to every local user in ps: prefer MEMORYD_TOKEN or "
        "--token-file",
    )
    group.add_argument(
        "--token-file", default=sup, metavar="FILE", help="read the daemon token from FILE"
    )
    group.add_argument(
        "--data", default=sup, metavar="DIR", help="a data directory to use directly"
    )
    group.add_argument(
        "--store", default=sup, metavar="NAME", help="a named store (default: the default store)"
    )
    group.add_argument("--json", action="store_true", default=sup, help="JSON output")
    group.add_argument(
        "--timeout",
        type=_seconds,
        default=sup,
        metavar="SECONDS",
        help="seconds to wait for the daemon, or for a --data store's writes, above 0 and "
        "at most 86400 (default 10; tail -f gives up after 3)",
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a whole number, or is below 1.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


_MAX_TIMEOUT_S = 86_400.0


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 and at most a day (``--timeout``).

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a number, or is out of that range
            (NaN and infinity included: a socket cannot wait that long).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.0 < value <= _MAX_TIMEOUT_S:  # also false for NaN
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 and at most {_MAX_TIMEOUT_S:.0f}, not {text}"
        )
    return value


def _version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a version is 0 or more, not {value}")
    return value


def _serve(sub: Any, *, full: bool) -> None:
    text = "run the daemon: serve every store of a data directory over HTTP"
    serve = sub.add_parser(
        "serve", help=text, description=text, formatter_class=_Formatter, add_help=full
    )
    if not full:
        return
    serve.add_argument("--data", required=True, help="the data directory (created if missing)")
    serve.add_argument("--listen", help="also listen on TCP HOST:PORT (needs a token)")
    serve.add_argument(
        "--token",
        help="bearer token for TCP; visible to every local user in ps: prefer the "
        "MEMORYD_TOKEN environment variable or --token-file",
    )
    serve.add_argument(
        "--token-file", metavar="FILE", help="read the TCP bearer token from FILE (one line)"
    )
    serve.add_argument(
        "--max-stores",
        type=positive_int,
        default=256,
        metavar="N",
        help="the most named stores that may run at once (default 256); a write that would "
        "start one more is refused",
    )
    serve.add_argument(
        "--head-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a connection may take to send a request's head, idle between "
        "requests, or go without a byte of a request's body, before it gets a 408 and is "
        "closed (default 10, from 0.1 to 3600)",
    )
    serve.add_argument("--no-auth", action="store_true", help="TCP without a token (loopback only)")
    serve.add_argument("--socket", help="the Unix socket (default DATA/memoryd.sock)")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error", "critical"],
        help="the lowest level logged on stderr (default info); logs are console lines on "
        "a terminal and JSON lines otherwise",
    )
    serve.add_argument(
        "--backend",
        help="keep every store in Redis (redis://HOST:PORT/DB, rediss://, unix://); "
        "several daemons may serve one Redis or Redis Cluster",
    )
    serve.add_argument(
        "--redis-not-durable",
        action="store_true",
        help="with --backend: accept a Redis that does not fsync every write (appendonly "
        "no, or appendfsync other than always), which loses acknowledged writes when it "
        "restarts; refused by default",
    )
    serve.add_argument("--fault-injection", action="store_true", help=argparse.SUPPRESS)


def parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``memoryd``'s arguments (``args.command`` names the command).

    Args:
        argv: the arguments it will parse, when known: then only the commands named in
            them get their options (every command is still listed), which keeps a short
            command's start short. None builds every command in full.
    """
    top = argparse.ArgumentParser(
        prog="memoryd", description="durable conversation memory", formatter_class=_Formatter
    )
    _where(top)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = None if argv is None else frozenset(argv)

    def command(name: str, text: str) -> argparse.ArgumentParser | None:
        """The command's parser, with its options when it may be the one parsed (one
        that is not is only listed: it gets no ``--help`` either)."""
        full = named is None or name in named
        p = sub.add_parser(
            name, help=text, description=text, formatter_class=_Formatter, add_help=full
        )
        if not full:
            return None
        _where(p)
        return p

    def cid(p: argparse.ArgumentParser | None) -> argparse.ArgumentParser | None:
        if p is not None:
            p.add_argument("cid", metavar="CID", help="the conversation id")
        return p

    _serve(sub, full=named is None or "serve" in named)

    if p := cid(command("get", "print a conversation's messages")):
        p.add_argument("--limit", type=positive_int, metavar="N", help="only the last N messages")
        p.add_argument(
            "--at-version", type=_version, metavar="V", help="the history as it was at this version"
        )
    if p := cid(command("add", "append a message (or JSON messages from stdin)")):
        p.add_argument("--role", help="the message's role (default user)")
        p.add_argument("--content", help="the message's text (without it: JSON from stdin)")
        p.add_argument(
            "--idempotency-key",
            help="a key that makes a repeated add write nothing the second time",
        )
        p.add_argument(
            "--expected-version",
            type=_version,
            help="write only if the conversation is at this version (else a conflict)",
        )
    cid(command("clear", "delete a conversation's messages"))
    cid(command("pop", "remove and print the last message"))
    cid(command("version", "print a conversation's version"))
    if p := cid(command("events", "print a conversation's event log")):
        p.add_argument(
            "--after", type=_version, default=0, help="only events after this version (default 0)"
        )
    if p := command("conversations", "list conversations holding messages"):
        p.add_argument("--prefix", default="", help="only ids that start with this")
        p.add_argument("--limit", type=positive_int, metavar="N", help="at most N ids")
        p.add_argument("--all", action="store_true", help="also those holding no messages now")
    if p := command("tail", "print the change feed"):
        p.add_argument(
            "-f",
            "--follow",
            action="store_true",
            help="keep waiting for changes; exits with an error when the daemon stops answering",
        )
        p.add_argument(
            "--after",
            type=_version,
            default=0,
            help="only changes after this position (default 0)",
        )
        p.add_argument(
            "--limit",
            type=positive_int,
            metavar="N",
            help="stop after N changes (default: every change, and with -f, forever)",
        )
    command("stats", "print the store's counts and sizes")
    if p := command("runs", "list the unfinished agent runs (or discard an orphaned one)"):
        p.add_argument(
            "--discard",
            metavar="RUN_ID",
            help="drop this orphaned run for good (refused while a live process holds it)",
        )
    _whole_store_commands(command)
    return top


def _whole_store_commands(
    command: Callable[[str, str], argparse.ArgumentParser | None],
) -> None:
    """The commands that act on a whole store or its files: export, import, backup,
    check, and fork (which copies a conversation).

    Args:
        command: makes a command's parser (None when its options are not needed).
    """
    if p := command("export", "write every event as JSONL"):
        p.add_argument("--out", help="the file (default stdout)")
    if p := command("import", "import an export file (idempotent)"):
        p.add_argument("file", metavar="FILE", help="a JSONL file written by memoryd export")
        p.add_argument(
            "--workers",
            type=positive_int,
            metavar="N",
            default=8,
            help="conversations imported at once (default 8)",
        )
    text = "write a consistent copy of a store into a new directory (needs --data)"
    if p := command("backup", text):
        p.add_argument(
            "dest", metavar="DEST", help="the new directory (must not exist or be empty)"
        )
    text = (
        "verify a data directory offline: every page and every record (needs --data); "
        "exits 1 with a report and how to restore from a backup when something is damaged"
    )
    command("check", text)
    text = "start conversation TARGET as a copy of conversation SOURCE's history"
    if p := command("fork", text):
        p.add_argument("source", metavar="SOURCE", help="the conversation copied (it must exist)")
        p.add_argument(
            "target", metavar="TARGET", help="the new conversation (it must hold no messages)"
        )
        p.add_argument(
            "--at-version",
            type=_version,
            metavar="V",
            help="copy SOURCE's history as it was at this version",
        )

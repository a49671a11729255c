"""The ``memoryd`` command: the store surface for people, and ``serve``.

Human-readable output on a terminal, JSON when piped or with ``--json``. Commands
talk to a daemon (``--address``/``MEMORYD_ADDRESS``, ``MEMORYD_TOKEN``/``--token-file``)
or work directly on a data directory with ``--data`` when no daemon runs (when one
does, they use its socket ``DIR/memoryd.sock`` instead).

The arguments are read by `memoryd.cli.parser`, the store commands run in
`memoryd.cli.commands`, and what they print is written by `memoryd.cli.output`.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.cli import commands as _cli_commands
from memoryd.cli import interrupts
from memoryd.cli import parser as _cli_parser
from memoryd.cli.output import Output
from memoryd.errors import MemorydError

if TYPE_CHECKING:
    from memoryd.store.handle import StoreHandle

__all__ = ["main"]

_INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C: 128 + SIGINT, as shells report it."""
_BROKEN_PIPE = 141
"""The exit status of a command whose reader went away (``memoryd tail | head -1``):
128 + SIGPIPE, what a shell reports for a program that SIGPIPE stopped, without the
traceback or the "Exception ignored" line Python would print."""

_ONE_CALL = frozenset(
    {"add", "clear", "conversations", "events", "fork", "get", "pop", "stats", "version"}
)
"""Commands that make a call or two and exit. Their start allocates only long-lived
objects (modules, classes, the parser, the client) that the cyclic garbage collector
would walk to free nothing, so they run with it off; the others (``serve``, ``tail``,
``export``, ``import``, ``backup``, ``check``) run as long as they need, with it on.
Run as the program, a one-call command also freezes those objects (`gc.freeze`) as it
returns: the interpreter's shutdown, which comes next, then does not walk them either."""


def _serve(args: argparse.Namespace) -> int:
    from memoryd import logging as mlogging  # noqa: PLC0415 (structlog, only for what logs)
    from memoryd.server import ServerConfig, parse_listen, run  # noqa: PLC0415 (starlette)

    mlogging.configure(level=args.log_level)  # console on a terminal, else JSON
    try:
        token = _cli_commands.token_of(args)
        config = ServerConfig(
            data=Path(args.data).resolve(),
            socket_path=Path(args.socket).resolve() if args.socket else None,
            listen=parse_listen(args.listen) if args.listen else None,
            token=token,
            no_auth=args.no_auth,
            fault_injection=args.fault_injection,
            backend=args.backend,
            require_durable=not args.redis_not_durable,
            max_stores=args.max_stores,
            head_timeout_s=args.head_timeout,
        )
    except ValueError as exc:
        print(f"memoryd serve: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:  # a path that does not resolve (a symlink loop)
        print(f"memoryd serve: cannot resolve a path: {exc}", file=sys.stderr)
        return 2
    return run(config)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memoryd`` command.

    Args:
        argv: the arguments; None (the program's entry point) reads ``sys.argv[1:]``,
            and a one-call command then leaves what it loaded frozen (`_ONE_CALL`).

    Returns:
        The exit status: 0 on success, 1 on an error (printed to stderr), 2 on bad usage,
        130 when Ctrl-C stopped the command, 141 when the reader of its output went away.
    """
    as_program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    collecting = gc.isenabled()
    one_call = False
    gc.disable()  # while the parser is built; a one-call command keeps it off (`_ONE_CALL`)
    try:
        args = _cli_parser.parser(argv).parse_args(argv)
        one_call = args.command in _ONE_CALL
        if collecting and not one_call:
            gc.enable()
        return _run(args, exiting=as_program)
    finally:
        if as_program and one_call:
            gc.freeze()  # the process exits next: its shutdown skips what the command loaded
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace, *, exiting: bool = False) -> int:
    """Run the parsed command: print its result, or its error on stderr.

    Args:
        args: the parsed arguments.
        exiting: the process exits after this command (the program's entry point): a
            Ctrl-C after the command closed its store is then ignored, not restored.

    Returns:
        The exit status: 0 on success, 1 on an error (printed to stderr), 130 when
        Ctrl-C stopped it, 141 when its reader went away.
    """
    if args.command == "serve":
        return _serve(args)
    if sys.stdout is None:  # started with stdout closed (``memoryd get c >&-``)
        print(
            f"memoryd {args.command}: stdout is closed, so nothing could be shown; nothing "
            "was done (send the output to /dev/null to discard it)",
            file=sys.stderr,
        )
        return 1
    opened: list[StoreHandle] = []
    status = 1
    try:
        status = _command(args, opened)
    finally:
        if _close(opened, exiting=exiting):
            status = _INTERRUPTED
    return status


def _command(args: argparse.Namespace, opened: list[StoreHandle]) -> int:
    """Run the command; the store it opens is appended to ``opened``, for `_close`.

    Returns:
        The exit status, as `_run` says.
    """
    as_json = bool(getattr(args, "json", False)) or not sys.stdout.isatty()
    try:
        if args.command == "backup":
            _cli_commands.configure_logging()
            status = _cli_commands.backup(args, Output(as_json, sys.stdout))
        elif args.command == "check":
            status = _cli_commands.check(args, Output(as_json, sys.stdout))
        else:
            if args.command == "import":  # a mistyped file creates no store
                _cli_commands.readable_file(args.file)
            store = _cli_commands.open_store(args)
            opened.append(store)
            status = _cli_commands.run(args, store, Output(as_json, sys.stdout))
        sys.stdout.flush()  # a reader that went away is found here, not at the exit
        return status
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered goes nowhere at exit
        os.close(devnull)
        return _BROKEN_PIPE
    except KeyboardInterrupt:
        print(
            f"memoryd {args.command}: interrupted{_INTERRUPTED_NOTES.get(args.command, '')}",
            file=sys.stderr,
        )
        return _INTERRUPTED
    except (MemorydError, ValueError, OSError) as exc:
        print(f"memoryd: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


_INTERRUPTED_NOTES = {
    "import": "; the conversations imported so far are kept: the same import again "
    "finishes it (it skips what is there)",
    "export": "; with --out, no file was written",
    "backup": "; no copy was left behind",
}


def _close(opened: list[StoreHandle], *, exiting: bool) -> bool:
    """Close the stores the command opened and stop the supervision tree, with Ctrl-C
    held back meanwhile (an interrupted close would print a traceback and could leave
    actor threads that keep the process from exiting).

    Args:
        opened: the stores the command opened.
        exiting: leave Ctrl-C ignored afterwards (the process exits next) instead of
            restoring its handler.

    Returns:
        Whether Ctrl-C was pressed while closing.
    """
    with interrupts.held(ignore_after=exiting) as came:
        for store in opened:
            if hasattr(store, "close"):
                store.close()
        app = sys.modules.get("memoryd.app")
        if app is not None:  # the supervision tree runs only once a local store was opened
            app.shutdown()
    return bool(came)


if __name__ == "__main__":
    raise SystemExit(main())

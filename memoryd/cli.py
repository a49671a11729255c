"""The ``memoryd`` command: the store surface for people, and ``serve``.

Human-readable output on a terminal, JSON when piped or with ``--json``. Commands
talk to a daemon (``--address``/``MEMORYD_ADDRESS``, ``--token``/``MEMORYD_TOKEN``)
or work directly on a data directory with ``--data`` when no daemon runs (when one
does, they use its socket ``DIR/memoryd.sock`` instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from memoryd import api
from memoryd import logging as mlogging
from memoryd.errors import AlreadyStarted, MemorydError
from memoryd.events import Change
from memoryd.export import export_jsonl, import_jsonl
from memoryd.store.handle import StoreHandle
from memoryd.store.lmdb_store import LmdbStore
from memoryd.wire import DEFAULT_STORE_NAME, change_to_wire, check_store_name, event_to_wire

__all__ = ["main"]

_COMMON = ("address", "token", "data", "store", "json")


def _common(parser: argparse.ArgumentParser) -> None:
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


def _serve_parser(sub: Any) -> None:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd", description="durable conversation memory")
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, description=text)
        _common(p)
        return p

    _serve_parser(sub)

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
    return parser


# --------------------------------------------------------------------------- opening


def _option(args: argparse.Namespace, name: str, env: str | None = None) -> Any:
    value = getattr(args, name, None)
    if value is None and env is not None:
        value = os.environ.get(env) or None
    return value


def _open(args: argparse.Namespace) -> StoreHandle:
    """The store the command works on: through the daemon, or directly on ``--data``."""
    from memoryd import client  # noqa: PLC0415 (httpx only when a daemon is used)

    address = _option(args, "address", "MEMORYD_ADDRESS")
    token = _option(args, "token", "MEMORYD_TOKEN")
    data = _option(args, "data")
    name = _option(args, "store")
    if name is not None:
        check_store_name(name)
    if address is None and data is not None:
        root = Path(data)
        path = root if name in (None, DEFAULT_STORE_NAME) else root / "stores" / name
        try:
            return LmdbStore.start(path, name=name or DEFAULT_STORE_NAME)
        except AlreadyStarted:
            sock = root / "memoryd.sock"
            if not sock.exists():
                raise
            address = f"unix://{sock.resolve()}"
    if address is None and Path("data/memoryd.sock").exists():
        address = f"unix://{Path('data/memoryd.sock').resolve()}"
    if address is None:
        raise ValueError(
            "no store given: pass --address (or set MEMORYD_ADDRESS) to use a daemon, "
            "or --data DIR to use a data directory directly"
        )
    timeout = getattr(args, "timeout", None) or 10.0
    return client.connect(address, token=token, store=name, timeout=timeout)


# --------------------------------------------------------------------------- output


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += (
            f" [tool call {call.get('id')}: {function.get('name')}({function.get('arguments')})]"
        )
    return text.strip()


def _show_messages(found: list[dict[str, Any]], out: TextIO) -> None:
    for message in found:
        out.write(f"{message.get('role')}: {_content(message)}\n")


def _change_line(change: Change) -> str:
    count = len(change.messages)
    return (
        f"{change.position} {change.conversation_id} v{change.version} {change.kind} "
        f"{count} message{'s' if count != 1 else ''}\n"
    )


class _Output:
    def __init__(self, as_json: bool, out: TextIO) -> None:
        self.json = as_json
        self.out = out

    def emit(self, value: Any, human: Callable[[TextIO], object]) -> None:
        if self.json:
            self.out.write(json.dumps(value, ensure_ascii=False) + "\n")
        else:
            human(self.out)


def _read_stdin_messages(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.content is not None:
        return [{"role": args.role or "user", "content": args.content}]
    if sys.stdin.isatty():
        raise ValueError("give --content TEXT, or pipe JSON messages on stdin")
    try:
        data = json.load(sys.stdin)
    except ValueError as exc:
        raise ValueError(f"stdin is not JSON: {exc}") from None
    return data if isinstance(data, list) else [data]


# --------------------------------------------------------------------------- commands


def _progress(label: str, total: int | None) -> Callable[[int], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(done: int) -> None:
        if total:
            width = 30
            filled = min(width, done * width // max(total, 1))
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        else:
            sys.stderr.write(f"\r{label} {done}")
        sys.stderr.flush()

    return show


def _run_command(args: argparse.Namespace, store: StoreHandle, out: _Output) -> int:
    command = args.command
    if command == "get":
        found = store.get(args.cid, limit=args.limit, at_version=args.at_version)
        out.emit(found, lambda o: _show_messages(found, o))
    elif command == "add":
        version = store.add(
            args.cid,
            _read_stdin_messages(args),
            idempotency_key=args.idempotency_key,
            expected_version=args.expected_version,
        )
        out.emit({"version": version}, lambda o: o.write(f"version {version}\n"))
    elif command == "clear":
        store.clear(args.cid)
        out.emit({"cleared": args.cid}, lambda o: o.write(f"cleared {args.cid}\n"))
    elif command == "pop":
        popped = store.pop(args.cid)
        out.emit(
            popped,
            lambda o: _show_messages([popped], o) if popped else o.write("nothing to pop\n"),
        )
    elif command == "version":
        version = store.version(args.cid)
        out.emit({"version": version}, lambda o: o.write(f"{version}\n"))
    elif command == "events":
        found_events = [event_to_wire(e) for e in store.events(args.cid, after=args.after)]
        out.emit(
            found_events,
            lambda o: o.writelines(
                f"v{e['version']} {e['kind']} {len(e['messages'])} messages\n" for e in found_events
            ),
        )
    elif command == "conversations":
        names: list[str] = []
        after: str | None = None
        while page := store.conversations(
            prefix=args.prefix, after=after, limit=500, include_empty=args.all
        ):
            names.extend(page)
            after = page[-1]
            if args.limit is not None and len(names) >= args.limit:
                names = names[: args.limit]
                break
        out.emit(names, lambda o: o.writelines(n + "\n" for n in names))
    elif command == "tail":
        return _tail(args, store, out)
    elif command == "stats":
        found_stats = store.stats()
        out.emit(found_stats, lambda o: o.writelines(f"{k}: {v}\n" for k, v in found_stats.items()))
    elif command == "fork":
        version = store.fork(args.source, args.target, at_version=args.at_version)
        out.emit(
            {"version": version},
            lambda o: o.write(f"forked {args.source} into {args.target} (version {version})\n"),
        )
    elif command == "export":
        return _export(args, store, out)
    elif command == "import":
        return _import(args, store, out)
    return 0


def _tail(args: argparse.Namespace, store: StoreHandle, out: _Output) -> int:
    after = args.after
    while True:
        changes = store.tail(after=after, limit=args.limit, timeout=30.0 if args.follow else 0.0)
        for change in changes:
            if out.json:
                out.out.write(json.dumps(change_to_wire(change), ensure_ascii=False) + "\n")
            else:
                out.out.write(_change_line(change))
            after = change.position
        out.out.flush()
        if not args.follow and len(changes) < args.limit:
            return 0


def _export(args: argparse.Namespace, store: StoreHandle, out: _Output) -> int:
    total = store.stats().get("events")
    progress = _progress("exporting", total if isinstance(total, int) else None)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            summary = export_jsonl(store, handle, progress=progress)
    else:
        summary = export_jsonl(store, out.out, progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    if args.out:
        result = {"conversations": summary.conversations, "events": summary.events}
        out.emit(
            result,
            lambda o: o.write(
                f"exported {summary.events} events of {summary.conversations} "
                f"conversations to {args.out}\n"
            ),
        )
    return 0


def _import(args: argparse.Namespace, store: StoreHandle, out: _Output) -> int:
    progress = _progress("importing conversations", None)
    summary = import_jsonl(store, args.file, workers=max(1, args.workers), progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    result = {
        "imported": summary.imported,
        "present": summary.present,
        "events_written": summary.events_written,
        "skipped_events": summary.skipped_events,
        "conflicts": summary.conflicts,
    }
    out.emit(
        result,
        lambda o: o.write(
            f"imported {summary.imported} conversations ({summary.events_written} writes), "
            f"{summary.present} already present, {len(summary.conflicts)} conflicts"
            + (f": {', '.join(summary.conflicts[:10])}" if summary.conflicts else "")
            + (
                f"; skipped {summary.skipped_events} compacted/memo events"
                if summary.skipped_events
                else ""
            )
            + "\n"
        ),
    )
    return 1 if summary.conflicts else 0


def _backup(args: argparse.Namespace, out: _Output) -> int:
    """Copy ``--data`` (or its ``--store``) to ``args.dest``; safe while a daemon serves it."""
    from memoryd.store.lmdb_backup import backup  # noqa: PLC0415

    data = _option(args, "data")
    if data is None:
        raise ValueError(
            "backup reads the data directory itself: pass --data DIR (a daemon may be "
            "serving it; the copy is one consistent snapshot)"
        )
    name = _option(args, "store")
    root = Path(data)
    named = name not in (None, DEFAULT_STORE_NAME)
    source = root / "stores" / check_store_name(name) if named else root
    copied = backup(source, args.dest)
    out.emit(
        {"backup": str(copied.parent), "bytes": copied.stat().st_size},
        lambda o: o.write(f"backed up {source} to {copied.parent}\n"),
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from memoryd.server import ServerConfig, parse_listen, run  # noqa: PLC0415 (starlette)

    mlogging.configure(fmt="json", level=args.log_level)
    token = args.token or os.environ.get("MEMORYD_TOKEN") or None
    try:
        config = ServerConfig(
            data=Path(args.data).resolve(),
            socket_path=Path(args.socket).resolve() if args.socket else None,
            listen=parse_listen(args.listen) if args.listen else None,
            token=token,
            no_auth=args.no_auth,
            fault_injection=args.fault_injection,
            backend=args.backend,
        )
    except ValueError as exc:
        print(f"memoryd serve: {exc}", file=sys.stderr)
        return 2
    return run(config)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memoryd`` command.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 1 on an error (printed to stderr), 2 on bad usage.
    """
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    mlogging.configure(fmt="console", level="warning")
    as_json = bool(getattr(args, "json", False)) or not sys.stdout.isatty()
    store: StoreHandle | None = None
    try:
        if args.command == "backup":
            return _backup(args, _Output(as_json, sys.stdout))
        store = _open(args)
        return _run_command(args, store, _Output(as_json, sys.stdout))
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except (MemorydError, ValueError, OSError) as exc:
        print(f"memoryd: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if store is not None and hasattr(store, "close"):
            store.close()
        api.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``memoryd`` command's store commands: which store they use, and what each does.

`open_store` finds the store: the daemon at ``--address`` (or ``MEMORYD_ADDRESS``),
else the data directory ``--data`` opened directly (or, when a daemon already
holds it, that daemon's socket ``DIR/memoryd.sock``), else a daemon socket at
``data/memoryd.sock``. `run` runs one command on it; `backup` copies a data
directory and needs no store.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memoryd._json_values import loads
from memoryd.cli import interrupts
from memoryd.cli.output import Output, import_line, progress, show_events, show_messages
from memoryd.errors import AlreadyStarted, StoreUnavailable, UnknownStore
from memoryd.protocol import DEFAULT_STORE_NAME, check_store_name, event_to_wire

if TYPE_CHECKING:
    from memoryd.export import ExportSummary
    from memoryd.store.handle import StoreHandle

__all__ = [
    "FOLLOW_PATIENCE_S",
    "backup",
    "configure_logging",
    "open_store",
    "readable_file",
    "run",
    "token_of",
]

#: How long ``tail -f`` keeps reconnecting (with backoff) to a daemon that stopped
#: answering before it exits with an error, unless ``--timeout`` says otherwise.
FOLLOW_PATIENCE_S = 3.0
_FOLLOW_POLL_S = 1.0  # the long poll of tail -f: a vanished daemon is noticed between polls
_TAIL_PAGE = 1000
_BULK_COMMANDS = frozenset({"export", "import", "tail"})
"""Commands that move many events through a daemon: they use msgpack bodies; the others
make a call or two on JSON bodies, which needs no codec (nor msgpack) loaded."""
_READ_COMMANDS = frozenset(
    {"conversations", "events", "export", "get", "runs", "stats", "tail", "version"}
)
"""Commands that only read (``runs --discard`` drops a run that must exist). On ``--data``
they refuse a store that is not there, as a daemon does (`UnknownStore`), instead of
creating it: a mistyped directory or ``--store`` is said, not read as empty."""


def _option(args: argparse.Namespace, name: str, env: str | None = None) -> Any:
    value = getattr(args, name, None)
    if value is None and env is not None:
        value = os.environ.get(env) or None
    return value


def token_of(args: argparse.Namespace) -> str | None:
    """The daemon token: ``--token-file``, else ``--token`` (warned about), else
    ``MEMORYD_TOKEN``.

    A token given on the command line is visible to every local user (``ps``), so
    ``--token`` with a value prints a warning on stderr.

    Raises:
        ValueError: the token file cannot be read or holds no token.
    """
    path = getattr(args, "token_file", None)
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the token file {path}: {exc}") from None
        token = text.strip()
        if not token:
            raise ValueError(f"the token file {path} is empty")
        return token
    given = getattr(args, "token", None)
    if given:
        print(
            "memoryd: warning: --token shows the token to every local user (ps); "
            "set MEMORYD_TOKEN or use --token-file instead",
            file=sys.stderr,
        )
        return str(given)
    return os.environ.get("MEMORYD_TOKEN") or None


def configure_logging() -> None:
    """Warnings and errors of the stores this command opens go to stderr (JSON when piped)."""
    from memoryd import logging as mlogging  # noqa: PLC0415 (structlog, only for what logs)

    mlogging.configure(level="warning")


def _answers(sock: Path) -> bool:
    """True when a process accepts connections on the Unix socket ``sock`` (a daemon
    that serves its data directory); False for none, a stale file or anything else."""
    from memoryd._sockets import unix_socket_state  # noqa: PLC0415 (only for a data directory)

    try:
        return unix_socket_state(sock) == "listening"
    except OSError:
        return False


def open_store(args: argparse.Namespace) -> StoreHandle:
    """The store the command works on: through the daemon, or directly on ``--data``.

    Raises:
        ValueError: no store given, or a bad store name or address.
        AlreadyStarted: ``--data`` is held by another process that serves no socket.
    """
    address = _option(args, "address", "MEMORYD_ADDRESS")
    token = token_of(args)
    data = _option(args, "data")
    name = _option(args, "store")
    if name is not None:
        check_store_name(name)
    if address is None and data is not None and _answers(Path(data) / "memoryd.sock"):
        # A daemon serves DIR: go through it, whatever its backend (a Redis-backed one
        # holds no LMDB lock that opening DIR directly would run into).
        address = f"unix://{(Path(data) / 'memoryd.sock').resolve()}"
    if address is None and data is not None:
        # LMDB, the actors and their logging load only for a data directory used directly.
        from memoryd.store.lmdb.dirlock import DATA_FILE  # noqa: PLC0415
        from memoryd.store.lmdb.handle import LmdbStore  # noqa: PLC0415

        configure_logging()
        root = Path(data)
        path = root if name in (None, DEFAULT_STORE_NAME) else root / "stores" / name
        if args.command in _READ_COMMANDS and not (path / DATA_FILE).exists():
            raise _missing(root, name)
        given = getattr(args, "timeout", None)  # else the store's own deadline
        try:
            if given is None:
                return LmdbStore.start(path, name=name or DEFAULT_STORE_NAME)
            return LmdbStore.start(
                path, name=name or DEFAULT_STORE_NAME, call_timeout_s=float(given)
            )
        except AlreadyStarted as exc:
            sock = root / "memoryd.sock"
            if not sock.exists():
                hint = _daemon_hint(exc.owner_pid)
                if hint is None:
                    raise
                raise AlreadyStarted(f"{exc}; {hint}", owner_pid=exc.owner_pid) from None
            address = f"unix://{sock.resolve()}"
    if address is None and Path("data/memoryd.sock").exists():
        address = f"unix://{Path('data/memoryd.sock').resolve()}"
    if address is None:
        raise ValueError(
            "no store given: pass --address (or set MEMORYD_ADDRESS) to use a daemon, "
            "or --data DIR to use a data directory directly"
        )
    from memoryd.client import remote as client  # noqa: PLC0415 (the HTTP client only for a daemon)

    timeout = getattr(args, "timeout", None) or (
        FOLLOW_PATIENCE_S if getattr(args, "follow", False) else 10.0
    )
    # A mistyped --store is said, not read as an empty store; but an import is a write
    # (the first write creates the store) whose first calls are reads (is each
    # conversation held already?), which must read a store the daemon never had as empty.
    return client.connect(
        address,
        token=token,
        store=name,
        timeout=timeout,
        wire="msgpack" if args.command in _BULK_COMMANDS else "json",
        empty_when_missing=args.command == "import",
    )


def readable_file(path: str) -> None:
    """Check that ``path`` is a file this process can open for reading.

    Raises:
        OSError: it is missing, a directory, or unreadable (the message names it).
    """
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise type(exc)(f"cannot read {path}: {exc.strerror or exc}") from None


def _missing(root: Path, name: str | None) -> UnknownStore:
    """The error of a read on a data directory, or a store in it, that holds no store."""
    if name in (None, DEFAULT_STORE_NAME):
        return UnknownStore(
            f"no memoryd data directory at '{root}' (it holds no data.mdb): check the "
            "path; a write ('memoryd add', 'memoryd import') or 'memoryd serve' creates one"
        )
    return UnknownStore(
        f"data directory '{root}' has no store {name!r} (no '{root}/stores/{name}'): "
        "check the name; its first write creates it"
    )


def _messages_to_add(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.content is not None:
        return [{"role": args.role or "user", "content": args.content}]
    if sys.stdin is None or sys.stdin.isatty():  # None: started with stdin closed
        raise ValueError("give --content TEXT, or pipe JSON messages on stdin")
    try:
        data = loads(sys.stdin.read())  # bounded: too deep a nesting is a ValueError too
    except ValueError as exc:
        raise ValueError(f"stdin is not JSON: {exc}") from None
    return data if isinstance(data, list) else [data]


def _conversations(args: argparse.Namespace, store: StoreHandle) -> list[str]:
    names: list[str] = []
    after: str | None = None
    while page := store.conversations(
        prefix=args.prefix, after=after, limit=500, include_empty=args.all
    ):
        names.extend(page)
        after = page[-1]
        if args.limit is not None and len(names) >= args.limit:
            return names[: args.limit]
    return names


def run(args: argparse.Namespace, store: StoreHandle, out: Output) -> int:
    """Run the store command ``args.command`` on ``store``.

    Returns:
        The exit status: 0, or 1 when an import met conflicts.
    """
    command = args.command
    if command == "get":
        found = store.get(args.cid, limit=args.limit, at_version=args.at_version)
        out.emit(found, lambda o: show_messages(found, o))
    elif command == "add":
        version = store.add(
            args.cid,
            _messages_to_add(args),
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
            lambda o: show_messages([popped], o) if popped else o.write("nothing to pop\n"),
        )
    elif command == "version":
        version = store.version(args.cid)
        out.emit({"version": version}, lambda o: o.write(f"{version}\n"))
    elif command == "events":
        found_events = [event_to_wire(e) for e in store.events(args.cid, after=args.after)]
        out.emit(found_events, lambda o: show_events(found_events, o))
    elif command == "conversations":
        names = _conversations(args, store)
        out.emit(names, lambda o: o.writelines(n + "\n" for n in names))
    elif command == "tail":
        return _tail(args, store, out)
    elif command == "runs":
        from memoryd.cli.runs import run_runs  # noqa: PLC0415 (the journal only for this command)

        return run_runs(args, store, out)
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


def _tail(args: argparse.Namespace, store: StoreHandle, out: Output) -> int:
    """Print changes after ``--after``: at most ``--limit``, and with ``-f`` keep waiting.

    Raises:
        StoreUnavailable: with ``-f``, the daemon stopped answering and did not come back
            within the store's call deadline (its client retries with backoff meanwhile).
    """
    after = args.after
    remaining: int | None = args.limit
    while remaining is None or remaining > 0:
        page = _TAIL_PAGE if remaining is None else min(remaining, _TAIL_PAGE)
        try:
            changes = store.tail(
                after=after, limit=page, timeout=_FOLLOW_POLL_S if args.follow else 0.0
            )
        except StoreUnavailable as exc:
            if not args.follow:
                raise
            raise StoreUnavailable(
                f"tail -f stopped after position {after}: the store stopped answering "
                f"({exc}); start the daemon again and resume with --after {after}"
            ) from exc
        for change in changes:
            out.change(change)
            after = change.position
        out.out.flush()
        if remaining is not None:
            remaining -= len(changes)
        if not args.follow and len(changes) < page:
            break
    return 0


def _export(args: argparse.Namespace, store: StoreHandle, out: Output) -> int:
    from memoryd.export import export_jsonl  # noqa: PLC0415 (only export needs it)

    total = store.stats().get("events")
    shown = progress("exporting", total if isinstance(total, int) else None)
    if args.out:
        summary = _export_to_file(
            Path(args.out), lambda handle: export_jsonl(store, handle, progress=shown)
        )
    else:
        summary = export_jsonl(store, out.out, progress=shown)
    if shown is not None:
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


def _export_to_file(out: Path, write: Callable[[TextIO], ExportSummary]) -> ExportSummary:
    """Export into the file ``out`` whole or not at all.

    The lines go to a new file beside it, which replaces ``out`` only once the export
    is complete and flushed to disk: an export that fails or is interrupted (a full
    disk, Ctrl-C) leaves no partial file, and an ``out`` that existed as it was. A
    path that is no regular file (``/dev/stdout``, a FIFO) is written to directly.

    Raises:
        OSError: ``out`` cannot be written (the message names it).
    """
    import tempfile  # noqa: PLC0415 (it loads shutil and random: only export --out needs it)

    try:
        st = out.stat()
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise OSError(f"cannot export to {out}: {exc.strerror or exc}") from None
    else:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"cannot export to {out}: it is a directory; name a file")
        if not stat.S_ISREG(st.st_mode):  # a device or a FIFO: a stream, not a file
            with open(out, "w", encoding="utf-8") as stream:
                return write(stream)
        mode = stat.S_IMODE(st.st_mode)
    target = Path(os.path.realpath(out))  # through a symlink, as open() would write
    partial: Path | None = None
    try:
        # Ctrl-C right after the file is made would leave it with nobody knowing its name
        with interrupts.held() as came:
            fd, name = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".partial", dir=target.parent
            )
            partial = Path(name)
            handle = open(fd, "w", encoding="utf-8")  # noqa: SIM115 (closed just below)
        with handle:
            if came:
                raise KeyboardInterrupt
            summary = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(partial, mode)
        os.replace(partial, target)
    except BaseException as exc:
        if partial is not None:
            partial.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(f"cannot export to {out}: {exc.strerror or exc}") from None
        raise
    return summary


def _daemon_hint(pid: int | None) -> str | None:
    """How to reach process ``pid`` when it is a ``memoryd serve`` (read from its command
    line, on Linux), else None."""
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    words = [word.decode("utf-8", "replace") for word in argv]
    if "serve" not in words or not any("memoryd" in word for word in words):
        return None
    hint = "it is a memoryd daemon: reach it with --address"
    socket_path, listen = _option_of(words, "--socket"), _option_of(words, "--listen")
    if socket_path is not None:
        where = Path(socket_path)
        with contextlib.suppress(OSError):  # a relative path is the daemon's own
            where = Path(os.readlink(f"/proc/{pid}/cwd")) / where
        return f"{hint} unix://{where}"
    if listen is not None:
        return f"{hint} http://{listen} (and its --token)"
    return hint


def _option_of(words: list[str], flag: str) -> str | None:
    """The value a command line gives ``flag`` (``--flag VALUE`` or ``--flag=VALUE``)."""
    for index, word in enumerate(words):
        if word == flag and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(flag + "="):
            return word[len(flag) + 1 :]
    return None


@contextlib.contextmanager
def _spooled(source: str) -> Iterator[Path]:
    """A temporary file holding what ``source`` (a pipe) yields, removed afterwards.

    Raises:
        OSError: the copy cannot be written (the message names the temporary directory).
    """
    import shutil  # noqa: PLC0415 (only an import from a pipe needs these)
    import tempfile  # noqa: PLC0415

    copy: Path | None = None
    try:
        # Ctrl-C right after the file is made would leave it with nobody knowing its name
        with interrupts.held() as came:
            fd, name = tempfile.mkstemp(prefix="memoryd-import-", suffix=".jsonl")
            copy = Path(name)
            spool = open(fd, "wb")  # noqa: SIM115 (closed just below)
        try:
            with spool:
                if came:
                    raise KeyboardInterrupt
                with open(source, "rb") as stream:
                    shutil.copyfileobj(stream, spool, 1 << 20)
        except OSError as exc:
            raise OSError(
                f"cannot copy {source} to {copy.parent} before importing it (an import reads "
                f"its file twice): {exc.strerror or exc}"
            ) from None
        yield copy
    finally:
        if copy is not None:
            copy.unlink(missing_ok=True)


def _umask() -> int:
    """The process's umask (read by setting it, then put back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _import(args: argparse.Namespace, store: StoreHandle, out: Output) -> int:
    from memoryd.export import import_jsonl  # noqa: PLC0415 (only import needs it)

    shown = progress("importing conversations", None)
    if stat.S_ISREG(os.stat(args.file).st_mode):
        summary = import_jsonl(store, args.file, workers=args.workers, progress=shown)
    else:
        # A pipe (``/dev/stdin``, a FIFO) can be read once, and an import reads its
        # file twice (checked whole, then written): it is copied to a file first.
        with _spooled(args.file) as copy:
            summary = import_jsonl(store, copy, workers=args.workers, progress=shown)
    if shown is not None:
        sys.stderr.write("\n")
    result = {
        "imported": summary.imported,
        "present": summary.present,
        "events_written": summary.events_written,
        "skipped_events": summary.skipped_events,
        "conflicts": summary.conflicts,
        "reasons": summary.reasons,
    }
    out.emit(result, lambda o: o.write(import_line(summary)))
    return 1 if summary.conflicts else 0


def backup(args: argparse.Namespace, out: Output) -> int:
    """Copy ``--data`` (or its ``--store``) to ``args.dest``; safe while a daemon serves it.

    Returns:
        The exit status, 0.

    Raises:
        ValueError: no ``--data``, or a bad store name or destination.
    """
    from memoryd.store.lmdb.backup import backup as copy_store  # noqa: PLC0415

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
    copied = copy_store(source, args.dest)
    out.emit(
        {"backup": str(copied.parent), "bytes": copied.stat().st_size},
        lambda o: o.write(f"backed up {source} to {copied.parent}\n"),
    )
    return 0


CHECK_IN_USE = 3
"""The exit status of ``memoryd check`` on a store another process holds (nothing was
checked): neither sound (0) nor damaged (1)."""


def check(args: argparse.Namespace, out: Output) -> int:
    """Verify ``--data`` and its named stores offline: every page, every record.

    Returns:
        The exit status: 0 when every store is sound, 1 when something is damaged,
        `CHECK_IN_USE` when a process holds a store (nothing is checked then).

    Raises:
        ValueError: no ``--data``, or it is not a directory.
    """
    from memoryd.store.lmdb.check import RESTORE_ADVICE, check_directory  # noqa: PLC0415

    data = _option(args, "data")
    if data is None:
        raise ValueError("check reads a data directory itself: pass --data DIR")
    root = Path(data)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")

    def told(path: Path, read: int) -> None:
        sys.stderr.write(f"\rchecking {path}: {read} records read")
        sys.stderr.flush()

    on_terminal = sys.stderr.isatty()  # a bare count, as import's, for people only
    try:
        reports = check_directory(root, progress=told if on_terminal else None)
    except AlreadyStarted as exc:
        # Its own status: a script's `memoryd check || restore` must not restore a live
        # store over the writes made since the backup.
        if on_terminal:
            sys.stderr.write("\n")
        print(f"memoryd: AlreadyStarted: {exc}", file=sys.stderr)
        if out.json:
            out.emit({"sound": None, "in_use_by": exc.owner_pid}, lambda o: None)
        return CHECK_IN_USE
    if on_terminal:
        sys.stderr.write("\n")
    sound = all(report.sound for report in reports)
    result = {
        "sound": sound,
        "stores": [
            {
                "path": str(r.path),
                "sound": r.sound,
                "conversations": r.conversations,
                "events": r.events,
                "problems": r.problems,
            }
            for r in reports
        ],
    }
    if not sound:
        result["restore"] = RESTORE_ADVICE

    def text(o: TextIO) -> None:
        if not reports:
            o.write(f"{root} holds no store\n")
        for r in reports:
            if r.sound:
                o.write(f"{r.path}: sound ({r.conversations} conversations, {r.events} events)\n")
                continue
            o.write(f"{r.path}: DAMAGED\n")
            for problem in r.problems:
                o.write(f"  {problem}\n")
        if not sound:
            o.write(RESTORE_ADVICE + "\n")

    out.emit(result, text)
    return 0 if sound else 1

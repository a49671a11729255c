"""Logging: memoryd's events go through the standard `logging` module, never to stdout.

Library modules log structured events with ``structlog.get_logger(__name__)``
(``log.info("store_opened", store=name)``); this module is the only place that
configures structlog. Importing memoryd routes those events into the standard
loggers named after their modules (``memoryd.store.actor``, ``supervisors``, …),
unless the program configured structlog before, and the program's logging
configuration decides where they go (``import memoryd`` loads this module as soon as
structlog or pykka is first imported, so a program that loads neither, such as a daemon
client, never loads structlog):

* nothing configured: WARNING and above reach stderr, as the standard library's own
  last-resort handler would send them, but through a bounded queue that a writer
  thread drains, so an actor never waits on a slow or full stderr;
* ``logging.basicConfig(level=logging.INFO)``, or any handler of the program's: the
  events go there, like any other library's, and memoryd writes nothing itself;
* `configure`: what ``memoryd serve`` and the CLI call. Console lines on a terminal,
  JSON lines otherwise, on stderr, through a `logging.handlers.QueueHandler` whose
  bounded queue drops and counts records rather than block the caller, drained by a
  `logging.handlers.QueueListener`.

The default is a stderr handler for WARNING and above, not a `logging.NullHandler`:
a crash storm or a store that came back empty must be seen even by a program that
configured nothing. It is not the standard last-resort handler either, which writes
in the caller's thread: here the caller is often a store actor.

Records are rendered in the thread that logs them (so ``exc_info`` is that thread's
exception); only the finished line crosses the queue.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import logging.handlers
import os
import queue
import sys
import threading
from typing import Any, Literal, TextIO

import structlog

__all__ = ["DroppingQueueHandler", "configure", "dropped_records"]

Format = Literal["console", "json"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

#: The loggers whose WARNING-and-above records reach stderr when nothing else takes them:
#: memoryd's, its supervision package's, and pykka's (its errors are logged from actor threads).
_LIBRARY_LOGGERS = ("memoryd", "supervisors", "pykka")

_QUEUE_SIZE = 10_000
_STOP_WAIT_S = 2.0

_SHARED: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
# Records of other libraries (pykka, uvicorn) and the drop notice get the same keys.
_FOREIGN: list[structlog.types.Processor] = [
    *_SHARED,
    structlog.stdlib.ExtraAdder(allow=("dropped",)),
]


_HIDDEN = frozenset({"event", "level", "logger", "timestamp", "exc_info", "stack"})


class _Event(dict[str, Any]):
    """An event as a record's message: a dict for memoryd's formatter, one line for any other.

    A handler the program set up with a plain `logging.Formatter` prints
    ``store_opened store='x' durable=True`` rather than a dict's repr.
    """

    def __str__(self) -> str:
        rest = " ".join(f"{key}={value!r}" for key, value in self.items() if key not in _HIDDEN)
        return f"{self.get('event')} {rest}".rstrip()


def _wrap(
    logger: Any, name: str, event_dict: structlog.types.EventDict
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args, kwargs = structlog.stdlib.ProcessorFormatter.wrap_for_formatter(logger, name, event_dict)
    return (_Event(args[0]), *args[1:]), kwargs


def _configure_structlog() -> None:
    """Send structlog's events to the standard logger named after each module."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.processors.StackInfoRenderer(),
            _wrap,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def _formatter(fmt: Format, *, colors: bool) -> logging.Formatter:
    renderer: structlog.types.Processor
    steps: list[structlog.types.Processor] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta
    ]
    if fmt == "json":
        steps += [structlog.processors.format_exc_info]
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=structlog.dev.plain_traceback
        )
    return structlog.stdlib.ProcessorFormatter(
        processors=[*steps, renderer], foreign_pre_chain=_FOREIGN
    )


class _StreamWriter(logging.Handler):
    """Writes finished lines to a stream: straight to its file descriptor when it has one.

    It holds no lock while it writes (not the stream buffer's, not its own), so a writer
    thread stuck on a full pipe cannot hold up the interpreter's exit.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None

    def handle(self, record: logging.LogRecord) -> bool:
        """Write ``record`` without taking the handler's lock.

        Only the listener's thread writes, and a lock held through a write to a full
        pipe would stall `logging.shutdown` at exit.
        """
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record's finished line."""
        line = record.getMessage() + "\n"
        try:
            if self._fd is None:
                self._stream.write(line)
                self._stream.flush()
                return
            data = line.encode("utf-8", "replace")
            while data:
                data = data[os.write(self._fd, data) :]
        except (OSError, ValueError):
            pass  # a closed stderr: the line is lost, as the program's own would be


class _Listener(logging.handlers.QueueListener):
    """A QueueListener that stops within a deadline even when its stream does not drain."""

    def __init__(self, lines: queue.Queue[logging.LogRecord], writer: logging.Handler) -> None:
        super().__init__(lines, writer)
        self._lines = lines

    def stop_within(self, timeout: float) -> None:
        """Ask the thread to finish the queued lines; wait for it at most ``timeout`` seconds."""
        thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._lines.put(getattr(self, "_sentinel", None), timeout=timeout)  # type: ignore[arg-type]
        thread.join(timeout)
        self._thread = None


class DroppingQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that never blocks: a full queue drops the record and counts it.

    The record is rendered by ``formatter`` in the logging thread; the queue carries the
    finished line. When the queue has room again, a ``log_records_dropped`` warning with
    the number lost is queued before the next record.

    Args:
        formatter: renders each record into its line.
        maxsize: how many lines may wait for the writer.
    """

    def __init__(self, formatter: logging.Formatter, *, maxsize: int = _QUEUE_SIZE) -> None:
        self.lines: queue.Queue[logging.LogRecord] = queue.Queue(maxsize)
        super().__init__(self.lines)
        self.setFormatter(formatter)
        self.dropped = 0
        self._reported = 0
        self._count_lock = threading.Lock()

    def enqueue(self, record: logging.LogRecord) -> None:
        """Queue ``record`` without waiting; count it as dropped when the queue is full."""
        if self.dropped != self._reported:
            self._report_drops()
        try:
            self.lines.put_nowait(record)
        except queue.Full:
            with self._count_lock:
                self.dropped += 1

    def _report_drops(self) -> None:
        with self._count_lock:
            lost = self.dropped - self._reported
            self._reported = self.dropped
        if lost <= 0:
            return
        notice = logging.makeLogRecord(
            {
                "name": __name__,
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "log_records_dropped",
                "dropped": lost,
            }
        )
        try:
            self.lines.put_nowait(self.prepare(notice))
        except queue.Full:
            with self._count_lock:
                self._reported -= lost


class _StderrFallback(DroppingQueueHandler):
    """WARNING and above to stderr, for records that no handler of the program takes.

    It stands in for the standard library's last-resort handler (which writes in the
    caller's thread) on the library's loggers, and its writer thread starts on the
    first record it writes.
    """

    def __init__(self) -> None:
        super().__init__(_formatter("console", colors=False))
        self.setLevel(logging.WARNING)
        self._listener: _Listener | None = None
        self._start_lock = threading.Lock()

    def handle(self, record: logging.LogRecord) -> bool:
        """Write ``record`` unless another handler on its way to the root takes it."""
        if _handled_elsewhere(record):
            return False
        if self._listener is None:
            with self._start_lock:
                if self._listener is None:
                    listener = _Listener(self.lines, _StreamWriter(sys.stderr))
                    listener.start()
                    self._listener = listener
        return bool(super().handle(record))


def _handled_elsewhere(record: logging.LogRecord) -> bool:
    """Whether a handler other than the fallbacks sits on ``record``'s way to the root."""
    current: logging.Logger | None = logging.getLogger(record.name)
    while current is not None:
        if any(not isinstance(h, _StderrFallback) for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


_fallback = _StderrFallback()
_installed: tuple[DroppingQueueHandler, _Listener] | None = None
_install_lock = threading.Lock()


def _install_library_default() -> None:
    """Route structlog into the standard loggers and give the library's loggers the fallback."""
    if not structlog.is_configured():
        _configure_structlog()
    for name in _LIBRARY_LOGGERS:
        std = logging.getLogger(name)
        if _fallback not in std.handlers:
            std.addHandler(_fallback)


def configure(
    *, fmt: Format | None = None, level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure the program's logging for memoryd's events, as ``memoryd serve`` does.

    Sets the root logger's level and one handler on it (replacing the handler an earlier
    call set): a `DroppingQueueHandler` whose lines a writer thread copies to
    ``stream``, so no caller ever waits on the stream. pykka's own messages are kept
    at WARNING and above. The lines still queued are written at exit (for at most
    two seconds).

    Args:
        fmt: ``"console"`` (key=value lines for people) or ``"json"`` (one JSON object
            a line, with ISO timestamps); by default console when ``stream`` is a
            terminal and JSON otherwise.
        level: the lowest level that is written: debug, info, warning, error, critical.
        stream: where to write (default ``sys.stderr``).

    Raises:
        ValueError: an unknown format or level.
    """
    global _installed
    if fmt is not None and fmt not in ("console", "json"):
        raise ValueError(f"log format must be 'console' or 'json', not {fmt!r}")
    if level not in _LEVELS:
        raise ValueError(f"log level must be one of {sorted(_LEVELS)}, not {level!r}")
    out = stream if stream is not None else sys.stderr
    tty = _isatty(out)
    chosen: Format = fmt if fmt is not None else ("console" if tty else "json")
    _configure_structlog()
    handler = DroppingQueueHandler(_formatter(chosen, colors=tty))
    listener = _Listener(handler.lines, _StreamWriter(out))
    listener.start()
    root = logging.getLogger()
    with _install_lock:
        previous, _installed = _installed, (handler, listener)
        if previous is not None:
            root.removeHandler(previous[0])
        root.addHandler(handler)
        root.setLevel(_LEVELS[level])
    if previous is not None:
        previous[1].stop_within(_STOP_WAIT_S)
    logging.getLogger("pykka").setLevel(max(_LEVELS[level], logging.WARNING))


def dropped_records() -> int:
    """How many log records were dropped because stderr did not take them fast enough."""
    installed = _installed
    return _fallback.dropped + (installed[0].dropped if installed is not None else 0)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@atexit.register
def _flush_at_exit() -> None:
    listeners = [_fallback._listener] + ([_installed[1]] if _installed is not None else [])
    for listener in listeners:
        if listener is not None:
            listener.stop_within(_STOP_WAIT_S)


_install_library_default()

"""supervisors' log events, never on stdout.

supervisors logs structured events (``log.error("child_terminated", supervisor=...,
child=..., reason=...)``) and configures no logging of its own. When the program, or
memoryd (which routes every structlog event into the standard `logging` module), has
configured structlog, the events are structlog's. Otherwise they are records of the
standard logger ``supervisors``, with the message ``event key=value ...``: a program that
configured nothing sees the WARNING-and-above ones on stderr (the standard library's
last resort) and nothing on stdout, as with any library; ``logging.basicConfig`` or a
handler of the program's takes them all. Left unconfigured, structlog would print every
event, INFO included, to stdout.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["EventLog"]


class EventLog:
    """The log of one named part of supervisors.

    Args:
        name: The logger's name (structlog's and the standard one).
    """

    __slots__ = ("_name", "_std", "_structured")

    def __init__(self, name: str) -> None:
        self._name = name
        self._std = logging.getLogger(name)
        self._structured = structlog.get_logger(name)

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` at INFO."""
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log ``event`` at WARNING."""
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log ``event`` at ERROR."""
        self._emit(logging.ERROR, event, fields)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if structlog.is_configured():
            self._structured.log(level, event, **fields)
        elif self._std.isEnabledFor(level):
            shown = " ".join(f"{key}={value!r}" for key, value in fields.items())
            self._std.log(level, "%s %s", event, shown)

    def __repr__(self) -> str:
        return f"<EventLog {self._name!r}>"

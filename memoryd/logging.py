"""Logging configuration: the only place that configures structlog.

Library code only does ``structlog.get_logger(__name__)`` and logs events with
keys (``log.info("store_started", store=name)``). Applications, the CLI and the
daemon call ``configure()`` once: console output for people, JSON lines for
machines.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

__all__ = ["configure"]

Format = Literal["console", "json"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def configure(
    *, fmt: Format = "console", level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog (and route the stdlib loggers of pykka and lmdb through it).

    Args:
        fmt: ``"console"`` (coloured key=value lines) or ``"json"`` (one JSON
            object a line, with ISO timestamps).
        level: the lowest level that is written: debug, info, warning, error.
        stream: where to write (default ``sys.stderr``).

    Raises:
        ValueError: an unknown format or level.
    """
    if fmt not in ("console", "json"):
        raise ValueError(f"log format must be 'console' or 'json', not {fmt!r}")
    if level not in _LEVELS:
        raise ValueError(f"log level must be one of {sorted(_LEVELS)}, not {level!r}")
    out = stream if stream is not None else sys.stderr
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        shared.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=shared,
    )
    handler.setFormatter(formatter)
    for name in ("pykka", "lmdb"):
        std = logging.getLogger(name)
        std.handlers[:] = [handler]
        std.setLevel(max(_LEVELS[level], logging.WARNING))
        std.propagate = False

"""Requests httptools cannot parse: a JSON 400 that names what was wrong.

uvicorn answers a request its parser refuses (a bad chunk size, ``Content-Length``
with ``Transfer-Encoding``, two ``Content-Length`` headers, an HTTP/2 preface, a bad
method, a header line without a colon, a NUL in a header...) with a plain-text
``400 Invalid HTTP request received.`` and logs that same sentence. The daemon's
connections (`memoryd.server.limits.bounded`) answer instead with `refusal`: the JSON
error body every other error of the daemon has, naming the parser's reason, and log
one bounded ``malformed_request`` event; uvicorn's own line for it is filtered out
(`quiet_uvicorn`). httptools alone decides what is malformed: nothing here parses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import httptools

__all__ = ["MAX_REASON_CHARS", "Refusal", "quiet_uvicorn", "refusal"]

MAX_REASON_CHARS = 160
"""The longest reason quoted, in the answer and in the log (a URL may be in it)."""

_UVICORN_LINE = "Invalid HTTP request received."
"""What uvicorn logs for every request its parser refuses, without the reason."""

_STATUS = {400: b"400 Bad Request", 500: b"500 Internal Server Error"}


class Refusal:
    """The answer to a request the parser refused, and what to log about it.

    Attributes:
        status: 400 (the request is malformed) or 500 (a callback of the connection
            failed on a well-formed request: the daemon's fault).
        reason: why, in one bounded line of printable ASCII.
        answer: the whole HTTP response, ending with ``connection: close``.
    """

    __slots__ = ("answer", "reason", "status")

    def __init__(self, status: int, reason: str, answer: bytes) -> None:
        self.status = status
        self.reason = reason
        self.answer = answer


def _bounded(text: str) -> str:
    """``text`` as printable ASCII on one line, cut to `MAX_REASON_CHARS`."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in " ".join(text.split()))
    if len(clean) > MAX_REASON_CHARS:
        clean = clean[: MAX_REASON_CHARS - 3] + "..."
    return clean


def _why(error: BaseException | None, method: bytes | None) -> tuple[int, str, str]:
    """The status, error type and message for the parser's ``error``."""
    if isinstance(error, httptools.HttpParserCallbackError):
        cause = error.__context__  # what the connection's callback raised
        if isinstance(cause, httptools.HttpParserError):  # e.g. a URL parse_url refused
            error = cause
        elif isinstance(cause, UnicodeError):
            return 400, "HttpError", "malformed HTTP request: its target is not ASCII"
        else:
            name = type(cause).__name__ if cause is not None else "an error"
            return 500, "InternalError", f"reading the request head failed: {name}"
    reason = (str(error) if error is not None else "") or type(error).__name__
    message = f"malformed HTTP request: {_bounded(reason)}"
    if method == b"PRI" and not isinstance(error, httptools.HttpParserInvalidMethodError):
        message += " (an HTTP/2 preface: this daemon speaks HTTP/1.1)"
    return 400, "HttpError", message


def refusal(
    error: BaseException | None,
    method: bytes | None,
    default_headers: Iterable[tuple[bytes, bytes]] = (),
) -> Refusal:
    """The answer to a request httptools refused (a pure function).

    Args:
        error: the parser's exception (an ``httptools.HttpParserError``).
        method: the method the parser read, if any (``PRI`` names an HTTP/2 preface).
        default_headers: the server's headers for every response (``date``).

    Returns:
        The refusal: a JSON ``{"error": {"type", "message"}}`` response that closes
        the connection.
    """
    status, kind, message = _why(error, method)
    body = json.dumps({"error": {"type": kind, "message": message}}).encode("ascii")
    head = [b"HTTP/1.1 ", _STATUS[status], b"\r\n"]
    for name, value in default_headers:
        head += [name, b": ", value, b"\r\n"]
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
    head.append(b"connection: close\r\n\r\n")
    return Refusal(status, message, b"".join(head) + body)


class _WithoutParseLine(logging.Filter):
    """Drops uvicorn's reasonless line: `malformed_request` says it with the reason."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _UVICORN_LINE


def quiet_uvicorn() -> None:
    """Filter uvicorn's "Invalid HTTP request received." line out (once per process).

    uvicorn logs it only when its parser refuses a request, so no other request pays
    for the filter.
    """
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _WithoutParseLine) for f in logger.filters):
        logger.addFilter(_WithoutParseLine())

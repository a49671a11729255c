"""One call to the daemon's HTTP API: its address, its bodies, its retries, its errors.

`parse_address` reads the addresses `memoryd.connect` accepts. A `DaemonCaller`
sends one API call and retries it until the call's deadline, and turns what went
wrong into the store's exceptions:

* no connection could be made (nothing was sent): ``StoreUnavailable``, retried;
* the connection failed once the request was on its way: ``WriteTimeout`` (the
  outcome is unknown), retried only for a call that may run twice without harm;
* the daemon answered with an error: the exception it reported
  (`memoryd.protocol.error_from_wire`), retried only when it is a ``StoreUnavailable``
  other than ``StoreNotRunning`` (and, for a call that must not run twice, other
  than ``WriteTimeout``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from memoryd._json_values import loads
from memoryd.client._http import ConnectFailed, HttpTransport, Reply, TransportFailed
from memoryd.errors import CorruptRecord, StoreNotRunning, StoreUnavailable, WriteTimeout
from memoryd.protocol import ProtocolError, error_from_wire

__all__ = ["MAX_ERROR_MESSAGE_CHARS", "DaemonCaller", "parse_address"]

_MSGPACK = "application/msgpack"
_JSON = "application/json"
_FIRST_BACKOFF_S = 0.02
_MAX_BACKOFF_S = 0.5


ADDRESS_SCHEMES = ("unix", "http", "https")
"""The schemes a daemon address may have."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _load_unpack_wire(body: bytes) -> Any:
    """`memoryd.codec.unpack_wire`, once the codec (and msgpack) is loaded for it."""
    global _unpack_wire  # noqa: PLW0603 (bound to the codec's own function from then on)
    from memoryd import codec  # noqa: PLC0415 (msgpack: only for a msgpack body)

    _unpack_wire = codec.unpack_wire
    return codec.unpack_wire(body)


def _load_pack_wire(body: dict[str, Any], *, trusted: bool) -> bytes:
    """`memoryd.codec.pack_wire`, once the codec (and msgpack) is loaded for it."""
    global _pack_wire  # noqa: PLW0603 (bound to the codec's own function from then on)
    from memoryd import codec  # noqa: PLC0415 (msgpack: only for a msgpack body)

    _pack_wire = codec.pack_wire
    return codec.pack_wire(body, trusted=trusted)


# A client on JSON bodies never loads the codec: the first msgpack body loads it, and
# these names are then the codec's functions themselves.
_unpack_wire: Callable[[bytes], Any] = _load_unpack_wire
_pack_wire: Callable[..., bytes] = _load_pack_wire


def parse_address(address: str) -> tuple[str, str | None]:
    """``(base_url, unix_socket_path or None)`` for an address.

    Raises:
        ValueError: an address that is neither ``unix://PATH``, a socket path, nor
            ``http://HOST:PORT`` (or ``HOST:PORT``).
    """
    if not isinstance(address, str) or not address:
        raise ValueError(f"a daemon address must be a non-empty str, not {address!r}")
    if address.startswith("unix://"):
        return "http://memoryd", address[len("unix://") :]
    if address.startswith("unix:"):
        return "http://memoryd", address[len("unix:") :]
    if address.startswith(("http://", "https://")):
        return address.rstrip("/"), None
    scheme = _SCHEME.match(address)
    if scheme is not None:
        raise ValueError(
            f"daemon address {address!r} has the scheme {scheme.group(1)!r}; memoryd speaks "
            f"{', '.join(s + '://' for s in ADDRESS_SCHEMES)} (or a plain socket path or HOST:PORT)"
        )
    if "/" in address or address.endswith(".sock"):
        return "http://memoryd", address
    if ":" in address:
        return f"http://{address}", None
    raise ValueError(
        f"cannot read daemon address {address!r}: use unix:///path/to/memoryd.sock, "
        "a socket path, or http://HOST:PORT"
    )


_VERSION_HEAD = b"\x81\xa7version"
"""A msgpack map of one key, ``version``: the start of every write's answer."""

_UINT_BYTES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
"""The msgpack unsigned integer heads, and how many big-endian bytes follow each."""


def _version_answer(body: bytes) -> dict[str, int] | None:
    """``{"version": n}`` when ``body`` is exactly that map in msgpack, else None.

    A write's answer is read without the general decoder: its one unsigned integer is
    read from the bytes, and any other body (an error, more fields) is left to it.
    """
    if len(body) < 10 or body[:9] != _VERSION_HEAD:
        return None
    head = body[9]
    if head < 0x80:  # a positive fixint
        return {"version": head} if len(body) == 10 else None
    size = _UINT_BYTES.get(head)
    if size is None or len(body) != 10 + size:
        return None
    return {"version": int.from_bytes(body[10:], "big")}


def _decode(response: Reply) -> Any:
    try:
        if response.content_type.startswith(_MSGPACK):
            body = response.body
            if body[:1] == b"\x81":
                answer = _version_answer(body)
                if answer is not None:
                    return answer
            return _unpack_wire(body)
        return loads(response.body) if response.body else {}
    except (ValueError, CorruptRecord) as exc:
        raise ProtocolError(
            f"the daemon answered HTTP {response.status} with an unreadable body: {exc}"
        ) from None


MAX_ERROR_MESSAGE_CHARS = 4096
"""The most characters of an error's message kept from the daemon's answer: a daemon's
messages are sentences; a longer one is cut (and says so)."""


def _bounded_error(body: Any) -> Any:
    """An error answer whose message is cut to `MAX_ERROR_MESSAGE_CHARS` (a new object;
    anything else as it is)."""
    error = body.get("error") if type(body) is dict else None
    message = error.get("message") if type(error) is dict else None
    if type(message) is not str or len(message) <= MAX_ERROR_MESSAGE_CHARS:
        return body
    cut = f"{message[:MAX_ERROR_MESSAGE_CHARS]}... ({len(message)} characters in all)"
    return {**body, "error": {**error, "message": cut}}  # type: ignore[dict-item]


class DaemonCaller:
    """Calls to one daemon, with the headers of one handle (thread-safe).

    Args:
        address: the daemon's address as the caller wrote it (for messages).
        base_url: the daemon's base URL (from `parse_address`).
        uds: the daemon's Unix socket path, or None for TCP.
        token: the daemon's bearer token, or None.
        autostart: let the daemon start a named store on first use.
        msgpack: msgpack bodies (True) or JSON (False).

    Raises:
        ValueError: a token that cannot be sent in a header.
    """

    def __init__(
        self,
        address: str,
        *,
        base_url: str,
        uds: str | None,
        token: str | None,
        autostart: bool,
        msgpack: bool,
    ) -> None:
        self.address = address
        self.msgpack = msgpack
        """Bodies are msgpack (else JSON)."""
        kind = _MSGPACK if msgpack else _JSON
        headers = {"accept": kind}
        if token:
            headers["authorization"] = f"Bearer {token}"
        if not autostart:
            headers["memoryd-autostart"] = "no"
        self._http = HttpTransport(
            base_url, uds=uds, headers=headers, body_headers={"content-type": kind}
        )

    def close(self) -> None:
        """Close every connection to the daemon."""
        self._http.close()

    def _encode(self, body: dict[str, Any] | None) -> bytes | None:
        if body is None:
            return None
        if self.msgpack:
            return _pack_wire(body, trusted=True)
        return json.dumps(body, ensure_ascii=False).encode()

    def call(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        retry: bool,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        content: bytes | None = None,
    ) -> Any:
        """One API call with retries until the deadline.

        Args:
            method: the HTTP method.
            path: the path under the daemon's base URL.
            timeout: the call's deadline in seconds from now, retries included.
            retry: the call may run twice without harm (reads, keyed adds), so it is
                resent after an answer was lost; otherwise only when it was surely not run.
            params: query parameters (None values are left out).
            body: the request body.
            content: instead of ``body``, the body already encoded as this caller's
                bodies are (msgpack or JSON).

        Returns:
            The decoded answer.

        Raises:
            StoreUnavailable: the daemon could not be reached until the deadline.
            WriteTimeout: the call's outcome is unknown.
            MemorydError: the error the daemon reported (its message cut to
                `MAX_ERROR_MESSAGE_CHARS`), or `ProtocolError` for an answer that is not
                one of memoryd's (unreadable, or a status other than 2xx, 4xx and 5xx).
            ValueError: the daemon reported one, or the request cannot be sent.
        """
        query = {k: v for k, v in params.items() if v is not None} if params else None
        if body is not None:
            content = self._encode(body)
        deadline = time.monotonic() + timeout
        backoff = _FIRST_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                response = self._http.request(
                    method,
                    path,
                    params=query,
                    content=content,
                    timeout=max(remaining, 0.05),
                )
            except ConnectFailed as exc:
                failure: Exception = StoreUnavailable(
                    f"cannot reach the memoryd daemon at {self.address}: {exc}; is it running?"
                )
            except TransportFailed as exc:
                failure = WriteTimeout(
                    f"the connection to {self.address} failed during a {method} of {path} "
                    f"({type(exc).__name__}: {exc}); its outcome is unknown"
                )
                if not retry:
                    raise failure from None
            else:
                if response.status < 300:
                    return _decode(response)
                if response.status < 400:
                    raise ProtocolError(
                        f"{self.address} answered a {method} of {path} with HTTP "
                        f"{response.status}; a memoryd daemon answers 2xx, or 4xx/5xx with an "
                        "error: is it a memoryd daemon?"
                    )
                error = error_from_wire(response.status, _bounded_error(_decode(response)))
                if isinstance(error, StoreNotRunning) or not isinstance(error, StoreUnavailable):
                    raise error
                if isinstance(error, WriteTimeout) and not retry:
                    raise error
                failure = error
            if time.monotonic() + backoff >= deadline:
                raise failure
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

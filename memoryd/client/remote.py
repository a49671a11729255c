"""The daemon's client: `connect` and `RemoteStore`, a store handle over HTTP.

```python
store = memoryd.connect("unix:///srv/memoryd/memoryd.sock")          # the default store
notes = memoryd.connect("http://127.0.0.1:8765", token=t, store="notes")
notes.add("session-1", [messages.user("hi")])
```

A `RemoteStore` has exactly the store methods and raises the same exceptions as a
local store (arguments are checked in the caller's thread before anything is
sent), so providers, kernels and agents work against the daemon unchanged.

Every ``add`` carries an idempotency key (one is generated when the caller gives
none), so an add whose answer was lost (daemon restarting, connection dropped,
``504``) is sent again until the call's deadline: no loss, no duplicate. Reads
are retried the same way. ``pop``, ``clear`` and ``fork`` have no key: they are
retried only when the daemon surely did not run them, otherwise they raise
``WriteTimeout``. ``import_events`` is idempotent, so it is retried like an add.
Each call, its retries and its errors are `memoryd.client.calls.DaemonCaller`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

from memoryd._deadline import until
from memoryd._ids import IdSource
from memoryd.client import _answers as answers
from memoryd.client.calls import DaemonCaller, parse_address
from memoryd.errors import ProtocolError, StoreNotRunning, StoreUnavailable, UnknownStore
from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES, validate_conversation_id
from memoryd.protocol import (
    AUTO_KEY_PREFIX,
    DEFAULT_STORE_NAME,
    change_from_wire,
    check_store_name,
    event_from_wire,
    event_to_wire,
)
from memoryd.store import requests
from memoryd.store.handle import StoreHandle
from memoryd.store.requests import check_optional_count

if TYPE_CHECKING:
    from memoryd.events import Change, Event
    from memoryd.store.requests import WriteRequest

__all__ = ["DEFAULT_TIMEOUT_S", "RemoteStore", "connect", "whereis"]

DEFAULT_TIMEOUT_S = 30.0
"""The default deadline of one call, retries included."""

_TAIL_SLICE_S = 60.0

_auto_key = IdSource(AUTO_KEY_PREFIX).next
"""A new idempotency key for a caller that gave none, unique across processes.

``AUTO_KEY_PREFIX``, 128 random bits drawn once per process (again in a forked
child), and a per-process counter: no system call per key, and about 60 bytes,
well under the 256-byte limit.
"""


_LAST_PATHS = 256
"""How many last-N read targets a handle keeps ready (one per conversation and limit read)."""

_ADD_PATHS = 256
"""How many add targets a handle keeps ready (one per conversation added to)."""

_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-~")
"""Characters a path segment carries as they are (``quote`` leaves them alone)."""


def _segment(cid: str) -> str:
    """A conversation id as one URL path segment (dots escaped so no client normalises them)."""
    if _PLAIN.issuperset(cid):
        return cid
    return quote(cid, safe="").replace(".", "%2E")


def _messages(answer: Any, call: str) -> list[dict[str, Any]]:
    return answers.listed(answer, "messages", dict, call)


_EVENT_READS = 5
"""How many times a paged read of a log starts over when clears keep cutting it."""


def _events(answer: Any, call: str) -> tuple[list[Event], bool]:
    """A page of events, and whether more follow it (a daemon that does not page its
    answers sends the whole log, and no ``more``)."""
    found = answers.converted(answers.listed(answer, "events", dict, call), event_from_wire, call)
    return found, answers.optional_flag(answer, "more", call)


def _changes(answer: Any, call: str) -> list[Change]:
    found = answers.listed(answer, "changes", dict, call)
    return answers.converted(found, change_from_wire, call)


def _conversations(answer: Any, call: str) -> list[str]:
    return answers.listed(answer, "conversations", str, call)


class RemoteStore(StoreHandle):
    """A store served by a memoryd daemon.

    Prefer `connect` (or `RemoteStore.start` to start a named store exclusively).

    Args:
        address: ``unix:///path/memoryd.sock``, a socket path, or ``http://host:port``.
        token: the daemon's bearer token (TCP).
        store: a named store, or None for the daemon's default store.
        timeout: the deadline of each call in seconds, retries included.
        autostart: let the daemon start the named store on first use; False makes
            calls on a stopped store raise `StoreNotRunning`, as with a local handle.
        max_message_bytes: the largest message checked locally before sending.
        wire: ``"msgpack"`` (default) or ``"json"`` bodies.
        empty_when_missing: a named store the daemon never had reads as an empty store
            would (no messages, version 0, no events, conversations or changes) until its
            first write creates it; False raises `UnknownStore` instead (the command line
            does, so a mistyped name is said, not read as empty). A read never creates it.
            `stats` is not such a read: its figures (commits, fsyncs, sizes) are those of
            a store the daemon runs, so for one it never had it raises `UnknownStore`.

    Raises:
        ValueError: a bad address, store name, timeout or wire format.
    """

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        store: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        autostart: bool = True,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        wire: str = "msgpack",
        empty_when_missing: bool = True,
    ) -> None:
        base_url, uds = parse_address(address)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
        if wire not in ("msgpack", "json"):
            raise ValueError(f"wire must be 'msgpack' or 'json', not {wire!r}")
        self.name = DEFAULT_STORE_NAME if store is None else check_store_name(store)
        self.address = address
        self.timeout = float(timeout)
        self.max_message_bytes = max_message_bytes
        self._prefix = "/v1" if self.name == DEFAULT_STORE_NAME else f"/v1/stores/{self.name}"
        self._daemon = DaemonCaller(
            address,
            base_url=base_url,
            uds=uds,
            token=token,
            autostart=autostart,
            msgpack=wire == "msgpack",
        )
        self._closed = False
        self._empty_when_missing = bool(empty_when_missing)
        self._last_paths: dict[tuple[str, int], str] = {}
        self._add_paths: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        address: str,
        *,
        name: str,
        token: str | None = None,
        ephemeral: bool = False,
        timeout: float = DEFAULT_TIMEOUT_S,
        wire: str = "msgpack",
    ) -> RemoteStore:
        """Start a named store on the daemon, like ``LmdbStore.start`` does locally.

        The handle does not restart the store: once it is stopped, calls raise
        `StoreNotRunning`.

        Args:
            address: the daemon's address.
            name: the store's name.
            token: the daemon's token.
            ephemeral: an ephemeral store (deleted when stopped) instead of a durable one.
            timeout: the deadline of each call.
            wire: ``"msgpack"`` or ``"json"``.

        Returns:
            A handle on the new store.

        Raises:
            AlreadyStarted: a store of that name runs on the daemon.
            ValueError: a bad name or address.
            StoreUnavailable: the daemon cannot be reached.
        """
        handle = cls(address, token=token, store=name, timeout=timeout, autostart=False, wire=wire)
        try:
            body = {"kind": "ephemeral" if ephemeral else "lmdb", "exclusive": True}
            path = f"/v1/stores/{handle.name}"
            info = handle._call("PUT", path, body=body, retry=False)
            handle.max_message_bytes = answers.positive_int(
                info, "max_message_bytes", f"PUT {path}", handle.max_message_bytes
            )
        except BaseException:
            handle.close()
            raise
        return handle

    def close(self) -> None:
        """Close this handle's connections (the daemon's store keeps running)."""
        self._closed = True
        self._daemon.close()

    def stop(self) -> None:
        """Stop the store on the daemon and close this handle.

        The daemon's default store runs as long as the daemon: for it, this only
        closes the handle.
        """
        if self._closed:
            return
        try:
            if self.name != DEFAULT_STORE_NAME:
                self._call("DELETE", f"/v1/stores/{self.name}", retry=True)
        finally:
            self.close()

    def crash(self) -> bool:
        """Fault injection: crash the store's actor on the daemon (``--fault-injection``).

        Returns:
            True if the crash was delivered.
        """
        path = f"/v1/stores/{self.name}/crash"
        return answers.flag(self._call("POST", path, retry=False), "killed", f"POST {path}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RemoteStore)
            and other.name == self.name
            and other.address == self.address
        )

    def __hash__(self) -> int:
        return hash(("RemoteStore", self.address, self.name))

    def __repr__(self) -> str:
        return f"<RemoteStore {self.name!r} at {self.address}>"

    # -- transport -------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        retry: bool,
        wait_s: float = 0.0,
    ) -> Any:
        """One API call with retries until this handle's deadline (see `DaemonCaller.call`).

        ``wait_s`` is how long the daemon may hold the request on purpose (a long
        poll): it extends the deadline.

        Raises:
            StoreUnavailable: the handle was closed or stopped, or the daemon is unreachable.
        """
        if self._closed:
            raise StoreUnavailable(f"this handle on store {self.name!r} was closed or stopped")
        timeout = self._read_timeout() if method == "GET" else self.timeout
        return self._daemon.call(
            method, path, timeout=timeout + wait_s, retry=retry, params=params, body=body
        )

    def _read_timeout(self) -> float:
        """A read's deadline in seconds from now: ``timeout``, or the caller's sooner one
        (`memoryd._deadline.bounded`). A write keeps ``timeout``: cut sooner, a healthy
        write would end with its outcome unknown."""
        return until(self.timeout) - time.monotonic()

    def _read(
        self,
        path: str,
        field: Callable[[Any, str], Any],
        empty: Any,
        *,
        params: Any = None,
        wait_s: float = 0.0,
    ) -> Any:
        """The field a read's answer holds, taken and checked by ``field`` (the answer
        and the call, for its message); ``empty`` for a store the daemon never had.

        Raises:
            UnknownStore: the daemon never had this store, and this handle does not
                read a missing store as empty.
            ProtocolError: the answer is not of the shape ``field`` takes.
        """
        try:
            answer = self._call("GET", path, params=params, retry=True, wait_s=wait_s)
        except UnknownStore:
            if not self._empty_when_missing:
                raise
            return empty
        return field(answer, f"GET {path}")

    def _conv(self, cid: str, suffix: str) -> str:
        return f"{self._prefix}/conversations/{_segment(cid)}/{suffix}"

    # -- writes ----------------------------------------------------------------------

    def add(
        self,
        cid: str,
        messages: Sequence[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        then_clear: str | None = None,
    ) -> int:
        """Append ``messages`` to ``cid`` as one event (see `StoreHandle.add`).

        The busiest add (a plain list or tuple of messages, no key, version or
        ``then_clear``, to a conversation this handle added to before) checks each
        message once and encodes the body straight from it (`memoryd.client._adds`): the
        body is the snapshot, so changing the messages afterwards changes nothing sent.
        Any other add, and any message that check cannot take as it is, goes through
        `StoreHandle.add`'s checks, with the same errors.

        Raises:
            InvalidConversationId: a bad ``cid`` or ``then_clear``.
            InvalidMessage: a bad or oversized message (nothing is sent).
            ValueError: ``then_clear`` is ``cid``, or another bad argument.
            ConflictError: ``expected_version`` did not match.
            WriteTimeout: no answer in time; retry with the same idempotency key.
            StoreUnavailable: the store is not running, or the handle was closed.
        """
        if (
            idempotency_key is None
            and expected_version is None
            and then_clear is None
            and type(cid) is str
            and (type(messages) is list or type(messages) is tuple)
        ):
            path = self._add_paths.get(cid)
            if path is not None and self._daemon.msgpack:
                from memoryd.client._adds import encode_add  # noqa: PLC0415 (loads msgpack)

                content = encode_add(messages, _auto_key(), self.max_message_bytes)
                if content is not None:
                    if self._closed:
                        raise StoreUnavailable(
                            f"this handle on store {self.name!r} was closed or stopped"
                        )
                    answer = self._daemon.call(
                        "POST", path, timeout=self.timeout, retry=True, content=content
                    )
                    return answers.version(answer, f"POST {path}")
        return super().add(
            cid,
            messages,
            idempotency_key=idempotency_key,
            expected_version=expected_version,
            then_clear=then_clear,
        )

    def _add_path(self, cid: str) -> str:
        """The target of an add to ``cid`` (checked by the caller), kept ready."""
        path = self._conv(cid, "messages")
        if len(self._add_paths) >= _ADD_PATHS:
            self._add_paths.clear()
        self._add_paths[cid] = path
        return path

    # -- backend hooks ---------------------------------------------------------------

    def _write(self, request: WriteRequest) -> Any:
        if isinstance(request, requests.Add):
            key = request.idempotency_key or _auto_key()
            body = {
                "messages": request.messages,  # a tuple: sent as an array, not copied
                "idempotency_key": key,
                "expected_version": request.expected_version,
            }
            if request.then_clear is not None:
                body["then_clear"] = request.then_clear
            path = self._add_paths.get(request.cid) or self._add_path(request.cid)
            return answers.version(self._call("POST", path, body=body, retry=True), f"POST {path}")
        if isinstance(request, requests.Clear):
            self._call("DELETE", self._conv(request.cid, "messages"), retry=False)
            return None
        if isinstance(request, requests.Pop):
            path = self._conv(request.cid, "pop")
            return answers.message_or_none(self._call("POST", path, retry=False), f"POST {path}")
        if isinstance(request, requests.Fork):
            body = {"target": request.target, "at_version": request.at_version}
            path = self._conv(request.source, "fork")
            return answers.version(self._call("POST", path, body=body, retry=False), f"POST {path}")
        if isinstance(request, requests.Record):
            key = request.idempotency_key or _auto_key()
            record: dict[str, Any] = {
                "kind": request.kind,
                "messages": request.messages,  # a tuple: sent as an array, not copied
                "data": request.data,
                "idempotency_key": key,
                "expected_version": request.expected_version,
            }
            if request.supersede:
                record["supersede"] = True
            path = self._conv(request.cid, "record")
            return answers.version(
                self._call("POST", path, body=record, retry=True), f"POST {path}"
            )
        if isinstance(request, requests.Import):
            # Importing is idempotent (identical events are skipped), so a lost answer
            # is safely sent again. Keys travel verbatim, client-generated ones too.
            events = [
                {**event_to_wire(e), "idempotency_key": e.idempotency_key} for e in request.events
            ]
            path = self._conv(request.cid, "import")
            return answers.version(
                self._call("POST", path, body={"events": events}, retry=True), f"POST {path}"
            )
        raise TypeError(f"unknown write request {request!r}")

    def get(
        self,
        cid: str,
        *,
        limit: int | None = None,
        at_version: int | None = None,
        system: bool = False,
    ) -> list[dict[str, Any]]:
        """The conversation's history, chronological: fresh copies (see `StoreHandle.get`).

        A last-N read (``limit`` only), the busiest, sends a target made once per
        conversation and limit, from the id and limit checked then.

        Raises:
            ValueError: a bad ``limit`` or ``system``, or ``at_version`` past the end or
                before a clear.
        """
        if at_version is None and system is False and type(cid) is str and type(limit) is int:
            path = self._last_paths.get((cid, limit))
            if path is None:
                path = self._last_path(cid, limit)
            if self._closed:
                raise StoreUnavailable(f"this handle on store {self.name!r} was closed or stopped")
            try:
                answer = self._daemon.call("GET", path, timeout=self._read_timeout(), retry=True)
            except UnknownStore:
                if not self._empty_when_missing:
                    raise
                return []
            return answers.listed(answer, "messages", dict, f"GET {path}")
        return super().get(cid, limit=limit, at_version=at_version, system=system)

    def _last_path(self, cid: str, limit: int) -> str:
        """The target of the last ``limit`` messages of ``cid``, both checked, kept ready.

        Raises:
            InvalidConversationId: a bad ``cid``.
            ValueError: a bad ``limit``.
        """
        path = f"{self._conv(validate_conversation_id(cid), 'messages')}?limit="
        path += str(check_optional_count(limit, "limit"))
        if len(self._last_paths) >= _LAST_PATHS:
            self._last_paths.clear()
        self._last_paths[(cid, limit)] = path
        return path

    def _get(self, cid: str, limit: int | None, at_version: int | None) -> list[dict[str, Any]]:
        path = self._conv(cid, "messages")
        if at_version is None:  # the busiest read: its target spelled out, no parameters
            if limit is not None:
                path = f"{path}?limit={limit}"
            messages: list[dict[str, Any]] = self._read(path, _messages, [])
        else:
            params = {"limit": limit, "at_version": at_version}
            messages = self._read(path, _messages, [], params=params)
        return messages

    def _get_system(self, cid: str, limit: int) -> list[dict[str, Any]]:
        params = {"limit": limit, "system": "true"}
        messages: list[dict[str, Any]] = self._read(
            self._conv(cid, "messages"), _messages, [], params=params
        )
        return messages

    def _version(self, cid: str) -> int:
        version: int = self._read(self._conv(cid, "version"), answers.version, 0)
        return version

    def _events(self, cid: str, after: int, limit: int | None) -> list[Event]:
        # The daemon answers a page at a time (at most 1,000 events): a long log is read
        # in pages, each after the last version of the one before. A clear between two
        # pages removes the events the next page would start with, and a log pieced
        # together across it would skip versions: the read starts over, so the log read
        # is one the conversation held (an import refuses a log with a gap).
        path = self._conv(cid, "events")
        for _ in range(_EVENT_READS):
            found = self._events_paged(path, after, limit)
            if found is not None:
                return found
        raise StoreUnavailable(
            f"the log of {cid!r} was cleared while it was read, {_EVENT_READS} times "
            "running; read it again"
        )

    def _events_paged(self, path: str, after: int, limit: int | None) -> list[Event] | None:
        """The log read page by page, or None when a clear between pages cut it."""
        found: list[Event] = []
        while limit is None or len(found) < limit:
            params = {"after": after}
            if limit is not None:
                params["limit"] = limit - len(found)
            page, more = self._read(path, _events, ([], False), params=params)
            if page and page[0].version <= after:  # a page that would be read for ever
                raise ProtocolError(
                    f"the daemon's answer to GET {path} holds version {page[0].version}, "
                    f"not one after {after}; is it a memoryd daemon?"
                )
            if found and page and page[0].version != after + 1:
                return None
            found += page
            if not more or not page:
                break
            after = page[-1].version
        return found

    def _conversations(
        self, prefix: str, after: str | None, limit: int | None, include_empty: bool
    ) -> list[str]:
        params = {
            "prefix": prefix or None,
            "after": after,
            "limit": limit,
            "include_empty": "true" if include_empty else None,
        }
        names: list[str] = self._read(
            f"{self._prefix}/conversations", _conversations, [], params=params
        )
        return names

    def _tail(self, after: int, limit: int, timeout: float) -> list[Change]:
        until = time.monotonic() + timeout
        while True:
            wait = max(0.0, min(until - time.monotonic(), _TAIL_SLICE_S))
            params = {"after": after, "limit": limit, "timeout": round(wait, 3)}
            changes: list[Change] | None = self._read(
                f"{self._prefix}/tail", _changes, None, params=params, wait_s=wait
            )
            if changes is None:  # a store the daemon never had: nothing can change meanwhile
                time.sleep(wait)
                changes = []
            if changes or time.monotonic() >= until:
                return changes

    def stats(self) -> dict[str, Any]:
        """The store's counts and sizes, as the daemon reports them.

        Raises:
            UnknownStore: the daemon never had this store (even with
                ``empty_when_missing``: there are no figures of a store not yet made).
        """
        path = f"{self._prefix}/stats"
        return answers.mapping(self._call("GET", path, retry=True), f"GET {path}")


def connect(
    address: str | None = None,
    *,
    token: str | None = None,
    store: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    wire: str = "msgpack",
    empty_when_missing: bool = True,
) -> RemoteStore:
    """A handle on a store served by a memoryd daemon (no connection is made yet).

    Args:
        address: ``unix:///path/memoryd.sock``, a socket path, or ``http://host:port``;
            default ``$MEMORYD_ADDRESS``.
        token: the daemon's bearer token; default ``$MEMORYD_TOKEN``.
        store: a named store (started by the daemon on first use), or None for the
            daemon's default store.
        timeout: the deadline of each call in seconds, retries included.
        wire: ``"msgpack"`` (default) or ``"json"`` bodies.
        empty_when_missing: a named store the daemon never had reads as empty until
            its first write creates it; False raises `UnknownStore` (see `RemoteStore`).

    Returns:
        The handle.

    Raises:
        ValueError: no address given nor in ``$MEMORYD_ADDRESS``, or a bad one.
    """
    if address is None:
        address = os.environ.get("MEMORYD_ADDRESS")
        if not address:
            raise ValueError("no daemon address: pass one or set MEMORYD_ADDRESS")
    if token is None:
        token = os.environ.get("MEMORYD_TOKEN") or None
    return RemoteStore(
        address,
        token=token,
        store=store,
        timeout=timeout,
        wire=wire,
        empty_when_missing=empty_when_missing,
    )


def whereis(
    address: str, name: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> RemoteStore | None:
    """A handle on the daemon's running store ``name``, or None if it runs no such store.

    The handle does not restart the store (calls raise `StoreNotRunning` once it stops).

    Raises:
        ValueError: a bad address or name.
        StoreUnavailable: the daemon cannot be reached.
    """
    handle = RemoteStore(address, token=token, store=name, timeout=timeout, autostart=False)
    try:
        path = f"/v1/stores/{handle.name}"
        info = handle._call("GET", path, retry=True)
        handle.max_message_bytes = answers.positive_int(
            info, "max_message_bytes", f"GET {path}", handle.max_message_bytes
        )
    except StoreNotRunning:
        handle.close()
        return None
    except BaseException:
        handle.close()
        raise
    return handle

"""One write per response: a connection's transport that joins a response's head to its body.

uvicorn writes a response's head and its body apart, and each write to a socket wakes
the client once more; `OneWrite` stands between a connection
(`memoryd.server.limits.bounded`) and its transport and holds the head until the body
comes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OneWrite"]


class OneWrite:
    """The transport as a connection's response cycles see it: the head of a response
    whose body has a ``content-length`` waits for that body, and both go out in one write.

    A head is the first write of a started response; a response with a length always
    sends its body next (an empty one for ``HEAD`` ends the response instead, which
    flushes). Chunked (streamed) responses, interim ``100 Continue`` answers and
    everything else are written at once. Closing writes what is held first.
    """

    __slots__ = ("_cycle", "_head", "_protocol", "_transport")

    def __init__(self, transport: Any, protocol: Any) -> None:
        """Stand between ``protocol`` (a connection) and its ``transport``."""
        self._transport = transport
        self._protocol = protocol
        self._head: bytes | None = None
        self._cycle: Any = None  # the cycle whose head was seen last

    @property
    def raw(self) -> Any:
        """The transport itself, for a whole response written at once (nothing held)."""
        return self._transport

    def write(self, data: bytes) -> None:
        """Write ``data``, or hold it when it is the head of a response whose body follows."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
            return
        cycle = self._protocol.cycle
        if (
            cycle is not None
            and cycle is not self._cycle
            and cycle.response_started
            and not cycle.response_complete
        ):
            self._cycle = cycle  # this write is the cycle's head
            if cycle.chunked_encoding is False and cycle.expected_content_length > 0:
                self._head = data
                return
        self._transport.write(data)

    def flush(self) -> None:
        """Write the head held, if any."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)

    def close(self) -> None:
        """Write the head held, if any, and close the transport."""
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        """True once the transport is closing or closed."""
        return bool(self._transport.is_closing())

    def __getattr__(self, name: str) -> Any:
        """Everything else is the transport's."""
        return getattr(self._transport, name)

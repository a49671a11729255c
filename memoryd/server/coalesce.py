"""One socket write per response: the transport writes of a loop turn are joined.

uvicorn writes a response's head as soon as the app starts it and the body when
the app sends it: two ``send`` system calls for every small answer, each made
with the GIL held. `coalesced(base)` builds a subclass of uvicorn's HTTP
protocol whose transport holds the writes made during one turn of the event
loop and sends them together at the end of that turn (``call_soon``), so a
small response costs one system call. Nothing waits longer than the current
turn, and a close or an EOF sends what is held first.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["CoalescingTransport", "coalesced"]


class CoalescingTransport:
    """Wraps a transport: writes made in one loop turn leave in one ``write``.

    Args:
        transport: the real transport.
        loop: the loop that runs the protocol.
    """

    __slots__ = ("_held", "_loop", "_scheduled", "_transport")

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` until the end of this loop turn."""
        if not data:
            return
        self._held.append(bytes(data))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def writelines(self, chunks: Any) -> None:
        """Hold each chunk (see `write`)."""
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Send what is held now, in one write."""
        self._scheduled = False
        held = self._held
        if not held:
            return
        data = held[0] if len(held) == 1 else b"".join(held)
        held.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        """Bytes not yet sent: the real transport's buffer plus what is held."""
        return self._transport.get_write_buffer_size() + sum(len(c) for c in self._held)

    def close(self) -> None:
        """Send what is held, then close."""
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        """Send what is held, then half-close."""
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        """Drop what is held and abort the connection."""
        self._held.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def coalesced(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """A subclass of the protocol ``base`` whose transport is a `CoalescingTransport`.

    Args:
        base: uvicorn's HTTP protocol class (it keeps ``self.transport`` and hands it
            to each request cycle).

    Returns:
        The protocol class.
    """

    class Coalesced(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            loop = asyncio.get_running_loop()
            wrapped: Any = CoalescingTransport(transport, loop)  # type: ignore[arg-type]
            super().connection_made(wrapped)

    Coalesced.__name__ = Coalesced.__qualname__ = f"Coalesced{base.__name__}"
    return Coalesced

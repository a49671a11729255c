"""The coalescing transport: writes of one loop turn leave together, in order, and a
close in the same turn still delivers them. Real sockets, a real event loop."""

from __future__ import annotations

import asyncio
import socket

import pytest

from memoryd.server.coalesce import CoalescingTransport


class _Sink(asyncio.Protocol):
    pass


async def _pair() -> tuple[CoalescingTransport, asyncio.BaseTransport, socket.socket]:
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(_Sink, ours)
    return CoalescingTransport(transport, loop), transport, peer


async def _read_all(peer: socket.socket, until_eof: bool, want: int = 0) -> bytes:
    loop = asyncio.get_running_loop()
    got = b""
    while True:
        chunk = await asyncio.wait_for(loop.sock_recv(peer, 65536), 5)
        if not chunk:
            return got
        got += chunk
        if not until_eof and len(got) >= want:
            return got


def test_writes_are_held_until_the_turn_ends_then_sent_in_order() -> None:
    async def run() -> None:
        wrapped, _, peer = await _pair()
        wrapped.write(b"HTTP/1.1 200 OK\r\n\r\n")
        wrapped.write(memoryview(b"body-1"))
        wrapped.writelines([b"-2", b"-3"])
        assert wrapped.get_write_buffer_size() == 19 + 10
        with pytest.raises(BlockingIOError):
            peer.recv(100)  # nothing has left yet: it leaves at the end of this turn
        got = await _read_all(peer, until_eof=False, want=29)
        assert got == b"HTTP/1.1 200 OK\r\n\r\nbody-1-2-3"
        assert wrapped.get_write_buffer_size() == 0
        wrapped.close()
        peer.close()

    asyncio.run(run())


def test_close_in_the_same_turn_sends_what_is_held_first() -> None:
    async def run() -> None:
        wrapped, real, peer = await _pair()
        wrapped.write(b"last words")
        wrapped.close()
        assert real.is_closing()
        assert await _read_all(peer, until_eof=True) == b"last words"
        peer.close()

    asyncio.run(run())


def test_abort_drops_what_is_held() -> None:
    async def run() -> None:
        wrapped, _, peer = await _pair()
        wrapped.write(b"never sent")
        wrapped.abort()
        assert await _read_all(peer, until_eof=True) == b""
        peer.close()

    asyncio.run(run())


def test_empty_writes_schedule_nothing_and_other_calls_reach_the_transport() -> None:
    async def run() -> None:
        wrapped, real, peer = await _pair()
        wrapped.write(b"")
        assert wrapped.get_write_buffer_size() == 0
        assert wrapped.get_extra_info("socket") is real.get_extra_info("socket")
        assert wrapped.is_closing() is False
        wrapped.close()
        peer.close()

    asyncio.run(run())

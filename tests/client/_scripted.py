"""A scripted HTTP server for the client's tests: it answers with exactly the bytes given.

Each request gets the next `Answer` of the script: chunked bodies, bodies ended by
closing the connection, interim answers, malformed or truncated responses, silence.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from dataclasses import dataclass, field

__all__ = ["Answer", "ScriptedServer"]


@dataclass
class Answer:
    """What the scripted server does with one request.

    ``pieces`` are written one ``sendall`` each, after ``delay_s`` seconds; ``close``
    closes the connection afterwards; ``silent`` writes nothing and waits for the
    client to go away.
    """

    pieces: tuple[bytes, ...] = ()
    close: bool = False
    silent: bool = False
    delay_s: float = 0.0


@dataclass
class ScriptedServer:
    """A TCP server on 127.0.0.1 answering requests with a script of `Answer`s, in order."""

    answers: list[Answer]
    tls: ssl.SSLContext | None = None
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    closed_connections: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read_request(self, conn: socket.socket, pending: bytearray) -> bytes | None:
        while b"\r\n\r\n" not in pending:
            data = conn.recv(65536)
            if not data:
                return None
            pending += data
        head, _, rest = bytes(pending).partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            data = conn.recv(65536)
            if not data:
                return None
            rest += data
        pending[:] = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]

    def _serve(self, conn: socket.socket) -> None:
        pending = bytearray()
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while (request := self._read_request(conn, pending)) is not None:
                with self._lock:
                    self.requests.append(request)
                    answer = self.answers.pop(0)
                if answer.silent:
                    while conn.recv(65536):
                        pass
                    return
                if answer.delay_s:
                    self._stopping.wait(answer.delay_s)
                for piece in answer.pieces:
                    conn.sendall(piece)
                if answer.close:
                    return
        except OSError:
            return
        finally:
            conn.close()
            with self._lock:
                self.closed_connections += 1

    def close(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread in accept()
        self._listener.close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(10)

"""Real redis-server processes for the Redis store's tests: one server, or a local Cluster.

The tests need Debian's ``redis-server`` and ``redis-cli`` on PATH (``.ci/run``
installs them). Without them a fixture fails with a message that says so.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers import wait_until

__all__ = [
    "LossyProxy",
    "RedisCluster",
    "RedisServer",
    "cluster_ok",
    "free_port",
    "require_binaries",
]

_CLUSTER_OPTIONS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
_FORMING_NODE_TIMEOUT_MS = 15_000
"""The node timeout while a test cluster forms (see `RedisCluster`)."""
DURABLE = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")


def require_binaries() -> None:
    """Fail (never skip) when redis-server or redis-cli is missing."""
    missing = [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} not found on PATH: the Redis store's tests run a real "
            "server; install it with `apt-get install -y redis-server` (as .ci/run does)",
            pytrace=False,
        )


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(*, with_bus: bool = False) -> int:
    """A free loopback port (and, for Cluster, its bus port + 10000 free too).

    A Cluster node's two ports are drawn below the kernel's ephemeral range, so that no
    outgoing connection made between this choice and the node's start can take the bus
    port (a port picked by binding to 0 lies in that range, and its + 10000 often does).
    """
    if not with_bus:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    high = _ephemeral_low() - 10_000
    # pytest's worker processes (make test runs two) draw from disjoint residues, so two
    # workers never both find one port free and start a node on it.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    mine = int(worker) % workers if worker.isdigit() else 0
    for _ in range(500):
        port = random.randrange(max(1024, high - 4096), high)
        if port % workers == mine and _port_free(port) and _port_free(port + 10_000):
            return port
    raise RuntimeError("no free loopback port pair found below the ephemeral range")


class RedisServer:
    """One redis-server on 127.0.0.1 with its data (AOF) in ``directory``.

    Args:
        directory: the server's working directory (created).
        port: the port (a free one by default); a restart reuses it.
        extra: more server options, e.g. ``("--cluster-enabled", "yes")``.
    """

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        durable: tuple[str, ...] = DURABLE,
    ) -> None:
        require_binaries()
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = port if port is not None else free_port(with_bus=bool(extra))
        self.extra = extra
        self.durable = durable
        self.process: subprocess.Popen[bytes] | None = None
        self.joined = False
        """Set once the node is part of a `RedisCluster`: a restart then also waits
        until the node reports ``cluster_state:ok`` (a restarted master refuses writes
        with CLUSTERDOWN for its first two seconds)."""

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A plain client on this server (for the tests' own checks)."""
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def replication(self) -> dict[str, Any]:
        """``INFO replication`` of this server."""
        client = self.client()
        try:
            return dict(client.info("replication"))
        finally:
            client.close()

    def flush(self) -> None:
        """Delete every key (between tests sharing the server)."""
        client = self.client()
        try:
            client.flushall()
        finally:
            client.close()

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING (and has loaded its AOF);
        a Cluster node that had joined its cluster, until it reports the cluster ok."""
        args = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            *self.durable,
            *self.extra,
        ]  # fmt: skip
        log = (self.directory / "server.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        client = self.client()

        def answers() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                text = (self.directory / "server.log").read_text(errors="replace")[-2000:]
                raise AssertionError(f"redis-server exited: {text}")
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.BusyLoadingError):
                return False

        try:
            wait_until(answers, timeout=20, interval=0.02, message="redis-server did not start")
            if self.joined:
                wait_until(
                    lambda: cluster_ok(client),
                    timeout=30,
                    interval=0.05,
                    message=f"the restarted cluster node {self.port} did not report ok",
                )
        finally:
            client.close()
        return self

    def pause(self) -> None:
        """SIGSTOP the server: it holds its connections but answers nothing (a hung node)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused server."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the server (no shutdown, no final fsync) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """Stop the server for good (SIGKILL: nothing of it is needed after the test)."""
        self.kill()


def cluster_ok(client: redis.Redis) -> bool:
    """True when the node ``client`` talks to reports ``cluster_state:ok``."""
    try:
        info = client.execute_command("CLUSTER", "INFO")
    except (redis.ConnectionError, redis.BusyLoadingError):
        return False
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text


class RedisCluster:
    """A Redis Cluster on loopback: three masters, and ``replicas`` replicas of each.

    With ``lossy``, the last node is reached through a `LossyProxy`: the node announces
    the proxy's port as its own (``cluster-announce-port``; its cluster bus stays on
    its own port + 10000), so ``CLUSTER SLOTS`` and every ``MOVED`` name the proxy and
    each client connection to that node passes through it. The tests' own clients
    (`RedisServer.client`) still reach the node directly.

    Args:
        directory: one sub-directory per node is created under it.
        masters: how many masters share the slots.
        replicas: how many replicas each master gets (``--cluster-replicas``).
        node_timeout_ms: how long a node may be silent before it is failed over.
        lossy: put a `LossyProxy` in front of the last node (`proxy`, `lossy_node`).
    """

    def __init__(
        self,
        directory: Path,
        masters: int = 3,
        replicas: int = 0,
        node_timeout_ms: int = 5000,
        *,
        lossy: bool = False,
    ) -> None:
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        # The cluster forms with a patient node timeout and gets the one asked for once it
        # is in sync: a loaded machine could fail a master over while the cluster formed
        # (a short timeout), and its replicas never settled (a CI run saw it).
        forming = max(node_timeout_ms, _FORMING_NODE_TIMEOUT_MS)
        options = (*_CLUSTER_OPTIONS, "--cluster-node-timeout", str(forming))
        self.nodes = [
            RedisServer(directory / f"node-{i}", extra=options)
            for i in range(masters * (1 + replicas))
        ]
        self.proxy: LossyProxy | None = None
        if lossy:
            node = self.nodes[-1]
            self.proxy = LossyProxy(node.port)
            node.extra = (
                *options,
                "--cluster-announce-ip", "127.0.0.1",
                "--cluster-announce-port", str(self.proxy.port),
                "--cluster-announce-bus-port", str(node.port + 10000),
            )  # fmt: skip

    @property
    def lossy_node(self) -> RedisServer:
        """The node behind `proxy` (the cluster must have been made with ``lossy``)."""
        if self.proxy is None:
            raise AssertionError("this cluster has no lossy node: make it with lossy=True")
        return self.nodes[-1]

    @property
    def url(self) -> str:
        """The URL of the first node (redis-py discovers the others)."""
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        """Start the nodes, join them with ``redis-cli --cluster create``, wait for ok."""
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses,
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip

        def all_ok() -> bool:
            for node in self.nodes:
                client = node.client()
                try:
                    if not cluster_ok(client):
                        return False
                finally:
                    client.close()
            return True

        wait_until(all_ok, timeout=30, interval=0.05, message="the cluster did not become ok")
        for node in self.nodes:
            node.joined = True
        if self.replicas:
            # Connected is not enough: WAIT counts only replicas past their first sync.
            wait_until(
                self.replicas_in_sync, timeout=30, interval=0.05, message="replicas not in sync"
            )
        for node in self.nodes:
            client = node.client()
            try:
                client.config_set("cluster-node-timeout", self.node_timeout_ms)
            finally:
                client.close()
        return self

    def replicas_in_sync(self) -> bool:
        """True when every replica's link is up, and every master has exactly its
        ``replicas`` replicas, seen online by the master and naming it themselves (while
        the cluster settles, one master may briefly count two and another none)."""
        claimed: dict[int, int] = {}
        for node in self.nodes:
            info = node.replication()
            if info.get("role") == "master":
                online = [
                    value
                    for key, value in info.items()
                    if key.startswith("slave") and isinstance(value, dict)
                ]
                if sum(1 for v in online if v.get("state") == "online") != self.replicas:
                    return False
                claimed.setdefault(node.port, 0)
            elif info.get("master_link_status") != "up":
                return False
            else:
                port = int(info.get("master_port", 0))
                claimed[port] = claimed.get(port, 0) + 1
        return all(count == self.replicas for count in claimed.values())

    def _by_port(self, port: int) -> RedisServer:
        """The node on ``port``, or announced there (the lossy node's proxy)."""
        if self.proxy is not None and port == self.proxy.port:
            return self.lossy_node
        return next(node for node in self.nodes if node.port == port)

    def shard_of(self, key: str) -> tuple[RedisServer, list[RedisServer]]:
        """The master holding ``key``'s slot (``CLUSTER SLOTS``), and its replicas
        (``INFO replication``, which is current before the cluster's gossip is)."""
        client = self.nodes[0].client()
        try:
            slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
            ranges = client.execute_command("CLUSTER", "SLOTS")
        finally:
            client.close()
        port = next(
            (int(entry[2][1]) for entry in ranges if int(entry[0]) <= slot <= int(entry[1])),
            None,
        )
        if port is None:
            raise AssertionError(f"slot {slot} of {key!r} is served by no node")
        replicas = []
        for node in self.nodes:
            info = node.replication()
            if info.get("role") == "slave" and int(info.get("master_port", 0)) == port:
                replicas.append(node)
        return self._by_port(port), replicas

    def topology(self) -> dict[int, str]:
        """Each node's role as it sees itself: ``"master"``, or ``"replica of <port>"``
        (``"down"`` for one that does not answer); for failure messages."""
        roles: dict[int, str] = {}
        for node in self.nodes:
            try:
                info = node.replication()
            except redis.RedisError:
                roles[node.port] = "down"
                continue
            role = info.get("role")
            roles[node.port] = (
                f"replica of {info.get('master_port')}" if role == "slave" else str(role)
            )
        return roles

    def flush(self) -> None:
        """FLUSHALL on every master (replicas follow)."""
        for node in self.nodes:
            if node.replication().get("role") == "master":
                node.flush()

    def stop(self) -> None:
        """Kill every node (and close the lossy node's proxy)."""
        if self.proxy is not None:
            self.proxy.close()
        for node in self.nodes:
            node.stop()


class LossyProxy:
    """A TCP proxy in front of a redis-server that can lose one reply on purpose.

    Everything is passed through both ways until `lose_reply_to` arms it: then the
    first request holding ``marker`` is passed on, Redis runs it, and its reply is
    dropped; ``then()`` runs (flush the script cache, kill and restart the server,
    ...), and the client's connection is closed, so the client sees a lost
    connection after its command was applied.

    Args:
        port: the redis-server's port on 127.0.0.1.
    """

    def __init__(self, port: int) -> None:
        self.target = port
        self.lost = threading.Event()
        """Set once a reply was dropped."""
        self._lock = threading.Lock()
        self._armed: tuple[bytes, Callable[[], None]] | None = None
        self._socks: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<proxy port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def lose_reply_to(self, marker: bytes, then: Callable[[], None]) -> None:
        """Drop the reply to the next request holding ``marker``, run ``then``, and
        close that client connection."""
        with self._lock:
            self.lost.clear()
            self._armed = (marker, then)

    def disarm(self) -> None:
        """Forget a `lose_reply_to` that has not fired (between tests sharing the proxy)."""
        with self._lock:
            self._armed = None
        self.lost.clear()

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            _close(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._socks += [client, upstream]
            victim = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, victim), daemon=True).start()
            threading.Thread(
                target=self._down, args=(upstream, client, victim), daemon=True
            ).start()

    def _up(self, client: socket.socket, upstream: socket.socket, victim: threading.Event) -> None:
        tail = b""
        while True:
            try:
                chunk = client.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                _close(upstream)
                return
            with self._lock:
                armed = self._armed
                if armed is not None and armed[0] in tail + chunk:
                    victim.set()
            tail = chunk[-256:]
            try:
                upstream.sendall(chunk)
            except OSError:
                _close(client)
                return

    def _down(
        self, upstream: socket.socket, client: socket.socket, victim: threading.Event
    ) -> None:
        while True:
            try:
                chunk = upstream.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                _close(client)
                return
            if victim.is_set():
                with self._lock:
                    armed, self._armed = self._armed, None
                if armed is not None:
                    armed[1]()
                _close(client)
                _close(upstream)
                self.lost.set()
                return
            try:
                client.sendall(chunk)
            except OSError:
                _close(upstream)
                return


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()

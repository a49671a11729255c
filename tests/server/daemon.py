"""A real ``memoryd serve`` process for tests: start, read its address and log, SIGTERM, SIGKILL."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

READY_TIMEOUT_S = 30.0
TOKEN = "test-token"


def serve_refused(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``memoryd serve --data DATA ARGS`` that is expected to refuse its arguments
    and exit at once (no ``MEMORYD_*`` variable of this process reaches it)."""
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "serve", "--data", str(data), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
    )


class Daemon:
    """One daemon process on ``data`` (a short temp path, so the socket path fits).

    Args:
        data: the data directory (default: a fresh one under /tmp).
        tcp: also listen on 127.0.0.1 with a free port.
        token: the TCP token (default `TOKEN`).
        extra: more ``serve`` arguments.
        nofile: the daemon's limit on open files (soft and hard, as ``ulimit -n``), or None.
    """

    def __init__(
        self,
        data: Path | None = None,
        *,
        tcp: bool = False,
        token: str | None = TOKEN,
        extra: tuple[str, ...] = ("--fault-injection",),
        nofile: int | None = None,
    ) -> None:
        self.nofile = nofile
        self._own_root = data is None
        self.root = (
            Path(tempfile.mkdtemp(prefix="md-", dir="/tmp")) if data is None else data.parent
        )
        self.data = self.root / "d" if data is None else data
        self.tcp = tcp
        self.token = token
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.unix: str = ""
        self.http: str = ""
        self.stderr_lines: list[str] = []

    @property
    def address(self) -> str:
        """The Unix socket address."""
        return f"unix://{self.unix}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "memoryd.cli", "serve", "--data", str(self.data)]
        if self.tcp:
            cmd += ["--listen", "127.0.0.1:0"]
        return cmd + list(self.extra)

    def start(self) -> Daemon:
        """Start the process and wait for its ready line."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        if self.tcp and self.token is not None:
            env["MEMORYD_TOKEN"] = self.token  # never on the command line, where ps shows it
        nofile = self.nofile

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            # only setrlimit runs between fork and exec (no locks taken)
            preexec_fn=limit_files if nofile is not None else None,  # noqa: PLW1509
        )
        proc = self.proc
        assert proc.stdout is not None and proc.stderr is not None
        errors = proc.stderr

        def drain() -> None:
            for line in errors:
                self.stderr_lines.append(line)

        threading.Thread(target=drain, daemon=True).start()
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(READY_TIMEOUT_S)
        if not line or not line[0].startswith("memoryd ready"):
            self.kill()
            raise AssertionError(
                f"daemon did not start: {line} {''.join(self.stderr_lines)[-3000:]}"
            )
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        words = line[0].split()
        self.unix = words[2][len("unix://") :]
        self.http = words[3].removeprefix("http://") if len(words) > 3 else ""
        return self

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def restart(self) -> Daemon:
        """SIGKILL, then start again on the same data directory."""
        self.kill()
        return self.start()

    def close(self) -> None:
        """Stop the process (SIGKILL if it lingers) and remove its temp directory."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.terminate(30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Daemon:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def events(self, name: str) -> list[dict[str, Any]]:
        """The JSON log records named ``name`` the daemon has written to stderr so far."""
        found = []
        for line in list(self.stderr_lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == name:
                found.append(record)
        return found

    def connect(self, **options: Any) -> Any:
        """A RemoteStore on this daemon's socket."""
        import memoryd

        return memoryd.connect(self.address, **options)

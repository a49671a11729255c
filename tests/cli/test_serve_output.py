"""What ``memoryd serve`` writes: hints on stdout that run as printed, logs on stderr
(JSON lines in a pipe, console lines on a terminal)."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.server.daemon import usage_text
from tests.helpers import Worker, wait_until
from tests.server.daemon import Daemon

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env_without_the_venv() -> dict[str, str]:
    """The environment of a shell where this virtualenv is not activated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def data() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))  # short: the socket path must fit
    yield root / "d"
    shutil.rmtree(root, ignore_errors=True)


def test_serve_logs_json_lines_on_a_stderr_that_is_not_a_terminal() -> None:
    """Every line on a piped stderr is a JSON event with its level and timestamp."""
    daemon = Daemon().start()
    try:
        daemon.connect().add("c", [{"role": "user", "content": "hi"}])
        assert daemon.terminate() == 0
        wait_until(lambda: daemon.events("daemon_stopped"), timeout=30)
    finally:
        daemon.close()
    records = [json.loads(line) for line in daemon.stderr_lines if line.strip()]
    assert all({"event", "level", "timestamp"} <= set(r) for r in records)
    assert [r["event"] for r in records if r["event"].startswith("daemon_")] == [
        "daemon_started",
        "daemon_stopping",
        "daemon_stopped",
    ]


def test_serve_logs_console_lines_on_a_terminal(data: Path) -> None:
    """With stderr a terminal the events are lines for people, not JSON."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", "serve", "--data", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=_env_without_the_venv(),
    )
    os.close(follower)
    seen: list[str] = []

    def read_until_started() -> str:
        text = ""
        while "daemon_started" not in text:
            chunk = os.read(leader, 4096)
            if not chunk:
                break
            text += chunk.decode(errors="replace")
        return text

    try:
        reader = Worker(read_until_started)
        reader.start()
        seen.append(reader.outcome(timeout=60))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        os.close(leader)
    line = re.sub(
        r"\x1b\[[0-9;]*m", "", next(x for x in seen[0].splitlines() if "daemon_started" in x)
    )
    assert "[info" in line and f"data={data}" in line
    with pytest.raises(ValueError):
        json.loads(line)


def test_the_hints_name_the_virtualenv_relative_to_where_serve_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started from the directory holding its virtualenv, with the virtualenv not on PATH
    (``make run``), the hints say ``.venv/bin/memoryd`` and ``.venv/bin/python``."""
    monkeypatch.setenv("PATH", _env_without_the_venv()["PATH"])
    monkeypatch.chdir(BIN.parent.parent)
    venv = BIN.parent.name
    text = usage_text({"unix": "/s.sock"}, token=False)
    assert f"    {venv}/bin/memoryd --address unix:///s.sock get demo" in text.splitlines()
    assert f"    {venv}/bin/python -c " in text
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    assert "    memoryd --address unix:///s.sock get demo" in usage_text({"unix": "/s.sock"}, False)


def test_the_printed_hints_run_as_printed(data: Path, tmp_path: Path) -> None:
    """Started without its virtualenv on PATH, serve prints hints that a shell runs as
    printed: each one talks to the daemon."""
    env = _env_without_the_venv()
    proc = subprocess.Popen(
        [str(BIN / "memoryd"), "serve", "--data", str(data)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        out = proc.stdout

        def hints() -> list[str]:
            lines = [out.readline() for _ in range(6)]
            return [x.strip() for x in lines[2:]]

        reader = Worker(hints)
        reader.start()
        add, get, curl, python = reader.outcome(timeout=60)
        assert add.startswith(f"{BIN}/memoryd ") and python.startswith(f"{BIN}/python")
        results = []
        for hint in (add, get, python) + ((curl,) if shutil.which("curl") else ()):
            done = subprocess.run(
                ["bash", "-c", hint],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, f"{hint}\n{done.stderr}"
            results.append(done.stdout)
        assert json.loads(results[0]) == {"version": 1}
        assert json.loads(results[1]) == [{"role": "user", "content": "hello"}]
        assert "'content': 'hello'" in results[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def test_a_daemon_whose_stderr_nobody_reads_keeps_serving(data: Path) -> None:
    """At debug level every request is logged; with a stderr pipe that nobody reads (full
    after a few hundred lines) the daemon still answers 1,000 writes and stops cleanly."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", "serve", "--data", str(data), "--log-level", "debug"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env_without_the_venv(),
    )
    try:
        assert proc.stdout is not None
        reader = Worker(proc.stdout.readline)
        reader.start()
        ready = reader.outcome(timeout=60)
        assert ready.startswith("memoryd ready unix://"), ready
        store = memoryd.connect(ready.split()[2], timeout=60)
        for i in range(1000):
            store.add("c", [{"role": "user", "content": f"message {i} " + "x" * 100}])
        assert store.version("c") == 1000
        store.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(100) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()

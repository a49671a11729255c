"""The daemon token never needs the command line: ``MEMORYD_TOKEN`` or ``--token-file``.

A token given as ``--token VALUE`` is visible to every local user in ``ps``; it still
works, with a warning. The README shows no example that puts a token there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memoryd.cli.commands import token_of
from memoryd.cli.parser import parser
from tests.server.daemon import Daemon

ROOT = Path(__file__).resolve().parents[2]


class TokenFileDaemon(Daemon):
    """A daemon on TCP whose token comes from ``--token-file`` (no MEMORYD_TOKEN)."""

    def __init__(self, token_file: Path, *, flag: str = "--token-file") -> None:
        super().__init__(tcp=True, token=None, extra=())
        self.token_file = token_file
        self.flag = flag

    def command(self) -> list[str]:
        value = str(self.token_file) if self.flag == "--token-file" else "from-the-flag"
        return [*super().command(), self.flag, value]


def _status(daemon: Daemon, token: str | None) -> int:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"http://{daemon.http}/v1/stats", headers=headers, timeout=30)
    return response.status_code


def test_serve_reads_the_token_from_a_file(tmp_path: Path) -> None:
    """``serve --token-file`` protects TCP with the file's token (trailing newline ignored)."""
    path = tmp_path / "token"
    path.write_text("from-a-file\n")
    with TokenFileDaemon(path).start() as daemon:
        assert _status(daemon, "from-a-file") == 200
        assert _status(daemon, None) == 401
        assert _status(daemon, "wrong") == 401
        assert not any("warning" in line for line in daemon.stderr_lines)


def test_serve_with_a_token_on_the_command_line_warns(tmp_path: Path) -> None:
    """``serve --token VALUE`` works, and warns that ``ps`` shows the token."""
    with TokenFileDaemon(tmp_path / "unused", flag="--token").start() as daemon:
        assert _status(daemon, "from-the-flag") == 200
        warned = "".join(daemon.stderr_lines)
        assert "--token shows the token to every local user" in warned
        assert "from-the-flag" not in warned


def test_token_sources_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--token-file first, then --token, then MEMORYD_TOKEN; an empty file is an error."""
    monkeypatch.setenv("MEMORYD_TOKEN", "from-env")
    assert token_of(parser().parse_args(["stats"])) == "from-env"
    path = tmp_path / "t"
    path.write_text("from-file\n")
    assert token_of(parser().parse_args(["--token-file", str(path), "stats"])) == "from-file"
    assert token_of(parser().parse_args(["--token", "given", "stats"])) == "given"
    path.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        token_of(parser().parse_args(["stats", "--token-file", str(path)]))
    with pytest.raises(ValueError, match="cannot read the token file"):
        token_of(parser().parse_args(["stats", "--token-file", str(tmp_path / "none")]))


def test_a_client_command_reads_the_token_from_a_file(tmp_path: Path) -> None:
    """``memoryd --token-file FILE --address http://… version c`` is authorised."""
    path = tmp_path / "token"
    path.write_text("client-file\n")
    with TokenFileDaemon(path).start() as daemon:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        address = f"http://{daemon.http}"
        command = ["--address", address, "--token-file", str(path), "version", "c"]
        done = subprocess.run(
            [sys.executable, "-m", "memoryd.cli", *command],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "warning" not in done.stderr


def test_no_example_puts_a_token_on_the_command_line() -> None:
    """README, docs and examples never pass a token value with ``--token``."""
    texts = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("examples/**/*.py")]
    shown = re.compile(r"--token[ =]+[\"']?\$|--token[ =]+[\"']?[A-Za-z0-9]")
    offenders = [str(p) for p in texts if p.is_file() and shown.search(p.read_text())]
    assert offenders == []

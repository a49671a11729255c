"""The command line explains itself: help on every option, checked numbers, a README that
lists every command."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.cli.parser import parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _memoryd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
    )


def _commands(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse keeps its sub-commands on a private action; no public accessor exists
    found = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1
    choices: dict[str, argparse.ArgumentParser] = found[0].choices
    return choices


def _help_commands() -> list[str]:
    """The command names ``memoryd --help`` lists, in its order."""
    shown = _memoryd("--help")
    assert shown.returncode == 0, shown.stderr
    return re.findall(r"^    ([a-z]+)\b", shown.stdout, flags=re.MULTILINE)


def test_every_option_and_argument_has_help_text() -> None:
    """No option or positional argument of memoryd or of any command lacks help."""
    top = parser()
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, sub in [("memoryd", top), *_commands(top).items()]
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_fork_help_names_its_real_arguments() -> None:
    """``memoryd fork --help`` shows SOURCE and TARGET, and says what each is."""
    shown = _memoryd("fork", "--help")
    assert shown.returncode == 0, shown.stderr
    usage = shown.stdout.split("\n\n")[0]
    assert usage.rstrip().endswith("SOURCE TARGET")
    assert "TARGET as a copy of" in shown.stdout
    assert "SRC" not in shown.stdout and "DST" not in shown.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["import", "dump.jsonl", "--workers", "0"],
        ["tail", "--limit", "0"],
        ["get", "c", "--limit", "-1"],
        ["conversations", "--limit", "many"],
        ["get", "c", "--timeout", "0"],
        ["get", "c", "--timeout", "-1"],
        ["get", "c", "--timeout", "nan"],
        ["get", "c", "--timeout", "inf"],
        ["get", "c", "--timeout", "1e308"],
    ],
    ids=[
        "import-workers-0",
        "tail-limit-0",
        "get-limit-negative",
        "conversations-limit-word",
        "timeout-0",
        "timeout-negative",
        "timeout-nan",
        "timeout-inf",
        "timeout-beyond-a-socket",
    ],
)
def test_counts_below_one_are_refused_as_usage_errors(args: list[str]) -> None:
    """A count that must be positive, or a timeout that is not a number of seconds above 0
    and at most a day (NaN, infinity, 1e308: a socket cannot wait that long), is checked
    by the parser: exit 2, naming the option, before any store is opened."""
    refused = _memoryd(*args, "--data", "/nonexistent/memoryd-data")
    assert refused.returncode == 2
    option = next(a for a in args if a.startswith("--"))
    assert f"argument {option}" in refused.stderr
    assert not Path("/nonexistent/memoryd-data").exists()


def test_the_readme_lists_every_command() -> None:
    """Each command of ``memoryd --help`` has a row in the README's command table, and
    the table names no command that does not exist."""
    listed = _help_commands()
    assert "serve" in listed and "tail" in listed and len(listed) == len(_commands(parser()))
    text = README.read_text(encoding="utf-8")
    section = text.split("## The command line", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `memoryd ([a-z]+)", section, flags=re.MULTILINE)
    assert sorted(rows) == sorted(listed)


def test_serve_defaults_and_bounds_are_the_daemons_own() -> None:
    """The parser keeps its defaults as literals (a short command imports no daemon
    module); they and the bounds its help names are `ServerConfig`'s, so the command line
    and the library cannot drift apart."""
    from memoryd.server.config import (
        DEFAULT_HEAD_TIMEOUT_S,
        MAX_HEAD_TIMEOUT_S,
        MIN_HEAD_TIMEOUT_S,
        ServerConfig,
    )

    serve = _commands(parser())["serve"]
    defaults = {a.dest: a for a in serve._actions}
    assert defaults["head_timeout"].default == DEFAULT_HEAD_TIMEOUT_S
    assert defaults["max_stores"].default == ServerConfig.__dataclass_fields__["max_stores"].default
    assert f"default {DEFAULT_HEAD_TIMEOUT_S:g}" in defaults["head_timeout"].help
    assert f"from {MIN_HEAD_TIMEOUT_S:g} to {MAX_HEAD_TIMEOUT_S:g}" in defaults["head_timeout"].help


def test_python_dash_m_memoryd_is_the_command_line() -> None:
    """``python -m memoryd`` runs the same command line as the ``memoryd`` script (it
    said "No module named memoryd.__main__")."""
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: memoryd ")


@pytest.mark.parametrize(("given", "deadline"), [(["--timeout", "37"], 37.0), ([], 10.0)])
def test_timeout_sets_the_deadline_of_a_data_stores_writes(
    tmp_path: Path, given: list[str], deadline: float
) -> None:
    """``--timeout`` reaches a ``--data`` store as its call timeout (it used to reach a
    daemon only, so a big import on a slow disk met the store's 10 s at every chunk);
    without it the store keeps its own default."""
    import memoryd
    from memoryd.cli import commands

    args = parser().parse_args([*given, "--data", str(tmp_path / "data"), "add", "c"])
    store = commands.open_store(args)
    try:
        assert store.call_timeout_s == deadline
    finally:
        memoryd.shutdown()

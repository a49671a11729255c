"""The command line runs a one-call command without the cyclic garbage collector, every
other command with it, and leaves the collector as it found it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memoryd

_PROBE = """
import gc, io, json, sys
from memoryd.cli.main import main

class Sink(io.StringIO):
    states = set()

    def write(self, text):
        Sink.states.add(gc.isenabled())  # the collector's state while the command prints
        return super().write(text)

if sys.argv[1] == "off":
    gc.disable()
real, sys.stdout = sys.stdout, Sink()
try:
    code = main(sys.argv[2:])
finally:
    sys.stdout = real
print(json.dumps({"code": code, "while": sorted(Sink.states), "after": gc.isenabled()}))
"""


def _probe(collector: str, *args: str) -> dict[str, Any]:
    """Run ``memoryd *args`` in a fresh interpreter whose collector is ``collector``
    ("on" or "off") beforehand: its exit status, the collector's states seen while it
    printed, and the collector's state once it returned."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, collector, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
    )
    seen: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return seen


@pytest.fixture
def data(tmp_path: Path) -> Path:
    store = memoryd.LmdbStore.start(tmp_path / "data", name="cli-gc")
    store.add("c", [memoryd.messages.user("hello")])
    store.stop()
    return tmp_path / "data"


@pytest.mark.parametrize(
    "command",
    [("get", "c"), ("version", "c"), ("add", "c", "--content", "more")],
    ids=["get", "version", "add"],
)
def test_a_one_call_command_runs_without_the_collector_and_restores_it(
    data: Path, command: tuple[str, ...]
) -> None:
    """A one-call command prints with the collector off, and turns it back on after."""
    seen = _probe("on", "--data", str(data), *command)
    assert seen == {"code": 0, "while": [False], "after": True}


@pytest.mark.parametrize(
    "command", [("tail",), ("export",), ("conversations",)], ids=["tail", "export", "list"]
)
def test_other_commands_keep_or_skip_the_collector_as_they_need(
    data: Path, command: tuple[str, ...]
) -> None:
    """``tail`` and ``export`` (as long as they need) print with the collector on; a
    listing is a one-call command. Each leaves it on."""
    seen = _probe("on", "--data", str(data), *command)
    assert seen == {"code": 0, "while": [command != ("conversations",)], "after": True}


def test_a_collector_turned_off_by_the_caller_stays_off(data: Path) -> None:
    """``main`` called by a program that turned the collector off leaves it off, even
    for a command that runs with it on."""
    assert _probe("off", "--data", str(data), "tail") == {
        "code": 0,
        "while": [False],
        "after": False,
    }


def test_usage_errors_restore_the_collector() -> None:
    """A command line argparse refuses (it exits) still turns the collector back on."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, sys\nfrom memoryd.cli.main import main\n"
            "try:\n    main(['get'])\nexcept SystemExit:\n    pass\nprint(gc.isenabled())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["True"]


_AS_PROGRAM = """
import gc, os, sys
from memoryd.cli.main import main
sys.argv = ["memoryd", *sys.argv[2:]]
code = main() if os.environ["AS"] == "program" else main(sys.argv[1:])
print(code, gc.get_freeze_count() > 0, gc.isenabled(), file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("entry", "command", "frozen"),
    [
        ("program", ("get", "c"), True),
        ("program", ("tail",), False),
        ("function", ("get", "c"), False),
    ],
    ids=["program-get", "program-tail", "function-get"],
)
def test_only_the_program_leaves_a_one_call_command_frozen(
    data: Path, entry: str, command: tuple[str, ...], frozen: bool
) -> None:
    """Run as the program (no arguments given to ``main``), a one-call command returns
    with what it loaded frozen, for the shutdown that follows to skip; ``tail``, and
    ``main`` called with arguments by another program, freeze nothing."""
    done = subprocess.run(
        [sys.executable, "-c", _AS_PROGRAM, "-", "--data", str(data), "--json", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
            "AS": entry,
        },
    )
    assert done.stderr.split()[-3:] == ["0", str(frozen), "True"]

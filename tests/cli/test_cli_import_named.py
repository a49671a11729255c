"""``memoryd import`` into a named store the daemon does not have yet creates it (the first
write creates a store), through ``--address`` and through ``--data DIR`` served by a
daemon; reads of a missing store still say `UnknownStore`, and a refused file creates
nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._run import run
from tests.server.daemon import Daemon

_HEADER = {"format": "memoryd-export", "schema": 1, "store": "src", "cut": "per-conversation"}


def _line(cid: str, version: int, text: str) -> dict[str, object]:
    return {
        "conversation_id": cid,
        "version": version,
        "kind": "appended",
        "messages": [{"role": "user", "content": text}],
        "timestamp": 1717000000.5,
        "idempotency_key": None,
        "data": None,
    }


def _export(path: Path, lines: list[dict[str, object]]) -> Path:
    end = {
        "end": True,
        "conversations": len({o["conversation_id"] for o in lines}),
        "events": len(lines),
    }
    with open(path, "w", encoding="utf-8") as out:
        for obj in [_HEADER, *lines, end]:
            out.write(json.dumps(obj) + "\n")
    return path


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """A daemon on its Unix socket, with no named store yet."""
    with Daemon().start() as running:
        yield running


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    """An export of conversations ``a`` (two events) and ``b``."""
    return _export(
        tmp_path / "a.jsonl", [_line("a", 1, "hi"), _line("a", 2, "again"), _line("b", 1, "x")]
    )


def _texts(*args: str) -> list[str]:
    done = run(*args, "--json", "get", "a")
    assert done.returncode == 0, done.stderr
    return [m["content"] for m in json.loads(done.stdout)]


def test_import_through_the_address_creates_the_named_store(
    daemon: Daemon, export_file: Path
) -> None:
    """An import into a store the daemon never had writes it, as ``add`` would."""
    where = ("--address", daemon.address, "--store", "fresh-address")
    done = run(*where, "--json", "import", str(export_file))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == 2
    assert _texts(*where) == ["hi", "again"]
    again = run(*where, "--json", "import", str(export_file))  # idempotent
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["present"] == 2


def test_import_through_a_served_data_directory_creates_the_named_store(
    daemon: Daemon, export_file: Path
) -> None:
    """``--data DIR`` goes through the daemon that serves DIR, and creates the store too."""
    where = ("--data", str(daemon.data), "--store", "fresh-data")
    done = run(*where, "--json", "import", str(export_file))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == 2
    assert _texts("--address", daemon.address, "--store", "fresh-data") == ["hi", "again"]


def test_a_read_of_a_missing_store_still_says_unknown_store(daemon: Daemon) -> None:
    """Only an import reads a missing store as empty: a mistyped name on a read is said."""
    done = run("--address", daemon.address, "--store", "never-made", "get", "a")
    assert done.returncode == 1
    assert "UnknownStore" in done.stderr


def test_a_refused_file_creates_no_store(daemon: Daemon, tmp_path: Path) -> None:
    """A file refused by its check (a version gap) writes nothing: the store is not made."""
    bad = _export(tmp_path / "bad.jsonl", [_line("a", 1, "hi"), _line("a", 3, "gap")])
    where = ("--address", daemon.address, "--store", "refused-import")
    done = run(*where, "import", str(bad))
    assert done.returncode == 1
    assert "line 3" in done.stderr, done.stderr
    listed = run(*where, "conversations")
    assert listed.returncode == 1
    assert "UnknownStore" in listed.stderr

"""Ctrl-C at the worst moment: just after a file or directory is made, before the code
that would remove it again has its name. A real SIGINT is raised at that moment (inside
the call that makes the thing, as it returns), and nothing made may be left behind.

The moment is staged by wrapping the maker so that it raises the signal once its work is
done: a SIGINT sent from outside lands there only by chance (it did, once, in CI)."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages
from memoryd.cli import commands
from memoryd.export import ExportSummary
from memoryd.store.lmdb import backup as backup_module


def _interrupted_after(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make``, with a real SIGINT raised the moment it has done its work."""

    def making(*args: Any, **kwargs: Any) -> Any:
        made = make(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return made

    return making


def _nothing_written(stream: Any) -> ExportSummary:
    raise AssertionError("the export must not start once Ctrl-C was pressed")


@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "existing-file"])
def test_ctrl_c_as_the_partial_export_file_is_made_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    out = tmp_path / "export.jsonl"
    if existing:
        out.write_text("the previous export\n", encoding="utf-8")
    monkeypatch.setattr(tempfile, "mkstemp", _interrupted_after(tempfile.mkstemp))
    with pytest.raises(KeyboardInterrupt):
        commands._export_to_file(out, _nothing_written)
    assert os.listdir(tmp_path) == (["export.jsonl"] if existing else [])
    if existing:
        assert out.read_text(encoding="utf-8") == "the previous export\n"


def test_ctrl_c_as_the_spooled_copy_of_a_pipe_is_made_leaves_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "spool"))
    (tmp_path / "spool").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    source = tmp_path / "source.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(tempfile, "mkstemp", _interrupted_after(tempfile.mkstemp))
    with pytest.raises(KeyboardInterrupt), commands._spooled(str(source)):
        raise AssertionError("the copy must not be handed out once Ctrl-C was pressed")
    assert os.listdir(tmp_path / "spool") == []


def test_ctrl_c_as_the_backup_directory_is_made_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    store = memoryd.LmdbStore.start(data, name="interrupt-windows")
    try:
        store.add("c", [messages.user("hi")])
    finally:
        store.stop()
    monkeypatch.setattr(backup_module, "make_dir", _interrupted_after(backup_module.make_dir))
    with pytest.raises(KeyboardInterrupt):
        backup_module.backup(data, tmp_path / "copy")
    assert sorted(os.listdir(tmp_path)) == ["data"]


def test_the_wrapper_raises_a_real_interrupt_where_it_says() -> None:
    """The staging itself: the SIGINT is raised by Python's own handler, after the work."""
    made: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _interrupted_after(made.append)("done")
    assert made == ["done"]

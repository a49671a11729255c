"""`memoryd._after_import.when_imported`: a callback right after a module's first import."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd._after_import import when_imported


@pytest.fixture
def fresh_module(tmp_path: Path) -> Iterator[str]:
    """The name of a module that exists on sys.path and was never imported."""
    name = f"after_import_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield name
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_a_loaded_module_calls_back_at_once() -> None:
    """A module imported already: the callback runs before when_imported returns."""
    calls: list[str] = []
    when_imported("json", lambda: calls.append("json"))
    assert calls == ["json"]


def test_the_callback_runs_after_the_modules_code_before_the_import_returns(
    fresh_module: str,
) -> None:
    """Nothing happens until the import; then the module has run when the callback sees it."""
    seen: list[int] = []
    when_imported(fresh_module, lambda: seen.append(sys.modules[fresh_module].VALUE))
    assert seen == []
    __import__(fresh_module)
    assert seen == [42]


def test_the_hook_leaves_the_import_system_after_its_module_loaded(fresh_module: str) -> None:
    """The finder is on sys.meta_path only until its module is loaded, and calls back once."""
    before = list(sys.meta_path)
    calls: list[str] = []
    when_imported(fresh_module, lambda: calls.append("x"))
    assert len(sys.meta_path) == len(before) + 1
    __import__(fresh_module)
    sys.modules.pop(fresh_module)
    __import__(fresh_module)
    assert calls == ["x"]
    assert sys.meta_path == before


def test_other_imports_pass_through_untouched(fresh_module: str) -> None:
    """While it waits, other modules import as they always do."""
    when_imported(fresh_module, lambda: None)
    import email.mime.text  # noqa: F401 (a module the test run has not loaded)

    assert "email.mime.text" in sys.modules
    __import__(fresh_module)

"""The pure core's boundaries (STYLE §1, §2): which modules import msgpack or anything
that does I/O, and sorted `__all__` lists."""

from __future__ import annotations

import ast
import pathlib
import types

import pytest

import memoryd
from memoryd import (
    _codec_msgpack,
    _codec_runs,
    _event_kinds,
    _event_records,
    _json_values,
    _message_batch,
    _message_checks,
    codec,
    events,
    messages,
)
from memoryd.store.lmdb import keys


def test_only_codec_imports_msgpack() -> None:
    """No module of the memoryd package but the codec (memoryd/codec.py and its private
    memoryd/_codec_*.py modules) imports msgpack (STYLE §2)."""
    root = pathlib.Path(memoryd.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.parent == root and (path.name == "codec.py" or path.name.startswith("_codec_")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "msgpack" or name.startswith("msgpack.") for name in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


@pytest.mark.parametrize(
    "module",
    [
        "errors",
        "messages",
        "_message_batch",
        "_message_checks",
        "_json_values",
        "events",
        "_event_kinds",
        "_event_records",
        "codec",
        "_codec_msgpack",
        "_codec_runs",
        "store/lmdb/keys",
        "store/requests",
        "store/_argument_checks",
        "store/_write_requests",
    ],
)
def test_core_modules_import_nothing_that_does_io(module: str) -> None:
    """The pure modules import no threads, clocks, files, sockets, LMDB or actors."""
    path = pathlib.Path(memoryd.__file__).parent / f"{module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    forbidden = {
        "os",
        "io",
        "time",
        "datetime",
        "threading",
        "socket",
        "lmdb",
        "pykka",
        "pickle",
        "random",
        "asyncio",
    }
    assert imported & forbidden == set()


@pytest.mark.parametrize(
    "module",
    [
        codec,
        _codec_msgpack,
        _codec_runs,
        events,
        _event_kinds,
        _event_records,
        keys,
        messages,
        _message_batch,
        _message_checks,
        _json_values,
    ],
    ids=lambda m: m.__name__,
)
def test_core_all_is_sorted(module: types.ModuleType) -> None:
    """Each pure core module's __all__ is sorted (isort-style, as ruff's RUF022 enforces)
    and every name in it exists."""

    def isort_style(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2), name

    assert module.__all__ == sorted(module.__all__, key=isort_style)
    for name in module.__all__:
        assert hasattr(module, name)

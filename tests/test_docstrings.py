"""Every module says its one concept in an opening docstring, so the tree reads as a map."""

from __future__ import annotations

import ast
import pathlib

import pytest

import memoryd
import supervisors

_ROOTS = (pathlib.Path(memoryd.__file__).parent, pathlib.Path(supervisors.__file__).parent)
_MODULES = sorted(path for root in _ROOTS for path in root.rglob("*.py"))


@pytest.mark.parametrize("path", _MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_module_opens_with_a_docstring(path: pathlib.Path) -> None:
    """A module without an opening docstring, or with an empty one, fails here."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring and docstring.strip(), f"{path} has no opening docstring"

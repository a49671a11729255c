"""Run a function right after a module's first import: the hook lazy loading relies on.

`when_imported` calls its callback at once when the module is loaded already, and
otherwise right after the module's code has run the first time it is imported, in the
importing thread, before the import statement returns. memoryd uses it to configure
structlog only once something loads it, and to attach the supervision tree only once
the table of stores exists, so a program that needs neither does not load them.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["when_imported"]

_lock = threading.Lock()


def when_imported(name: str, callback: Callable[[], object]) -> None:
    """Call ``callback()`` once module ``name`` is loaded: now, or after its first import.

    Args:
        name: the module's full dotted name.
        callback: called with no arguments; what it raises reaches the importer.
    """
    with _lock:
        if name not in sys.modules:
            sys.meta_path.insert(0, _AfterImport(name, callback))
            return
    callback()


class _AfterImport:
    """A `sys.meta_path` finder that wraps one module's loader to call back after it ran.

    It finds the module's spec with the finders behind it, and leaves `sys.meta_path`
    once the module has executed.
    """

    def __init__(self, name: str, callback: Callable[[], object]) -> None:
        self._name = name
        self._callback = callback

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The spec of the watched module, whose loader calls back; None for any other."""
        if fullname != self._name:
            return None
        spec: importlib.machinery.ModuleSpec | None = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_then_call_back(module: ModuleType) -> None:
            execute(module)
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            self._callback()

        spec.loader.exec_module = exec_then_call_back  # type: ignore[method-assign]
        return spec

"""The Redis backend's import graph: no circles among its modules, the engine on top.

The graph is read from the source with `ast`, so an import under ``if TYPE_CHECKING:``
or inside a function counts like any other.
"""

from __future__ import annotations

import ast
import pathlib

import memoryd.store.redis

PACKAGE = "memoryd.store.redis"
ROOT = pathlib.Path(memoryd.store.redis.__file__).parent


def sibling_imports(root: pathlib.Path, package: str) -> dict[str, set[str]]:
    """For each module in ``root`` (the package ``package``), the sibling modules it imports.

    Counts ``import package.x``, ``from package import x``, ``from package.x import y``
    and the relative forms ``from . import x`` and ``from .x import y``, wherever they
    stand in the module.
    """
    modules = {path.stem for path in root.glob("*.py") if path.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    base = package if node.module is None else f"{package}.{node.module}"
                elif node.level == 0 and node.module is not None:
                    base = node.module
                else:
                    continue
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target.startswith(package + "."):
                    head = target[len(package) + 1 :].split(".")[0]
                    if head in modules and head != name:
                        found.add(head)
        graph[name] = found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` as the modules along it (first repeated at the
    end), or None when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_the_redis_backend_has_no_import_circle() -> None:
    """No module under memoryd/store/redis imports, directly or through others, itself."""
    graph = sibling_imports(ROOT, PACKAGE)
    assert {"engine", "plan", "batch", "connections", "scripts"} <= graph.keys()
    assert find_cycle(graph) is None, f"import circle: {' -> '.join(find_cycle(graph) or [])}"


def test_the_engine_sits_on_top_of_plan_batch_connections_and_scripts() -> None:
    """The engine imports the planner, the batch, the connections and the scripts; none of
    them imports the engine (nor the actor or the handle above it)."""
    graph = sibling_imports(ROOT, PACKAGE)
    assert {"plan", "batch", "connections", "scripts"} <= graph["engine"]
    for low in ("plan", "batch", "connections", "scripts"):
        assert graph[low] & {"engine", "actor", "handle"} == set(), low


def test_only_connections_reaches_into_redis_py_connection_internals() -> None:
    """Making clients, pools and retries (redis.cluster, redis.connection, redis.retry,
    redis.backoff) is the connections module's alone."""
    internals = ("redis.cluster", "redis.connection", "redis.retry", "redis.backoff")
    users = set()
    for path in ROOT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(n == m or n.startswith(m + ".") for n in names for m in internals):
                users.add(path.stem)
    assert users == {"connections"}


def test_the_cycle_check_finds_a_circle_closed_under_type_checking(
    tmp_path: pathlib.Path,
) -> None:
    """The graph counts an ``if TYPE_CHECKING:`` import, so a circle it closes is found."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import Top\n"
    )
    (package / "mid.py").write_text("from . import low\n")
    (package / "top.py").write_text("from .mid import thing\nimport pkg.scripts\n")
    (package / "scripts.py").write_text("X = 1\n")
    graph = sibling_imports(package, "pkg")
    assert graph == {"low": {"top"}, "mid": {"low"}, "scripts": set(), "top": {"mid", "scripts"}}
    assert find_cycle(graph) == ["low", "top", "mid", "low"]
    del graph["low"]
    assert find_cycle(graph) is None

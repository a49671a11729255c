"""The layering rules of DESIGN §1, read from the source: every import of every module of
memoryd and supervisors (at module level, inside functions, under ``if TYPE_CHECKING:``;
relative imports resolved) points down the layer table, and no imports go round a circle.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator, Mapping

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("memoryd", "supervisors")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("users", ("memoryd.__main__", "memoryd.demo", "memoryd.testing")),
    ("facade", ("memoryd",)),
    ("cli", ("memoryd.cli",)),
    ("server", ("memoryd.server",)),
    ("integrations", ("memoryd.integrations",)),
    ("agents", ("memoryd.agents",)),
    ("agent", ("memoryd.agent",)),
    ("kernel", ("memoryd.kernel",)),
    ("memory", ("memoryd.memory",)),
    ("provider", ("memoryd.provider",)),
    ("llm", ("memoryd.llm",)),
    ("store tools", ("memoryd.export", "memoryd.aio")),
    ("client", ("memoryd.client",)),
    ("app", ("memoryd.app",)),
    ("store", ("memoryd.store",)),
    ("wire", ("memoryd.protocol",)),
    ("logging", ("memoryd.logging",)),
    (
        "core",
        (
            "memoryd._after_import",
            "memoryd._codec_msgpack",
            "memoryd._codec_runs",
            "memoryd._deadline",
            "memoryd._event_kinds",
            "memoryd._event_records",
            "memoryd._ids",
            "memoryd._json_values",
            "memoryd._lazy",
            "memoryd._message_checks",
            "memoryd._message_batch",
            "memoryd._outage",
            "memoryd._shown",
            "memoryd._sockets",
            "memoryd._version",
            "memoryd.codec",
            "memoryd.errors",
            "memoryd.events",
            "memoryd.messages",
        ),
    ),
)
"""DESIGN §1's layers, top first: a module may import its own layer and the layers below.

Where §1 draws two folders on one row, the one that uses the other sits above it: cli
drives the server, long-term memory wraps a provider, the daemon client is a store
handle. ``llm`` sits below provider and memory because the summarising provider and
long-term memory call a model (DESIGN §3.4); ``app`` above store because no store module
may import it while it starts the store actor. ``memoryd`` itself is the facade users
import (``demo`` and the store contract suite ``testing`` use it as users do);
``protocol`` is the daemon's pure wire format."""

UPWARD_ALLOWED: Mapping[tuple[str, str], str] = {
    ("memoryd.memory.filter", "memoryd.kernel.filters"): (
        "LongTermMemory.rerank_filter() returns a kernel Filter: the recall filter is "
        "the kernel filter of the memory layer"
    ),
}
"""The imports that point up the table, each with its reason."""


def _module_files() -> dict[str, tuple[pathlib.Path, bool]]:
    """Every module of the packages: name -> (file, is a package's ``__init__``)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


MODULES = _module_files()


def _imported(name: str) -> Iterator[tuple[str, int]]:
    """The names each import statement of a module imports, with its line number:
    ``from a.b import c`` gives ``a.b.c`` when that is a module, else ``a.b``."""
    path, is_package = MODULES[name]
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                yield (candidate if candidate in MODULES else source), node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """module -> {module of ours it imports: first line}."""
    graph: dict[str, dict[str, int]] = {}
    for name in MODULES:
        edges: dict[str, int] = {}
        for target, line in _imported(name):
            if target.partition(".")[0] in PACKAGES and target != name:
                assert target in MODULES, f"{name}:{line} imports {target}, which does not exist"
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


GRAPH = _graph()


def _edges() -> Iterator[tuple[str, str, int]]:
    for source, targets in GRAPH.items():
        for target, line in targets.items():
            yield source, target, line


def _layer(module: str) -> int:
    """The row of the layer table that holds ``module`` (its longest matching prefix)."""
    best, best_length = -1, -1
    for row, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "memoryd" and module.startswith(prefix + "."))
            if matches and len(prefix) > best_length:
                best, best_length = row, len(prefix)
    return best


def _cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """One circle of imports per strongly connected component of more than one module
    (Tarjan's algorithm, iterative), each as the modules in import order, first repeated."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_circle_in(graph, set(component)) for component in components]


def _circle_in(graph: Mapping[str, Mapping[str, int]], component: set[str]) -> list[str]:
    """A shortest circle through the component's first module, staying inside it."""
    first = min(component)
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == first:
                    return [*paths[node], first]
                if child in component and child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle through {first} in {sorted(component)}")


def test_the_cycle_finder_reports_a_circle_as_modules() -> None:
    """The finder names each circle in import order and leaves acyclic imports alone."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"d": 1}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_every_module_has_a_layer() -> None:
    """The table places every module of memoryd, so no new folder escapes the rules."""
    unplaced = [m for m in MODULES if m.startswith("memoryd") and _layer(m) < 0]
    assert unplaced == []


def test_the_import_reader_sees_every_kind_of_import() -> None:
    """Imports inside functions, under TYPE_CHECKING and relative ones are all read."""
    assert "memoryd.llm.openai" in GRAPH["memoryd.llm"]  # inside a function
    assert "memoryd.agent" in GRAPH["memoryd"]  # under TYPE_CHECKING
    assert "supervisors._errors" in GRAPH["supervisors._spec"]  # a relative import


def test_no_import_cycles() -> None:
    """No module of memoryd or supervisors reaches itself through its imports."""
    cycles = _cycles(GRAPH)
    assert cycles == [], "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_supervisors_imports_nothing_of_memoryd() -> None:
    """The generic supervision package knows nothing of memoryd."""
    offenders = [
        f"{source}:{line} imports {target}"
        for source, target, line in _edges()
        if source.partition(".")[0] == "supervisors" and target.partition(".")[0] == "memoryd"
    ]
    assert offenders == [], "\n".join(offenders)


def test_no_store_module_imports_the_app() -> None:
    """The application knows its stores by spec; no store module imports memoryd.app."""
    offenders = [
        f"{source}:{line}"
        for source, target, line in _edges()
        if source.startswith("memoryd.store.") and target == "memoryd.app"
    ]
    assert offenders == [], "\n".join(offenders)


def test_the_app_imports_no_backend() -> None:
    """memoryd.app imports no module of the LMDB or Redis backend."""
    offenders = [
        f"memoryd.app:{line} imports {target}"
        for target, line in GRAPH["memoryd.app"].items()
        if target.startswith(("memoryd.store.lmdb", "memoryd.store.redis"))
    ]
    assert offenders == [], "\n".join(offenders)


_BACKENDS = ("memoryd.store.lmdb", "memoryd.store.redis")
_PICKS_A_BACKEND = {"memoryd.store.default"}
"""The one engine-agnostic store module that names a backend: the shared default store
is an LMDB store (durable, or ephemeral without a data directory)."""


def test_the_store_core_imports_no_backend() -> None:
    """The engine-agnostic modules of memoryd.store (requests, handle, actor, ...) import
    no backend, so a limit every backend applies lives in the core, not in one backend."""
    offenders = [
        f"{source}:{line} imports {target}"
        for source, target, line in _edges()
        if source.startswith("memoryd.store.")
        and not source.startswith(_BACKENDS)
        and source not in _PICKS_A_BACKEND
        and target.startswith(_BACKENDS)
    ]
    assert offenders == [], "\n".join(offenders)


def test_imports_point_down_the_layers() -> None:
    """Each import stays in its layer or goes to a layer below (DESIGN §1), but the few
    listed with their reason."""
    upward = [
        f"{source}:{line} ({LAYERS[_layer(source)][0]}) imports {target} "
        f"({LAYERS[_layer(target)][0]})"
        for source, target, line in _edges()
        if source.startswith("memoryd")
        and target.startswith("memoryd")
        and _layer(target) < _layer(source)
        and (source, target) not in UPWARD_ALLOWED
    ]
    assert upward == [], "\n".join(upward)


@pytest.mark.parametrize("pair", sorted(UPWARD_ALLOWED))
def test_each_allowed_upward_import_is_still_made(pair: tuple[str, str]) -> None:
    """An allowed upward import that is gone is struck from the list."""
    source, target = pair
    assert target in GRAPH[source]
    assert _layer(target) < _layer(source)

"""Every decoder of text memoryd did not write itself goes through one bounded entry.

``json.loads`` recurses, and about a thousand levels of ``[`` raise RecursionError,
which the callers that expect bad JSON (ValueError) do not catch: a tool call's
arguments from a model, an LLM's extraction reply, an import file, a session export.
`memoryd._json_values.loads` turns that into a ValueError; the daemon's body decoder
handles it itself. YAML is read in one place, by a loader that refuses aliases."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALLOWED = {
    ("json", "loads"): {"memoryd/_json_values.py", "memoryd/server/bodies.py"},
    ("yaml", "safe_load"): set(),
    ("yaml", "load"): {"memoryd/provider/session_export.py"},
    ("yaml", "full_load"): set(),
    ("yaml", "unsafe_load"): set(),
    ("response", "json"): set(),  # an HTTP answer: read bounded, then `loads`
}


def _calls() -> list[tuple[str, str, str, int]]:
    found = []
    for path in sorted((ROOT / "memoryd").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
            ):
                key = (node.func.value.id, node.func.attr)
                if key in ALLOWED:
                    found.append((*key, str(path.relative_to(ROOT)), node.lineno))
    return found


def test_untrusted_text_is_decoded_only_through_the_bounded_entries() -> None:
    calls = _calls()
    offenders = [f"{f}:{line} calls {m}.{a}" for m, a, f, line in calls if f not in ALLOWED[(m, a)]]
    assert offenders == [], "\n".join(offenders)
    assert {(m, a, f) for m, a, f, _ in calls} == {
        (m, a, f) for (m, a), files in ALLOWED.items() for f in files
    }

"""The README's quick start runs as written, twice in a row, without an error or a duplicate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import memoryd

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippets() -> list[tuple[str, str]]:
    """The quick start's fenced blocks, in order, as (language, code)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n#", 1)[0]
    blocks = re.findall(r"^```(python|sh)\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert [language for language, _ in blocks] == ["python", "sh"]
    return blocks


def _run(language: str, code: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    # the shell finds this environment's `memoryd`, as it does in an activated virtualenv
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-c", code]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{language} snippet failed:\n{code}\n{done.stderr}"


def test_quick_start_runs_twice_without_an_error_or_a_duplicate(tmp_path: Path) -> None:
    """Both runs succeed, and the store holds each message once: the first run's."""
    for _ in range(2):
        for language, code in _snippets():
            _run(language, code, tmp_path)
    store = memoryd.LmdbStore.start(tmp_path / "data" / "chat", name="quickstart-check")
    try:
        assert [m["content"] for m in store.get("session-1")] == [
            "My name is Alice",
            "Hi Alice",
            "What is my name?",
        ]
        assert [m["content"] for m in store.get("session-1b")] == ["My name is Alice", "Hi Alice"]
        assert store.conversations() == ["session-1", "session-1b"]
        assert store.version("session-1") == 3
    finally:
        store.stop()

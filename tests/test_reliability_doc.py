"""RELIABILITY.md ties each promise to its tests: every test file it names exists, and
every ``file::test`` it names is a test of that file, so a renamed or deleted test
cannot leave a promise pointing at nothing."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEXT = (ROOT / "RELIABILITY.md").read_text(encoding="utf-8")


def test_every_test_file_named_exists() -> None:
    named = set(re.findall(r"tests/[\w/]+\.py", TEXT))
    assert len(named) > 20
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert missing == []


def test_every_named_test_is_in_its_file() -> None:
    named = set(re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", TEXT))
    assert named
    missing = sorted(
        f"{path}::{test}"
        for path, test in named
        if not re.search(rf"def {test}\b", (ROOT / path).read_text(encoding="utf-8"))
    )
    assert missing == []

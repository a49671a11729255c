"""Fixtures of the long-term memory tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def model() -> Any:
    """The all-MiniLM-L6-v2 sentence-transformers model, loaded once per test session.

    Torch gets one thread: on a busy 2-core machine its default thread pool mostly
    waits on itself (a one-sentence encode goes from ~20 ms to ~250 ms).
    """
    import torch

    from memoryd.memory.dense import load_model

    torch.set_num_threads(1)
    return load_model()

"""Private helpers for ``tools/bench.py``: workloads, peer adapters, runners, report.

Nothing here is part of memoryd's public surface; ``tools/bench.py`` is the entry point.
"""

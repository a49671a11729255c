"""Harnesses shared by the tests (CI sizes) and ``tools/soak.py`` (long runs).

Nothing here is part of memoryd's public surface.
"""

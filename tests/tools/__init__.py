"""Tests of the tools/ harnesses."""

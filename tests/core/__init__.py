"""Tests of the pure core modules: messages, events, codec, keys, errors."""

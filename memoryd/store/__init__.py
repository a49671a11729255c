"""The storage layer: store actors and the handles that address them by name."""

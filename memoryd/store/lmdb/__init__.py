"""The LMDB backend: `LmdbStore` and `EphemeralStore`, their actor, engine and on-disk layout."""

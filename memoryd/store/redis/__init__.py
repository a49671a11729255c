"""The Redis backend: `RedisStore` on Redis or Redis Cluster, its actor, engine and scripts."""

"""Tests of the framework adapters in memoryd.integrations and the asyncio face."""

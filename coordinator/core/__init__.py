"""The domain, sans-IO: the partition (groups of every type, offsets, one `apply`), each group type's
machine, the runner that appends, applies, reverts and releases. Imports no asyncio, socket, ssl,
logging or prometheus_client, at any depth (tests/core/test_rooms.py)."""

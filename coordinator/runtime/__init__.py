"""The asyncio shell around the core: partitions' lifecycle, routing, housekeeping, the offsets log
writer and its fsync workers. Must not import the server, the API handlers or the cluster."""

"""The data directory: the offsets log, the topic catalog and the cluster identity."""

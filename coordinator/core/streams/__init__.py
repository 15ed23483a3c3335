"""Streams groups (KIP-1071): membership, the topology and its internal topics, the sticky task
assignor, reconciliation, the streams-group records."""

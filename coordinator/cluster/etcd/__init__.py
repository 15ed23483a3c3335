"""Cluster mode through etcd: leases and claims, the topic catalog, shared documents."""

"""The group coordinator: the sans-IO core (core/) and the rooms around it — runtime, security,
cluster, apis, chaos, server, observability, tools (coordinator/README.md)."""

__version__ = "0.1.0"

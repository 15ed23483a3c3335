"""Who owns what beyond one process: the cluster view, workers and their controller, etcd leases,
manifests and shared documents. Must not import the server or the API handlers."""
